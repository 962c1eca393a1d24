import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import type { SourceRecord } from '../../src/merge/source-record.js';
import {
  EtcdRecordStore,
  readEtcdRecords,
  type EtcdRecordStoreOptions,
} from '../../src/state/etcd-record-store.js';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { suiteSkip } from '../support/required-peer.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { fakeResource } from '../support/resources.js';

const log = pino({ level: 'silent' });

/** A record of `count` objects, each with a body of `bodyBytes` bytes. */
function record(source: string, count: number, bodyBytes = 16, tag = 'x'): SourceRecord {
  return {
    source,
    type: 'xds',
    revision: `${tag}-${count}`,
    savedMs: Date.now(),
    complete: true,
    answeredKinds: ['networking.istio.io/VirtualService'],
    resources: Array.from({ length: count }, (_, i) =>
      fakeResource(`vs-${i}`, { body: `${tag}${i}`.padEnd(bodyBytes, '.') }),
    ),
  };
}

describe('EtcdRecordStore, with a real etcd', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let prefixCount = 0;
  const opened: EtcdRecordStore[] = [];

  before(async () => {
    etcd = await EtcdServer.start();
  });
  after(async () => {
    for (const store of opened) await store.close();
    await etcd.dispose();
  });

  /** Opens a store on its own key prefix (or `prefix`), and remembers to close it. */
  async function open(
    prefix: string,
    extra: Partial<EtcdRecordStoreOptions> = {},
  ): Promise<Awaited<ReturnType<typeof EtcdRecordStore.open>>> {
    const result = await EtcdRecordStore.open({
      etcd: { endpoints: [etcd.endpoint], prefix, leaseTtlS: 2 },
      identity: `replica-${opened.length}`,
      log,
      delayMs: 20,
      retryMs: 200,
      probeMs: 100,
      requestTimeoutMs: 1_000,
      ...extra,
    });
    opened.push(result.store);
    return result;
  }

  const freshPrefix = (): string => `/test-${++prefixCount}/`;

  /** Every key under `prefix`. */
  const etcdKeys = async (prefix: string): Promise<string[]> => {
    const client = new Etcd3({ hosts: etcd.endpoint.replace('http://', '') });
    try {
      return await client.getAll().prefix(prefix).keys();
    } finally {
      client.close();
    }
  };

  /** What etcd holds under `prefix`, read without joining the election. */
  const stored = (prefix: string) => readEtcdRecords({ endpoints: [etcd.endpoint], prefix }, log, 1_000);

  it('stores a record larger than an etcd request and a gRPC answer in chunks, and reads the same record back', async () => {
    const prefix = freshPrefix();
    const writes: number[] = [];
    const { store } = await open(prefix, { hooks: { onWrite: (_s, bytes) => writes.push(bytes) } });
    await until(() => store.report().writer, 10_000, 'the only replica to be elected writer');
    // Over 4 MiB, what a gRPC client takes in one answer by default: before, such a record was
    // written but never read back.
    const big = record('upstream', 25_000, 200);
    store.changed('upstream', () => big);
    await until(() => writes.length === 1, 20_000, 'the record written');
    assert.ok((writes[0] ?? 0) > 4 * 1024 * 1024, `more than one answer's worth (${writes[0]} bytes)`);

    const loaded = await stored(prefix);
    const back = loaded.records.get('upstream');
    assert.deepEqual(loaded.problems, []);
    assert.equal(back?.resources.length, 25_000);
    assert.equal(back?.revision, big.revision);
    assert.deepEqual(
      [...(back?.resources ?? [])].map((r) => r.version),
      [...big.resources].map((r) => r.version),
      'every object, byte for byte (versions are content digests)',
    );
  });

  it('lets one replica write, and another take over within the lease when the writer goes away', async () => {
    const prefix = freshPrefix();
    const { store: first } = await open(prefix);
    await until(() => first.report().writer, 10_000, 'the first replica elected');
    const { store: second } = await open(prefix);
    const secondWrites: string[] = [];
    // A change the follower took before the writer stored its record of the same source.
    second.changed('early', () => record('early', 3, 16, 'second'));
    // The follower keeps its record and does not write: the writer's is what etcd holds.
    first.changed('early', () => record('early', 2, 16, 'first'));
    first.changed('files', () => record('files', 2, 16, 'first'));
    const holds = (source: string, revision: string) => async () =>
      (await stored(prefix)).records.get(source)?.revision === revision;
    await until(holds('files', 'first-2'), 10_000, "the writer's record in etcd");
    await until(holds('early', 'first-2'), 10_000, "the writer's record of the other source in etcd");
    // A change the follower takes once it knows of the writer's record.
    await until(
      () => (second.originOf('files').etcd?.revision ?? 0) > 0,
      10_000,
      "the follower told of the writer's record",
    );
    second.changed('files', () => {
      secondWrites.push('files');
      return record('files', 3, 16, 'second');
    });
    // A change of the other source that its upstream did not bring (a rule edited on reload, an
    // expiry) leaves its record as old as it was.
    second.changed('early', () => record('early', 3, 16, 'second-rules'), false);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(second.report().writer, false);
    assert.deepEqual(secondWrites, []);

    const gone = performance.now();
    await first.close();
    await until(() => second.report().writer, 10_000, 'the second replica elected');
    console.log(
      `# writer handover after the writer left: ${(performance.now() - gone).toFixed(0)} ms (lease 2 s)`,
    );
    await until(holds('files', 'second-3'), 10_000, 'the new writer to write what it held');
    assert.equal(secondWrites.length, 1, 'written once');
    // Its record of the other source was taken before the one the writer stored: that one stays.
    assert.equal((await stored(prefix)).records.get('early')?.revision, 'first-2');
  });

  it("writes, once elected, a record its upstream changed while etcd's state was unknown", async () => {
    const prefix = freshPrefix();
    const { store: first } = await open(prefix);
    await until(() => first.report().writer, 10_000, 'the first replica elected');
    first.changed('files', () => record('files', 2, 16, 'first'));
    const holds = async (revision: string): Promise<boolean> =>
      (await stored(prefix)).records.get('files')?.revision === revision;
    await until(() => holds('first-2'), 10_000, "the first replica's record in etcd");
    await first.close();
    // The next replica starts while etcd does not answer it: nothing orders its change against
    // the record in etcd, which may be of long before.
    const proxy = await TcpProxy.start(Number(new URL(etcd.endpoint).port));
    proxy.pause({ newConnections: 'hold' });
    try {
      const { store: second } = await open(prefix, {
        etcd: { endpoints: [`http://${proxy.address}`], prefix, leaseTtlS: 2 },
      });
      second.changed('files', () => record('files', 3, 16, 'second'));
      proxy.resume();
      await until(() => second.report().writer, 20_000, 'the second replica elected');
      await until(() => holds('second-3'), 10_000, 'its record written');
    } finally {
      await proxy.close();
    }
  });

  it('removes, once elected, the chunks of records a writer never finished', async () => {
    const prefix = freshPrefix();
    const { store: first } = await open(prefix);
    await until(() => first.report().writer, 10_000, 'the first replica elected');
    first.changed('files', () => record('files', 2, 16, 'first'));
    await until(
      async () => (await stored(prefix)).records.get('files')?.revision === 'first-2',
      10_000,
      'its record in etcd',
    );
    await first.close();
    // What a writer killed between its chunks and its record leaves: chunks no record names, of a
    // source with a record and of one without.
    const client = new Etcd3({ hosts: etcd.endpoint.replace('http://', '') });
    try {
      for (const key of ['files/unfinished-1/000000', 'gone/unfinished-2/000000', 'gone/unfinished-2/000001'])
        await client.put(`${prefix}chunks/${key}`).value(Buffer.alloc(100_000)).exec();
    } finally {
      client.close();
    }
    const left = async (): Promise<string[]> =>
      (await etcdKeys(`${prefix}chunks/`)).filter((k) => k.includes('/unfinished-'));
    assert.equal((await left()).length, 3);
    const { store: second } = await open(prefix);
    await until(() => second.report().writer, 10_000, 'the second replica elected');
    await until(async () => (await left()).length === 0, 10_000, 'the left-over chunks removed', {
      describe: async () => (await left()).join(', '),
    });
    const after = await stored(prefix);
    assert.deepEqual(after.problems, []);
    assert.equal(after.records.get('files')?.revision, 'first-2', 'the record and its chunks kept');
  });

  it('writes, once elected, over a record in etcd that cannot be read', async () => {
    const prefix = freshPrefix();
    const client = new Etcd3({ hosts: etcd.endpoint.replace('http://', '') });
    try {
      // A manifest naming a chunk that is not there, and one that is not a manifest at all.
      await client
        .put(`${prefix}records/files`)
        .value(
          JSON.stringify({ generation: 'g', chunks: 1, bytes: 10, sha256: 'x', savedMs: 1, writer: 'w' }),
        )
        .exec();
      await client.put(`${prefix}records/other`).value('not a manifest').exec();
    } finally {
      client.close();
    }
    const { store, loaded } = await open(prefix);
    assert.equal(loaded.problems.length, 2);
    store.changed('files', () => record('files', 2, 16, 'mine'));
    store.changed('other', () => record('other', 2, 16, 'mine'));
    await until(() => store.report().writer, 10_000, 'the replica elected');
    await until(
      async () => {
        const { records } = await stored(prefix);
        return records.get('files')?.revision === 'mine-2' && records.get('other')?.revision === 'mine-2';
      },
      10_000,
      'both records written over the unreadable ones',
    );
  });

  it('reports etcd down, keeps serving its records, and writes them once etcd is back', async () => {
    const prefix = freshPrefix();
    const ups: boolean[] = [];
    const { store } = await open(prefix, { onStoreUp: (up) => ups.push(up) });
    await until(() => store.report().writer, 10_000, 'the replica elected');
    await etcd.stop(true);
    await until(() => !store.report().up, 10_000, 'etcd reported down');
    store.changed('zk', () => record('zk', 5, 16, 'during-outage'));
    await etcd.start();
    await until(() => store.report().up, 20_000, 'etcd reported up again');
    await until(
      async () => (await stored(prefix)).records.get('zk')?.revision === 'during-outage-5',
      20_000,
      'the change made during the outage written to etcd',
    );
    assert.deepEqual(ups.slice(0, 3), [true, false, true]);
  });

  it('removes the record of a source removed once it is the writer, and once etcd is back', async () => {
    const prefix = freshPrefix();
    const { store: first } = await open(prefix);
    await until(() => first.report().writer, 10_000, 'the first replica elected');
    first.changed('mesh', () => record('mesh', 5));
    first.changed('local', () => record('local', 1));
    await until(async () => (await stored(prefix)).records.size === 2, 10_000, 'both records written');
    // A replica whose configuration no longer names `mesh` (a reload, or a start that dropped it)
    // while another is the writer.
    const { store: second } = await open(prefix);
    second.changed('local', () => record('local', 1));
    second.removed('mesh');
    await first.close();
    await until(() => second.report().writer, 10_000, 'the second replica elected');
    await until(
      async () => !(await stored(prefix)).records.has('mesh'),
      10_000,
      'the removed record gone from etcd',
    );
    // Removed while etcd does not answer: removed once it does.
    await etcd.stop(true);
    await until(() => !second.report().up, 10_000, 'etcd reported down');
    second.removed('local');
    await etcd.start();
    await until(async () => (await stored(prefix)).records.size === 0, 20_000, 'the other record gone');
  });

  it('keeps a source removed while its record is written removed from etcd', async () => {
    const prefix = freshPrefix();
    const { store } = await open(prefix);
    await until(() => store.report().writer, 10_000, 'the replica elected');
    store.changed('gone', () => record('gone', 1));
    await until(async () => (await stored(prefix)).records.has('gone'), 10_000, 'the first record written');
    // The next record takes several chunks; the source is removed 30 ms into its write.
    const big = record('gone', 20_000, 200, 'v2');
    store.changed('gone', () => {
      setTimeout(() => store.removed('gone'), 30);
      return big;
    });
    await until(async () => (await etcdKeys(prefix)).length === 0, 10_000, 'every key of the record gone');
    // Past the write queue's retry (200 ms here), which put it back before.
    await new Promise((r) => setTimeout(r, 1_500));
    assert.deepEqual(await etcdKeys(prefix), []);
  });

  it('starts from the local state after one request’s deadline when etcd does not answer at all', async () => {
    // A partition: connections are taken, nothing comes back.
    const proxy = await TcpProxy.start(Number(new URL(etcd.endpoint).port));
    proxy.pause({ newConnections: 'hold' });
    try {
      const started = performance.now();
      const { store, loaded } = await EtcdRecordStore.open({
        etcd: { endpoints: [`http://${proxy.address}`], prefix: freshPrefix(), leaseTtlS: 2 },
        identity: 'partitioned',
        log,
        requestTimeoutMs: 2_000,
      });
      const ms = performance.now() - started;
      opened.push(store);
      // Before: etcd's client tried the read three times, 2 s each.
      assert.ok(ms < 4_500, `the start waited ${Math.round(ms)} ms`);
      assert.equal(loaded.records.size, 0);
      assert.match(loaded.problems[0]?.message ?? '', /no answer within 2 s/);
    } finally {
      await proxy.close();
    }
  });

  it('keeps the record of a source configured again while its removal was under way', async () => {
    const prefix = freshPrefix();
    const writes: string[] = [];
    const { store } = await open(prefix, { hooks: { onWrite: (source) => writes.push(source) } });
    await until(() => store.report().writer, 10_000, 'the replica elected');
    store.changed('s', () => record('s', 3, 16, 'v1'));
    await until(() => writes.length === 1, 10_000, 'the first record written');
    // A slow etcd: the removal's transaction (the one fenced on the election key first) is
    // applied 1.5 s after it is sent.
    type Txn = { commit: () => Promise<unknown> };
    const client = (store as unknown as { client: { if: (...args: unknown[]) => Txn } }).client;
    const send = client.if.bind(client);
    let slowed = false;
    client.if = (...args: unknown[]) => {
      const txn = send(...args);
      if (!slowed && args[1] === 'Create') {
        slowed = true;
        const commit = txn.commit.bind(txn);
        txn.commit = async () => {
          await new Promise((r) => setTimeout(r, 1_500));
          return commit();
        };
      }
      return txn;
    };
    store.removed('s');
    await new Promise((r) => setTimeout(r, 50));
    store.changed('s', () => record('s', 4, 16, 'v2'));
    await until(() => writes.length === 2, 10_000, 'the record of the source configured again written');
    await new Promise((r) => setTimeout(r, 2_500));
    // Before, the removal landed after it and took its chunks or its manifest.
    assert.equal((await stored(prefix)).records.get('s')?.revision, 'v2-4');
  });

  it('ignores a record whose chunks do not match its manifest, naming it', async () => {
    const prefix = freshPrefix();
    const { store } = await open(prefix);
    await until(() => store.report().writer, 10_000, 'the replica elected');
    store.changed('broken', () => record('broken', 50));
    store.changed('fine', () => record('fine', 5));
    await until(async () => (await stored(prefix)).records.size === 2, 10_000, 'both records written');
    const client = new Etcd3({ hosts: etcd.endpoint.replace('http://', '') });
    try {
      const keys = await client.getAll().prefix(`${prefix}chunks/broken/`).keys();
      assert.ok(keys.length > 0);
      await client.put(keys[0] ?? '').value('tampered');
    } finally {
      client.close();
    }
    const loaded = await stored(prefix);
    assert.deepEqual([...loaded.records.keys()], ['fine']);
    assert.equal(loaded.problems.length, 1);
    assert.match(loaded.problems[0]?.message ?? '', /do not match the digest/);
    assert.match(loaded.problems[0]?.location.file ?? '', /records\/broken$/);
  });
});
