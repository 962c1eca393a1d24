/**
 * The state writer of replicas sharing etcd, with a real etcd and real replica processes: a
 * writer frozen past its lease must not overwrite, once it resumes, what the writer elected since
 * stored, or a replica started later during an upstream outage restores the older state.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { readEtcdRecords } from '../../src/state/etcd-record-store.js';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeDestinationRule, fakeVirtualService } from '../support/fake-objects.js';
import { connectIstiod, inventory, lost, report } from '../support/fault-kit.js';
import { closingPort } from '../support/free-port.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { startReplica, type MeshmuxProcess } from '../support/meshmux-process.js';
import { suiteSkip } from '../support/required-peer.js';
import { DR, VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;
const log = pino({ level: 'silent' });

describe('faults: a state writer frozen past its lease', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let upstream: FakeAdsServer;
  let dir: { dir: string; dispose: () => Promise<void> };
  const replicas: MeshmuxProcess[] = [];
  const istiods: IstiodClient[] = [];
  const closers: Array<() => Promise<void>> = [];

  before(async () => {
    etcd = await EtcdServer.start();
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    dir = await tempDir('meshmux-etcd-writer-');
  });
  after(async () => {
    for (const close of closers) await close();
    for (const client of istiods) client.close();
    for (const replica of replicas) {
      replica.signal('SIGCONT');
      await replica.kill();
    }
    await upstream.stop().catch(() => undefined);
    await etcd.dispose();
    await dir.dispose();
  });

  const names = (count: number): string[] => Array.from({ length: count }, (_, i) => `svc-${i}`);
  const serve = (count: number): void => {
    upstream
      .set(
        'VirtualService',
        names(count).map((n) => fakeVirtualService(n)),
      )
      .set(
        'DestinationRule',
        names(count).map((n) => fakeDestinationRule(n)),
      );
    upstream.push();
  };
  const replica = async (name: string, address = upstream.address): Promise<MeshmuxProcess> => {
    const started = await startReplica(
      dir.dir,
      name,
      { endpoint: etcd.endpoint, prefix: '/fleet/', leaseTtl: '2s' },
      [
        '  - name: mesh',
        '    type: xds',
        `    address: ${address}`,
        '    kinds: [VirtualService, DestinationRule]',
      ],
    );
    replicas.push(started);
    return started;
  };
  const istiodOf = (process: MeshmuxProcess): IstiodClient => {
    const client = connectIstiod(process.xds);
    istiods.push(client);
    return client;
  };
  const holds = (count: number) => (c: IstiodClient) =>
    c.configs(VS).size === count && c.configs(DR).size === count;
  const isWriter = async (process: MeshmuxProcess): Promise<boolean> =>
    (await process.debug<{ etcd?: { writer: boolean } }>('state')).etcd?.writer === true;
  /** Objects of `mesh` in the record etcd holds. */
  const inEtcd = async (): Promise<number | undefined> => {
    const { records } = await readEtcdRecords({ endpoints: [etcd.endpoint], prefix: '/fleet/' }, log, 1_000);
    return records.get('mesh')?.resources.length;
  };

  it('leaves the newer record of the writer elected since, and a later replica restores it', async () => {
    serve(5);
    const a = await replica('a');
    const b = await replica('b');
    const onA = istiodOf(a);
    const onB = istiodOf(b);
    await onA.waitFor(holds(5), WAIT_MS, () => 'a serves 5 + 5');
    await onB.waitFor(holds(5), WAIT_MS, () => 'b serves 5 + 5');
    await until(
      async () => [await isWriter(a), await isWriter(b)].filter(Boolean).length === 1,
      WAIT_MS,
      'one writer',
    );
    await until(async () => (await inEtcd()) === 10, WAIT_MS, '5 + 5 in etcd');
    const [writer, other, onWriter, onOther] = (await isWriter(a)) ? [a, b, onA, onB] : [b, a, onB, onA];

    // The writer takes a change in, then is frozen (a pause of the process, a frozen VM) before
    // its write is due; the upstream changes again, and the other replica is elected and writes.
    serve(6);
    await onWriter.waitFor(holds(6), WAIT_MS, () => 'the writer serves 6 + 6');
    writer.signal('SIGSTOP');
    serve(8);
    await onOther.waitFor(holds(8), WAIT_MS, () => 'the other serves 8 + 8');
    await until(() => isWriter(other), WAIT_MS, 'the other elected');
    await until(async () => (await inEtcd()) === 16, WAIT_MS, '8 + 8 in etcd, from the new writer');
    writer.signal('SIGCONT');
    // Its write was due 1 s after the change: well past, once resumed.
    await new Promise((r) => setTimeout(r, 5_000));
    const kept = await inEtcd();

    // Every replica gone, the upstream down: a replica on an empty disk restores from etcd.
    const served = inventory(onOther);
    await a.kill();
    await b.kill();
    await upstream.stop();
    const down = await closingPort();
    closers.push(down.close);
    const later = istiodOf(await replica('c', `127.0.0.1:${down.port}`));
    await later.waitFor(
      (c) => c.configs(VS).size > 0,
      WAIT_MS,
      () => 'the new replica serves',
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const missing = lost(served, inventory(later));
    report('a state writer frozen past its lease', {
      'objects in etcd after it resumed (of 16)': kept ?? 0,
      'objects lost by a replica started later': missing.length,
    });
    assert.equal(kept, 16, 'etcd keeps the newer record');
    assert.deepEqual(missing, []);
  });
});
