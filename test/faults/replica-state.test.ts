/**
 * Replicas sharing their state through a real etcd, each meshmux its own process with its own
 * state folder: the writer is killed and replaced, etcd is killed under changes, and finally every
 * replica and the upstream are gone and a new replica on an empty disk must serve the last good
 * state. The istiod stand-ins keep their stores across all of it; the goal is 0 objects lost.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { readEtcdRecords } from '../../src/state/etcd-record-store.js';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeDestinationRule, fakeVirtualService } from '../support/fake-objects.js';
import { closingPort } from '../support/free-port.js';
import { connectIstiod, inventory, lost, report } from '../support/fault-kit.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import type { MeshmuxProcess } from '../support/meshmux-process.js';
import { startReplica } from '../support/meshmux-process.js';
import { suiteSkip } from '../support/required-peer.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { DR, VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;
const LEASE_MS = 2_000;
const log = pino({ level: 'silent' });

interface EtcdStatus {
  up: boolean;
  writer: boolean;
  identity: string;
}

async function etcdStatus(meshmux: MeshmuxProcess): Promise<EtcdStatus | undefined> {
  const res = await fetch(`${meshmux.admin}/debug/state`, { signal: AbortSignal.timeout(5_000) });
  return ((await res.json()) as { etcd?: EtcdStatus }).etcd;
}

describe('replicas sharing state through etcd', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let upstream: FakeAdsServer;
  let dir: string;
  let dispose: () => Promise<void>;
  const running: MeshmuxProcess[] = [];
  const clients: IstiodClient[] = [];
  const closers: Array<() => Promise<void>> = [];

  const names = (count: number): string[] => Array.from({ length: count }, (_, i) => `svc-${i}`);
  const setUpstream = (count: number): void => {
    upstream
      .set(
        'VirtualService',
        names(count).map((n) => fakeVirtualService(n)),
      )
      .set(
        'DestinationRule',
        names(count).map((n) => fakeDestinationRule(n)),
      );
  };

  /** Starts a replica with its own (empty) state folder `state-<name>`. */
  async function replica(
    name: string,
    address = upstream.address,
    prefix = '/fleet/',
  ): Promise<MeshmuxProcess> {
    const meshmux = await startReplica(
      dir,
      name,
      { endpoint: etcd.endpoint, prefix, leaseTtl: `${LEASE_MS}ms` },
      [
        '  - name: mesh',
        '    type: xds',
        `    address: ${address}`,
        '    kinds: [VirtualService, DestinationRule]',
      ],
    );
    running.push(meshmux);
    return meshmux;
  }

  function istiod(meshmux: MeshmuxProcess): IstiodClient {
    const client = connectIstiod(meshmux.xds);
    clients.push(client);
    return client;
  }

  const holds = (count: number) => (c: IstiodClient) =>
    c.configs(VS).size === count && c.configs(DR).size === count;

  /** The number of objects of the source's record in etcd (0 when there is none). */
  const shared = async (prefix = '/fleet/'): Promise<number> => {
    const { records } = await readEtcdRecords({ endpoints: [etcd.endpoint], prefix }, log, 1_000).catch(
      () => ({ records: new Map<string, SourceRecord>() }),
    );
    return records.get('mesh')?.resources.length ?? 0;
  };

  /** Resolves once etcd holds the source's record with `count` objects per kind. */
  const sharedHolds = (count: number, what: string, prefix = '/fleet/'): Promise<void> =>
    until(async () => (await shared(prefix)) === 2 * count, WAIT_MS, what);

  /**
   * Every replica in `fleet` killed and the upstream down: a replica started on an empty disk
   * restores from etcd. The objects of `served` it does not serve.
   */
  async function lostByNewReplica(
    name: string,
    served: ReadonlySet<string>,
    fleet: readonly MeshmuxProcess[],
    prefix = '/fleet/',
  ): Promise<string[]> {
    for (const m of fleet) await m.kill('SIGKILL');
    await upstream.stop();
    const down = await closingPort();
    closers.push(down.close);
    const later = istiod(await replica(name, `127.0.0.1:${down.port}`, prefix));
    await later.waitFor(
      (c) => c.configs(VS).size > 0,
      WAIT_MS,
      () => 'the new replica serves',
    );
    await new Promise((r) => setTimeout(r, 1_000));
    return lost(served, inventory(later));
  }

  before(async () => {
    etcd = await EtcdServer.start();
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    setUpstream(5);
    ({ dir, dispose } = await tempDir('meshmux-replicas-'));
  });
  after(async () => {
    for (const close of closers) await close();
    for (const c of clients) c.close();
    for (const m of running) {
      m.signal('SIGCONT');
      await m.kill('SIGKILL').catch(() => undefined);
    }
    await upstream.stop().catch(() => undefined);
    await etcd.dispose();
    await dispose();
  });

  it('replaces a killed writer within the lease, keeps serving through an etcd crash, and a new replica on an empty disk serves the last good state', async () => {
    const a = await replica('a');
    const b = await replica('b');
    const onA = istiod(a);
    const onB = istiod(b);
    await onA.waitFor(holds(5), WAIT_MS, () => 'replica a serves the upstream');
    await onB.waitFor(holds(5), WAIT_MS, () => 'replica b serves the upstream');
    await until(
      async () => [await etcdStatus(a), await etcdStatus(b)].filter((s) => s?.writer === true).length === 1,
      WAIT_MS,
      'exactly one writer',
    );
    await sharedHolds(5, 'the record of 5+5 objects in etcd');

    // The writer dies without resigning: the other replica takes over once its lease runs out.
    const [writer, other] = (await etcdStatus(a))?.writer === true ? [a, b] : [b, a];
    const killedAt = performance.now();
    await writer.kill('SIGKILL');
    await until(async () => (await etcdStatus(other))?.writer === true, WAIT_MS, 'the other replica elected');
    const handoverMs = performance.now() - killedAt;
    assert.ok(handoverMs < LEASE_MS + 3_000, `took over in ${handoverMs} ms`);
    const survivor = istiod(other);
    await survivor.waitFor(holds(5), WAIT_MS, () => 'the survivor still serves everything');

    // etcd crashes while the upstream changes: serving does not wait for it, and the change
    // reaches etcd once it is back.
    const before = inventory(survivor);
    const responsesBefore = survivor.received.length;
    await etcd.stop(true);
    await until(async () => (await etcdStatus(other))?.up === false, WAIT_MS, 'etcd reported down');
    setUpstream(7);
    upstream.push();
    await survivor.waitFor(holds(7), WAIT_MS, () => 'the change served while etcd is down');
    const pushesForChange = survivor.received.length - responsesBefore;
    await etcd.start();
    await until(async () => (await etcdStatus(other))?.up === true, WAIT_MS, 'etcd reported up again');
    await sharedHolds(7, 'the change written to etcd after its restart');
    assert.deepEqual(lost(before, inventory(survivor)), []);
    assert.equal(
      survivor.received.length - responsesBefore,
      pushesForChange,
      'etcd coming back pushes nothing',
    );

    // Everything is gone: both replicas, the upstream. A new replica with an empty state folder
    // starts from etcd and the istiod that connects to it loses nothing.
    const held = inventory(survivor);
    await other.kill('SIGKILL');
    await upstream.stop();
    // Its address points at a listener this test owns that hangs up at once: the upstream's old
    // port, once free, may be taken by a server of a test running beside this one.
    const gone = await closingPort();
    closers.push(gone.close);
    const c = await replica('c', `127.0.0.1:${gone.port}`);
    const onC = istiod(c);
    await onC.waitFor(holds(7), WAIT_MS, () => 'the new replica serves the last good state from etcd');
    const servedMs = performance.now() - c.spawnedAt;
    assert.deepEqual(lost(held, inventory(onC)), []);
    const sources = (await (await fetch(`${c.admin}/debug/sources`)).json()) as Array<{
      name: string;
      state: string;
    }>;
    assert.equal(sources.find((s) => s.name === 'mesh')?.state, 'restored');
    report('replicas on etcd', {
      'writer handover after SIGKILL (ms)': handoverMs,
      'lease (ms)': LEASE_MS,
      'pushes when etcd came back': survivor.received.length - responsesBefore - pushesForChange,
      'new replica on an empty disk, spawn to served (ms)': servedMs,
      'objects lost': lost(held, inventory(onC)).length,
    });
  });

  it('leaves the newer record of the writer elected since a writer frozen past its lease resumes', async () => {
    // The replicas of the test before go (one of them is the writer), and a fresh upstream comes:
    // that test stopped its own.
    for (const m of running) await m.kill('SIGKILL');
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    setUpstream(5);
    const a = await replica('frozen-a');
    const b = await replica('frozen-b');
    const onA = istiod(a);
    const onB = istiod(b);
    await onA.waitFor(holds(5), WAIT_MS, () => 'a serves 5 + 5');
    await onB.waitFor(holds(5), WAIT_MS, () => 'b serves 5 + 5');
    await until(
      async () => [await etcdStatus(a), await etcdStatus(b)].filter((s) => s?.writer === true).length === 1,
      WAIT_MS,
      'one writer',
    );
    await sharedHolds(5, '5 + 5 in etcd');
    const [writer, other, onWriter, onOther] =
      (await etcdStatus(a))?.writer === true ? [a, b, onA, onB] : [b, a, onB, onA];

    // The writer takes a change in, then is frozen (a pause of the process, a frozen VM) before
    // its write is due; the upstream changes again, and the other replica is elected and writes.
    setUpstream(6);
    upstream.push();
    await onWriter.waitFor(holds(6), WAIT_MS, () => 'the writer serves 6 + 6');
    writer.signal('SIGSTOP');
    setUpstream(8);
    upstream.push();
    await onOther.waitFor(holds(8), WAIT_MS, () => 'the other serves 8 + 8');
    await until(async () => (await etcdStatus(other))?.writer === true, WAIT_MS, 'the other elected');
    await sharedHolds(8, '8 + 8 in etcd, from the new writer');
    writer.signal('SIGCONT');
    // Its write was due 1 s after the change: well past, once resumed.
    await new Promise((r) => setTimeout(r, 5_000));
    const { records } = await readEtcdRecords({ endpoints: [etcd.endpoint], prefix: '/fleet/' }, log, 1_000);
    const kept = records.get('mesh')?.resources.length ?? 0;

    const missing = await lostByNewReplica('frozen-c', inventory(onOther), [a, b]);
    report('a state writer frozen past its lease', {
      'objects in etcd after it resumed (of 16)': kept,
      'objects lost by a replica started later': missing.length,
    });
    assert.equal(kept, 16, 'etcd keeps the newer record');
    assert.deepEqual(missing, []);
  });

  it("keeps the fleet's newer record when the replica elected next had been cut off from the upstream", async () => {
    for (const m of running) await m.kill('SIGKILL');
    await upstream.stop().catch(() => undefined);
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    setUpstream(5);
    const prefix = '/cut-off/';
    const a = await replica('cut-a', upstream.address, prefix);
    const onA = istiod(a);
    await onA.waitFor(holds(5), WAIT_MS, () => 'a serves 5 + 5');
    await until(async () => (await etcdStatus(a))?.writer === true, WAIT_MS, 'a elected');
    // The other replica reaches the upstream through a relay the test can cut, as a network
    // partition between it and the upstream, or an upstream instance of its own that hangs, would.
    const relay = await TcpProxy.start(Number(upstream.address.split(':')[1]));
    closers.push(() => relay.close());
    const b = await replica('cut-b', relay.address, prefix);
    const onB = istiod(b);
    await onB.waitFor(holds(5), WAIT_MS, () => 'b serves 5 + 5');
    setUpstream(6);
    upstream.push();
    await onB.waitFor(holds(6), WAIT_MS, () => 'b serves 6 + 6');
    await sharedHolds(6, '6 + 6 in etcd', prefix);

    // b stops hearing from the upstream; the upstream changes, a serves it and writes it.
    relay.pause({ newConnections: 'hold' });
    setUpstream(8);
    upstream.push();
    await onA.waitFor(holds(8), WAIT_MS, () => 'a serves 8 + 8');
    await sharedHolds(8, '8 + 8 in etcd, from the writer', prefix);
    assert.ok(holds(6)(onB), 'b, cut off, still serves 6 + 6');

    // The writer dies; b, elected, must not put its older record over the fleet's.
    const served = inventory(onA);
    await a.kill('SIGKILL');
    await until(async () => (await etcdStatus(b))?.writer === true, WAIT_MS, 'b elected');
    // Records kept while not the writer are written at once on election: well past after 3 s.
    await new Promise((r) => setTimeout(r, 3_000));
    const kept = await shared(prefix);

    const missing = await lostByNewReplica('cut-c', served, [b], prefix);
    report('a replica cut off from the upstream elected the state writer', {
      'objects in etcd after it was elected (of 16)': kept,
      'objects lost by a replica started later': missing.length,
    });
    assert.equal(kept, 16, "etcd keeps the fleet's newer record");
    assert.deepEqual(missing, []);
  });

  it('stores a change in etcd soon after a quiet spell, so that the writer killed right after serving it loses nothing', async () => {
    for (const m of running) await m.kill('SIGKILL');
    await upstream.stop().catch(() => undefined);
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    setUpstream(5);
    const prefix = '/prompt/';
    const a = await replica('prompt-a', upstream.address, prefix);
    const onA = istiod(a);
    await onA.waitFor(holds(5), WAIT_MS, () => 'a serves 5 + 5');
    await until(async () => (await etcdStatus(a))?.writer === true, WAIT_MS, 'a elected');
    await sharedHolds(5, '5 + 5 in etcd', prefix);
    // Quiet for longer than the store's spacing of writes (1 s): the next change starts a burst.
    await new Promise((r) => setTimeout(r, 1_500));
    setUpstream(6);
    const changedAt = performance.now();
    upstream.push();
    await onA.waitFor(holds(6), WAIT_MS, () => 'a serves 6 + 6');
    const servedMs = performance.now() - changedAt;
    // Killed 600 ms after its istiod held the change (before, etcd was written a second after it).
    await new Promise((r) => setTimeout(r, 600));
    const missing = await lostByNewReplica('prompt-b', inventory(onA), [a], prefix);
    report('the state writer killed 600 ms after an istiod held a change', {
      'change served (ms)': servedMs,
      'objects lost by a replica started later (of 12)': missing.length,
    });
    assert.deepEqual(missing, []);
  });
});
