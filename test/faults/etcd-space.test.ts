/**
 * A replica storing its records in a real etcd whose backend quota is small (24 MiB; etcd's default
 * is 2 GiB), under an upstream that keeps changing. etcd keeps every revision of every key until
 * its history is compacted, so each whole record written stays in its backend: once the quota is
 * reached etcd raises its NOSPACE alarm and refuses every write, meshmux's and anyone else's, until
 * an operator compacts, defragments and disarms it. Then a replica started on an empty disk during
 * an upstream outage restores the last record etcd took. Starts its own etcd (Debian's
 * `etcd-server`) and meshmux processes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import type { SourceRecord } from '../../src/merge/source-record.js';
import type { MeshmuxError } from '../../src/core/errors.js';
import { EtcdRecordStore, readEtcdRecords } from '../../src/state/etcd-record-store.js';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeVirtualService } from '../support/fake-objects.js';
import { connectIstiod, inventory, lost, report } from '../support/fault-kit.js';
import { closingPort } from '../support/free-port.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { startReplica, type MeshmuxProcess } from '../support/meshmux-process.js';
import { suiteSkip } from '../support/required-peer.js';
import { fakeResource } from '../support/resources.js';
import { VS } from '../support/type-urls.js';

const QUOTA_BYTES = 24 * 1024 * 1024;
/** About 2.5 MB of record: ten whole records fill the quota. */
const OBJECTS = 6_000;
const CHANGES = 16;
const PREFIX = '/space/';
const log = pino({ level: 'silent' });

/** A host of 200 characters, so that few objects make a large record. */
const longHost = (i: number): string =>
  `svc-${i}.${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.example`;

