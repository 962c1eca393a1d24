import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import { EtcdPrefixWatch } from '../../src/state/etcd-prefix-watch.js';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { suiteSkip } from '../support/required-peer.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const log = pino({ level: 'silent' });

/** What a watch handed over, as `key=value` with the prefix cut off. */
class Received {
  readonly seen: string[] = [];

  constructor(private readonly prefix: string) {}

  readonly onPut = (kv: { key: Buffer; value: Buffer }): void => {
    this.seen.push(`${kv.key.toString('utf8').slice(this.prefix.length)}=${kv.value.toString('utf8')}`);
  };

  /** Resolves once every one of `entries` was handed over. */
  async waitFor(entries: readonly string[], what: string): Promise<void> {
    await until(() => entries.every((e) => this.seen.includes(e)), 20_000, what, {
      describe: () => `handed over: ${this.seen.join(', ')}`,
    });
  }
}

describe('EtcdPrefixWatch, with a real etcd behind a relay', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let relay: TcpProxy;
  let writer: Etcd3;
  let follower: Etcd3;

  before(async () => {
    etcd = await EtcdServer.start();
    relay = await TcpProxy.start(etcd.clientPort);
    writer = new Etcd3({ hosts: `127.0.0.1:${etcd.clientPort}` });
    follower = new Etcd3({ hosts: relay.address });
  });
  after(async () => {
    follower.close();
    writer.close();
    await relay.close();
    await etcd.dispose();
  });

  it('hands over every key written while its connection was cut and etcd compacted, then every later write', async () => {
    // Two watches on one client, as a replica has (records, signals and policy records).
    const records = new Received('/m/records/');
    const signals = new Received('/m/signals/');
    const watches = [
      new EtcdPrefixWatch(follower, '/m/records/', 'records', log, records.onPut),
      new EtcdPrefixWatch(follower, '/m/signals/', 'signals', log, signals.onPut),
    ];
    try {
      // A watch follows writes from the moment it is connected: written until both hand it over.
      let n = 0;
      await until(
        async () => {
          n++;
          await writer.put('/m/records/ready').value(String(n)).exec();
          await writer.put('/m/signals/ready').value(String(n)).exec();
          return records.seen.length > 0 && signals.seen.length > 0;
        },
        20_000,
        'both watches connected',
      );
      await records.waitFor([`ready=${n}`], 'the last write while connecting');
      await signals.waitFor([`ready=${n}`], 'the last write while connecting');
      records.seen.length = 0;
      signals.seen.length = 0;
      await writer.put('/m/records/a').value('r1').exec();
      await writer.put('/m/records/gone').value('g1').exec();
      await writer.put('/m/signals/s').value('s1').exec();
      await records.waitFor(['a=r1', 'gone=g1'], 'the records before the cut');
      await signals.waitFor(['s=s1'], 'a signal before the cut');

      relay.pause({ newConnections: 'hold' });
      relay.dropConnections();
      await writer.put('/m/records/a').value('r2-overwritten').exec();
      await writer.put('/m/records/a').value('r2').exec();
      await writer.put('/m/records/b').value('b2').exec();
      await writer.delete().key('/m/records/gone').exec();
      await writer.put('/m/signals/s').value('s2').exec();
      const { header } = await writer.getAll().prefix('/m/').exec();
      await writer.kv.compact({ revision: header.revision, physical: true });
      relay.resume();

      await writer.put('/m/records/c').value('r3').exec();
      await records.waitFor(['a=r2', 'b=b2', 'c=r3'], 'the records written while cut and after');
      await signals.waitFor(['s=s2'], 'the signal written while cut');
      await writer.put('/m/records/a').value('r4').exec();
      await writer.put('/m/signals/s').value('s3').exec();
      await records.waitFor(['a=r4'], 'a record written once the watch is back');
      await signals.waitFor(['s=s3'], 'a signal written once the watch is back');

      // Each value once, in etcd's order; the history lost to compaction (the overwritten value,
      // the deletion) is not replayed, and a deleted key is not handed over again.
      assert.deepEqual(records.seen, ['a=r1', 'gone=g1', 'a=r2', 'b=b2', 'c=r3', 'a=r4']);
      assert.deepEqual(signals.seen, ['s=s1', 's=s2', 's=s3']);
    } finally {
      for (const w of watches) await w.cancel();
    }
  });

  it('hands over, from the revision of a read, the keys written between that read and the watch', async () => {
    await writer.put('/read/records/a').value('1').exec();
    const read = await follower.getAll().prefix('/read/records/').exec();
    // Written after the read, before any watch exists.
    await writer.put('/read/records/b').value('2').exec();
    const received = new Received('/read/records/');
    const watch = new EtcdPrefixWatch(
      follower,
      '/read/records/',
      'records',
      log,
      received.onPut,
      undefined,
      Number(read.header.revision),
    );
    try {
      await writer.put('/read/records/c').value('3').exec();
      await received.waitFor(['b=2', 'c=3'], 'the key written before the watch, and the one after');
      assert.deepEqual(received.seen, ['b=2', 'c=3']);
    } finally {
      await watch.cancel();
    }
  });
});
