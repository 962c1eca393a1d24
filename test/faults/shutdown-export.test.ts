import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import { within } from '../support/deadline.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { meshmuxOnFolder } from '../support/fault-kit.js';
import { IstiodClient } from '../support/istiod-client.js';
import { SE } from '../support/type-urls.js';

/**
 * An OTLP collector that answers 200 to the first request it reads and then sends the body one
 * byte every 2 s, never ending it. `exporting` resolves once a request arrived.
 */
async function dribblingCollector(): Promise<{ port: number; exporting: Promise<void>; close: () => void }> {
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let arrived: () => void = () => undefined;
  const exporting = new Promise<void>((resolve) => (arrived = resolve));
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => {
      arrived();
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n');
      timers.add(setInterval(() => socket.write('1\r\n \r\n'), 2_000));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    exporting,
    close: () => {
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('shutdown with tracing on', () => {
  it('exits on SIGTERM within seconds while the collector dribbles its answer to the last export', async () => {
    // Before: the stop waited for the exporter's shutdown without a deadline; a collector that
    // answered one byte every 2 s held the exit until the process was killed (60 s and more).
    const collector = await dribblingCollector();
    const { meshmux, dir, dispose } = await meshmuxOnFolder({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.port}`,
      OTEL_BSP_SCHEDULE_DELAY: '200',
    });
    const istiod = new IstiodClient({ address: meshmux.xds }).start();
    try {
      await istiod.waitForSync(30_000);
      for (let i = 1; i <= 5; i++) {
        await writeFile(path.join(dir, 'mesh', `se-${i}.yaml`), plainServiceEntry(`se-${i}`));
        await istiod.waitFor(
          (c) => c.configs(SE).has(`shop/se-${i}`),
          10_000,
          () => `edit ${i}`,
        );
      }
      await within(collector.exporting, 20_000, 'an export to the collector');
      const stopped = await meshmux.stop('SIGTERM', 15_000);
      console.log(`# SIGTERM to exit with an export under way: ${Math.round(stopped.ms)} ms`);
      assert.equal(stopped.killed, false, 'killed after 15 s');
      assert.equal(stopped.code, 0);
      assert.equal(meshmux.lines('shutting down').length, 1);
    } finally {
      istiod.close();
      await meshmux.kill();
      collector.close();
      await dispose();
    }
  });
});
