import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { StalledAdsClient } from '../support/stalled-ads-client.js';
import { SE } from '../support/type-urls.js';

function serviceEntries(count: number): string {
  return Array.from(
    { length: count },
    (_, i) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-${i}, namespace: shop}
spec:
  hosts: [svc-${i}.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
`,
  ).join('---\n');
}

describe('shutdown', () => {
  it('takes a SIGTERM that arrives the moment it reports it started as a clean shutdown, not a kill', async () => {
    // Before: the signal handlers were installed only after the start returned, so a signal in
    // between took the default action (killed by SIGTERM, nothing closed, no log line); a pod
    // deleted while it came up hit that window.
    const { dir, dispose } = await tempDir();
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'se.yaml'), serviceEntries(5));
    await writeFile(path.join(dir, 'meshmux.yaml'), 'sources: [{name: mesh, type: file, path: ./mesh}]\n');
    try {
      const outcomes: string[] = [];
      for (let round = 0; round < 10; round++) {
        const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
        try {
          const stopped = await meshmux.stop('SIGTERM');
          outcomes.push(
            `${String(stopped.code)}${meshmux.lines('shutting down').length === 1 ? '' : ' (no shutdown line)'}`,
          );
        } finally {
          await meshmux.kill();
        }
      }
      console.log(`# SIGTERM right after the start line, 10 starts: exit codes ${outcomes.join(', ')}`);
      assert.deepEqual(
        outcomes,
        Array.from({ length: 10 }, () => '0'),
      );
    } finally {
      await dispose();
    }
  });

  it('ends on an error nothing caught with a fatal log line naming it, exit code 1', async () => {
    // A module loaded before meshmux throws, outside any handler, when the test sends SIGUSR2: an
    // error no code of meshmux's could catch, as a fault in a library's callback would be.
    const fault =
      "process.on('SIGUSR2', () => setImmediate(() => { throw new Error('a fault nothing caught'); }));";
    const nodeOptions = `--import=data:text/javascript;base64,${Buffer.from(fault).toString('base64')}`;
    const { dir, dispose } = await tempDir();
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'se.yaml'), serviceEntries(1));
    await writeFile(path.join(dir, 'meshmux.yaml'), 'sources: [{name: mesh, type: file, path: ./mesh}]\n');
    const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), {
      cwd: dir,
      env: { NODE_OPTIONS: nodeOptions },
    });
    try {
      const { code } = await meshmux.stop('SIGUSR2');
      const [fatal] = meshmux.lines('unexpected error: exiting');
      console.log(
        `# an error nothing caught: exit code ${String(code)}, fatal line ${JSON.stringify(fatal)}`,
      );
      assert.equal(code, 1);
      assert.equal(fatal?.['level'], 60);
      assert.match(JSON.stringify(fatal?.['err']), /a fault nothing caught/);
    } finally {
      await meshmux.kill();
      await dispose();
    }
  });

  it('exits on SIGTERM as soon as its streams are closed, without waiting out the grace period, even with a client known not to read', async () => {
    const { dir, dispose } = await tempDir();
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'se.yaml'), serviceEntries(200));
    await writeFile(path.join(dir, 'meshmux.yaml'), 'sources: [{name: mesh, type: file, path: ./mesh}]\n');
    const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    const clients = [0, 1, 2].map((i) =>
      new IstiodClient({
        address: meshmux.xds,
        nodeId: `sidecar~10.0.0.${i}~istiod-${i}.istio-system~istio-system.svc.cluster.local`,
      }).start(),
    );
    const stalled = new StalledAdsClient(meshmux.xds, [SE], 'stuck');
    try {
      await Promise.all(clients.map((c) => c.waitForSync(30_000)));
      // Known not to read (parked) before the signal: its status could never get through.
      for (const deadline = Date.now() + 15_000; ; await delay(100)) {
        const { stalls } = await meshmux.debug<{ stalls: number }>('counters');
        if (stalls >= 1) break;
        assert.ok(Date.now() < deadline, 'the client that never reads was not parked within 15 s');
      }
      const stopped = await meshmux.stop('SIGTERM');
      const closed = meshmux.lines('ADS server stopped');
      console.log(
        `# shutdown: SIGTERM to exit with 3 istiods and 1 client that never reads: ${stopped.ms.toFixed(0)} ms (grace period ${String(closed[0]?.['graceMs'])} ms)`,
      );
      assert.equal(stopped.killed, false, 'meshmux exited by itself');
      assert.equal(stopped.code, 0);
      assert.equal(closed.length, 1);
      assert.equal(closed[0]?.['forced'], false, 'every stream closed before the grace period ran out');
      for (const c of clients) await c.waitFor((x) => x.streamEnds.length > 0, 5_000);
    } finally {
      for (const c of clients) c.close();
      stalled.close();
      await meshmux.kill();
      await dispose();
    }
  });

  it('exits promptly on SIGTERM while clients connect just before and during it, even one whose first response has not gone out yet, ending them with UNAVAILABLE', async () => {
    const { dir, dispose } = await tempDir();
    await mkdir(path.join(dir, 'mesh'));
    await writeFile(path.join(dir, 'mesh', 'se.yaml'), serviceEntries(200));
    await writeFile(path.join(dir, 'meshmux.yaml'), 'sources: [{name: mesh, type: file, path: ./mesh}]\n');
    const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    const client = new IstiodClient({ address: meshmux.xds }).start();
    const late: RawAdsStream[] = [];
    let slow: StalledAdsClient | undefined;
    const open = (): void => {
      const stream = new RawAdsStream(meshmux.xds);
      stream.send({
        node: { id: `sidecar~10.0.1.${late.length}~late.istio-system~istio-system.svc.cluster.local` },
        type_url: SE,
      });
      late.push(stream);
    };
    try {
      await client.waitForSync(30_000);
      // A client that connected just before the signal and has not read its first response yet:
      // not known to stall (that takes seconds), so nothing marks it as one that never reads.
      slow = new StalledAdsClient(meshmux.xds, [SE], 'just-connected');
      for (const deadline = Date.now() + 15_000; ; await delay(20)) {
        const counters = await meshmux.debug<{ streams: number; bytesInFlight: number; stalls: number }>(
          'counters',
        );
        if (counters.streams >= 2 && counters.bytesInFlight > 0) {
          assert.equal(counters.stalls, 0, 'the new client is not yet known to stall');
          break;
        }
        assert.ok(Date.now() < deadline, "the new client's first response was not on its way within 15 s");
      }
      // Streams opened right before the signal: their requests are still on the way when it lands.
      for (let i = 0; i < 5; i++) open();
      const stopping = meshmux.stop('SIGTERM');
      // And streams opened while meshmux is shutting down, until it is gone.
      let opening = true;
      void stopping.finally(() => (opening = false));
      while (opening && late.length < 200) {
        open();
        await delay(2);
      }
      const stopped = await stopping;
      const closed = meshmux.lines('ADS server stopped');
      const statuses = await Promise.all(late.map((s) => s.status));
      const slowStatus = StalledAdsClient.statusOf(await slow.ended);
      const codes = new Map<string, number>();
      for (const st of statuses) {
        const name = String(Object.entries(grpc.status).find(([, v]) => v === st.code)?.[0]);
        codes.set(name, (codes.get(name) ?? 0) + 1);
      }
      console.log(
        `# shutdown: SIGTERM to exit with ${late.length} streams opened just before and during it: ${stopped.ms.toFixed(0)} ms (grace period ${String(closed[0]?.['graceMs'])} ms, forced ${String(closed[0]?.['forced'])}); their statuses: ${JSON.stringify(Object.fromEntries(codes))}; the client reading its first response: ${String(slowStatus)}`,
      );
      assert.equal(stopped.killed, false, 'meshmux exited by itself');
      assert.equal(stopped.code, 0);
      assert.equal(closed.length, 1);
      assert.equal(
        closed[0]?.['forced'],
        false,
        'no stream opened around the signal held the server until the grace period ran out',
      );
      assert.equal(
        slowStatus,
        grpc.status.UNAVAILABLE,
        'the client still reading its first response got UNAVAILABLE',
      );
      for (const st of statuses) {
        assert.ok(
          st.code === grpc.status.UNAVAILABLE || st.code === grpc.status.OK,
          `a late stream ended with ${st.code} (${st.details}), not UNAVAILABLE`,
        );
      }
    } finally {
      client.close();
      slow?.close();
      for (const s of late) s.close();
      await meshmux.kill();
      await dispose();
    }
  });
});
