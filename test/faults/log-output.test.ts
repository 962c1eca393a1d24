import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { within } from '../support/deadline.js';
import { plainServiceEntry } from '../support/hostile-files.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { SE } from '../support/type-urls.js';

/**
 * Edits made while the log is not read: each logs a line of about 170 bytes, so these make
 * about 100 KB, past the 64 KiB a pipe holds.
 */
const EDITS = 600;

describe('log output', () => {
  it('keeps serving edits, probes and new istiods while the reader of its standard output has stopped reading', async () => {
    // Before: lines were written to stdout synchronously, retried every 100 ms while the pipe
    // was full; after about 64 KB of log (374 edits) the event loop stood still: no edit
    // reached istiods, /healthz and /ready timed out, a new istiod never synced.
    const { dir, dispose } = await tempDir();
    await mkdir(path.join(dir, 'mesh'));
    for (let i = 0; i < 5; i++)
      await writeFile(path.join(dir, 'mesh', `se-${i}.yaml`), plainServiceEntry(`se-${i}`));
    await writeFile(path.join(dir, 'meshmux.yaml'), 'sources: [{name: mesh, type: file, path: ./mesh}]\n');
    const meshmux = await MeshmuxProcess.start(path.join(dir, 'meshmux.yaml'), { cwd: dir });
    const istiod = new IstiodClient({ address: meshmux.xds }).start();
    let fresh: IstiodClient | undefined;
    try {
      await istiod.waitForSync(30_000);
      meshmux.readLog(false);
      for (let i = 0; i < EDITS; i++) {
        const name = `edit-${i}`;
        await writeFile(path.join(dir, 'mesh', `${name}.yaml`), plainServiceEntry(name));
        await istiod.waitFor(
          (c) => c.configs(SE).has(`shop/${name}`),
          10_000,
          () => `edit ${i} of ${EDITS} made while the log is not read`,
        );
      }
      const healthz = await within(fetch(`${meshmux.http}/healthz`), 5_000, '/healthz, log not read');
      assert.equal(healthz.status, 200);
      fresh = new IstiodClient({
        address: meshmux.xds,
        nodeId: 'sidecar~10.9.9.9~istiod-new.istio-system~istio-system.svc.cluster.local',
      }).start();
      await fresh.waitForSync(10_000);
      assert.equal(fresh.configs(SE).size, 5 + EDITS);

      // Read again: the lines held meanwhile come out, none dropped at this volume.
      meshmux.readLog(true);
      await meshmux.waitForLog(
        (l) => l.msg === 'state read' && l['objects'] === 5 + EDITS,
        0,
        10_000,
        'the line of the last edit',
      );
      assert.equal(await meshmux.metric('meshmux_log_lines_dropped_total'), 0);
    } finally {
      istiod.close();
      fresh?.close();
      await meshmux.kill();
      await dispose();
    }
  });
});