describe('records in an etcd whose backend has a quota', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let upstream: FakeAdsServer;
  let dir: string;
  let dispose: () => Promise<void>;
  const running: MeshmuxProcess[] = [];
  const clients: IstiodClient[] = [];
  const closers: Array<() => Promise<void>> = [];

  const setUpstream = (count: number): void => {
    upstream.set(
      'VirtualService',
      Array.from({ length: count }, (_, i) => fakeVirtualService(`svc-${i}`, longHost(i))),
    );
  };

  async function replica(name: string, address: string): Promise<MeshmuxProcess> {
    const meshmux = await startReplica(
      dir,
      name,
      { endpoint: etcd.endpoint, prefix: PREFIX, leaseTtl: '2s', more: 'compaction: 1s' },
      ['  - name: mesh', '    type: xds', `    address: ${address}`, '    kinds: [VirtualService]'],
    );
    running.push(meshmux);
    return meshmux;
  }

  function istiod(meshmux: MeshmuxProcess): IstiodClient {
    const client = connectIstiod(meshmux.xds);
    clients.push(client);
    return client;
  }

  /** The number of objects in the source's record in etcd (0 when there is none). */
  const shared = async (): Promise<number> => {
    const { records } = await readEtcdRecords(
      { endpoints: [etcd.endpoint], prefix: PREFIX },
      log,
      2_000,
    ).catch(() => ({ records: new Map<string, SourceRecord>() }));
    return records.get('mesh')?.resources.length ?? 0;
  };

  /** The alarms etcd has raised, and its backend's size. */
  async function health(): Promise<{ alarms: string[]; dbBytes: number }> {
    const client = new Etcd3({ hosts: etcd.endpoint.replace('http://', '') });
    try {
      const { alarms } = await client.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' });
      const status = await client.maintenance.status();
      return { alarms: alarms.map((a) => a.alarm), dbBytes: Number(status.dbSize) };
    } finally {
      client.close();
    }
  }

  before(async () => {
    etcd = await EtcdServer.start({ quotaBytes: QUOTA_BYTES });
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    ({ dir, dispose } = await tempDir('meshmux-etcd-space-'));
  });
  after(async () => {
    for (const close of closers) await close();
    for (const c of clients) c.close();
    for (const m of running) await m.kill('SIGKILL').catch(() => undefined);
    await upstream.stop().catch(() => undefined);
    await etcd.dispose();
    await dispose();
  });

  it("keeps etcd's history compacted, so that churn never fills its quota", async () => {
    setUpstream(OBJECTS);
    const writer = await replica('a', upstream.address);
    const onWriter = istiod(writer);
    const holds = (count: number) => (c: IstiodClient) => c.configs(VS).size === count;
    await onWriter.waitFor(holds(OBJECTS), 60_000, () => `the replica serves ${OBJECTS}`);
    await until(async () => (await shared()) === OBJECTS, 30_000, 'the first record in etcd');

    // One object more at a time, each past the store's write delay: a whole record each.
    for (let i = 1; i <= CHANGES; i++) {
      setUpstream(OBJECTS + i);
      upstream.push();
      await onWriter.waitFor(holds(OBJECTS + i), 30_000, () => `change ${i} served`);
      await new Promise((r) => setTimeout(r, 1_300));
    }
    const last = OBJECTS + CHANGES;
    await until(async () => (await shared()) === last, 15_000, 'the last record in etcd').catch(
      () => undefined,
    );
    const kept = await shared();
    const { alarms, dbBytes } = await health();

    // The writer and the upstream gone: a replica on an empty disk restores from etcd.
    const served = inventory(onWriter);
    await writer.kill('SIGKILL');
    await upstream.stop();
    const down = await closingPort();
    closers.push(down.close);
    const later = istiod(await replica('b', `127.0.0.1:${down.port}`));
    await later.waitFor(
      (c) => c.configs(VS).size > 0,
      30_000,
      () => 'the new replica serves',
    );
    await new Promise((r) => setTimeout(r, 1_000));
    const missing = lost(served, inventory(later));
    report('whole records written to an etcd with a 24 MiB quota', {
      'records written (about 2.5 MB each)': CHANGES + 1,
      'objects in etcd at the end (of the last record)': `${kept} of ${last}`,
      'etcd alarms': alarms.length === 0 ? 'none' : alarms.join(' '),
      'etcd backend (MB)': (dbBytes / 1e6).toFixed(1),
      'objects lost by a replica started later': missing.length,
    });
    assert.deepEqual(alarms, [], 'etcd raised no alarm');
    assert.equal(kept, last, 'etcd holds the last record');
    assert.deepEqual(missing, []);
  });

  it('names what to do when etcd is out of space, with compaction left to etcd', async () => {
    // The replica left by the test before compacts this etcd (all of it, as compaction goes):
    // with it gone and compaction off, whole records fill it.
    for (const m of running) await m.kill('SIGKILL');
    const errors: MeshmuxError[] = [];
    const { store } = await EtcdRecordStore.open({
      etcd: { endpoints: [etcd.endpoint], prefix: '/full/', leaseTtlS: 2, compactionMs: 0 },
      identity: 'full',
      log,
      delayMs: 50,
      retryMs: 50,
      hooks: { onWriteError: (_source, error) => errors.push(error) },
    });
    try {
      await until(() => store.report().writer, 10_000, 'the store elected writer');
      const bulky = (n: number): SourceRecord => ({
        source: 'bulky',
        type: 'xds',
        revision: `r${n}`,
        savedMs: Date.now(),
        complete: true,
        answeredKinds: ['networking.istio.io/VirtualService'],
        resources: Array.from({ length: 1_000 }, (_, i) =>
          fakeResource(`vs-${i}`, { body: `${n}-${i}`.padEnd(2_000, '.') }),
        ),
      });
      let n = 0;
      await until(
        () => {
          if (errors.length > 0) return true;
          store.changed('bulky', () => bulky(++n));
          return false;
        },
        60_000,
        'a write refused',
        { intervalMs: 100 },
      );
      const said = errors[0]?.describe() ?? '';
      console.log(`# refused after ${n} records of about 2 MB: ${said}`);
      assert.match(said, /etcd is out of space/);
      assert.match(said, /etcdctl compact, defrag, alarm disarm/);
      assert.match(said, /\/full\/records\/bulky/);
      // Refused writes go on being retried (every 50 ms here): etcd is still reported as answering,
      // and each refusal as one for space (before: etcd's client took them for passing failures,
      // tried each three times and, after three, failed every request for 5 s, probes included).
      const since = errors.length;
      for (let i = 0; i < 30; i++) {
        store.changed('bulky', () => bulky(++n));
        await new Promise((r) => setTimeout(r, 100));
      }
      const later = errors.slice(since).map((e) => e.message);
      console.log(`# ${later.length} refusals in the next 3 s; etcd reported up: ${store.report().up}`);
      assert.ok(later.length > 0, 'writes tried again');
      assert.deepEqual(
        later.filter((m) => !/etcd is out of space/.test(m)),
        [],
        'every refusal named as one for space',
      );
      assert.equal(store.report().up, true, 'etcd reported as answering');
    } finally {
      await store.close();
    }
  });
});
