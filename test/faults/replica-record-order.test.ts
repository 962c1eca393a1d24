/**
 * Which record of a source wins, between a replica's own and the one the fleet's writer stored in
 * a real etcd: a replica whose clock runs an hour ahead restarts during an upstream outage, and the
 * later record must be restored, whatever the clocks say. Each meshmux is a process of its own; the
 * clock is moved by libfaketime (Debian package `faketime`).
 */
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { readEtcdRecords } from '../../src/state/etcd-record-store.js';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { clockAheadEnv, fakeClockMissing } from '../support/fake-clock.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeDestinationRule, fakeVirtualService } from '../support/fake-objects.js';
import { closingPort } from '../support/free-port.js';
import { connectIstiod, inventory, lost, report } from '../support/fault-kit.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { startReplica, type MeshmuxProcess } from '../support/meshmux-process.js';
import { suiteSkip } from '../support/required-peer.js';
import { DR, VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;
const log = pino({ level: 'silent' });

describe(
  'the record of a source a fleet keeps',
  { skip: suiteSkip(etcdMissing() ?? fakeClockMissing()) },
  () => {
    let etcd: EtcdServer;
    let upstream: FakeAdsServer;
    let dir: string;
    let dispose: () => Promise<void>;
    /** Where the records of the test running are kept in etcd. */
    const prefix = '/clocks/';
    const running: MeshmuxProcess[] = [];
    const clients: IstiodClient[] = [];
    const closers: Array<() => Promise<void>> = [];

    const setUpstream = (count: number): void => {
      const names = Array.from({ length: count }, (_, i) => `svc-${i}`);
      upstream
        .set(
          'VirtualService',
          names.map((n) => fakeVirtualService(n)),
        )
        .set(
          'DestinationRule',
          names.map((n) => fakeDestinationRule(n)),
        );
    };

    async function replica(
      name: string,
      address: string,
      env?: Record<string, string>,
    ): Promise<MeshmuxProcess> {
      const meshmux = await startReplica(
        dir,
        name,
        { endpoint: etcd.endpoint, prefix, leaseTtl: '2s' },
        [
          '  - name: mesh',
          '    type: xds',
          `    address: ${address}`,
          '    kinds: [VirtualService, DestinationRule]',
        ],
        env,
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

    const writer = async (meshmux: MeshmuxProcess): Promise<boolean> => {
      const res = await fetch(`${meshmux.admin}/debug/state`, { signal: AbortSignal.timeout(5_000) });
      return ((await res.json()) as { etcd?: { writer: boolean } }).etcd?.writer === true;
    };

    const sharedObjects = async (): Promise<number> => {
      const { records } = await readEtcdRecords({ endpoints: [etcd.endpoint], prefix }, log, 1_000).catch(
        () => ({ records: new Map<string, SourceRecord>() }),
      );
      return records.get('mesh')?.resources.length ?? 0;
    };

    before(async () => {
      etcd = await EtcdServer.start();
      upstream = await FakeAdsServer.start({ peer: 'istiod' });
      setUpstream(5);
      ({ dir, dispose } = await tempDir('meshmux-clocks-'));
    });
    after(async () => {
      for (const close of closers) await close();
      for (const c of clients) c.close();
      for (const m of running) await m.kill('SIGKILL').catch(() => undefined);
      await upstream.stop().catch(() => undefined);
      await etcd.dispose();
      await dispose();
    });

    it("restores the writer's later record, not its own older one stamped by a clock an hour ahead", async () => {
      const onTime = await replica('on-time', upstream.address);
      await until(() => writer(onTime), WAIT_MS, 'the replica on time elected the writer');
      const ahead = await replica('ahead', upstream.address, clockAheadEnv('+1h'));
      const onAhead = istiod(ahead);
      await onAhead.waitFor(holds(5), WAIT_MS, () => 'the replica ahead serves 5 + 5');
      await until(async () => (await sharedObjects()) === 10, WAIT_MS, '5 + 5 in etcd');
      // Its own record of 5 + 5 is in its folder, stamped an hour ahead.
      const ownRecord = path.join(dir, 'state-ahead', 'mesh.state');
      await until(
        () =>
          stat(ownRecord).then(
            () => true,
            () => false,
          ),
        WAIT_MS,
        'the folder record of the replica ahead',
      );
      await new Promise((r) => setTimeout(r, 1_500));
      await ahead.kill('SIGKILL');

      // The upstream changes while it is down; the writer takes the change into etcd, then the
      // writer and the upstream go.
      const onOnTime = istiod(onTime);
      setUpstream(8);
      upstream.push();
      await onOnTime.waitFor(holds(8), WAIT_MS, () => 'the writer serves 8 + 8');
      await until(async () => (await sharedObjects()) === 16, WAIT_MS, '8 + 8 in etcd');
      const served = inventory(onOnTime);
      await onTime.kill('SIGKILL');
      await upstream.stop();
      const down = await closingPort();
      closers.push(down.close);

      // The replica ahead starts again during the outage.
      const again = await replica('ahead', `127.0.0.1:${down.port}`, clockAheadEnv('+1h'));
      const later = istiod(again);
      await later.waitFor(
        (c) => c.configs(VS).size > 0,
        WAIT_MS,
        () => 'the replica ahead serves again',
      );
      await new Promise((r) => setTimeout(r, 1_000));
      const missing = lost(served, inventory(later));
      const firstVirtualServices = later.received.find((r) => r.typeUrl === VS)?.resourceCount ?? 0;
      report('a replica whose clock runs an hour ahead, restarted during an upstream outage', {
        'objects in its folder record (of 10) and in etcd (of 16)': `10 / ${await sharedObjects()}`,
        'VirtualServices in its first response (of 8)': firstVirtualServices,
        'objects lost': missing.length,
      });
      assert.equal(firstVirtualServices, 8, 'the first response holds every VirtualService');
      assert.deepEqual(missing, []);
    });
  },
);
