import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
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
});
