/**
 * A change is on disk before istiods are sent it: meshmux killed (SIGKILL) at once after an istiod
 * stand-in holds a change, its upstream stopped, and restarted on the same state folder serves
 * every object the istiod was sent, so the istiod deletes nothing.
 */
import assert from 'node:assert/strict';
import { access, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { until } from '../support/deadline.js';
import { answeredAfter, connectIstiod, inventory, lost, meshUpstream, report } from '../support/fault-kit.js';
import { fakeVirtualService } from '../support/fake-objects.js';
import { freePort } from '../support/free-port.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;

/**
 * Serves the mesh upstream's 15 objects, waits for its record to be on disk, changes the
 * VirtualServices to `count`, kills meshmux as soon as the istiod holds them, stops the upstream
 * and restarts meshmux: what the istiod lost, and how long the change took to reach it.
 */
async function killedRightAfterTheChange(count: number): Promise<{ lost: string[]; servedMs: number }> {
  const dir = await tempDir('kept-before-served-');
  const fake = await meshUpstream();
  const configFile = path.join(dir.dir, 'meshmux.yaml');
  await writeFile(
    configFile,
    [
      'state: { dir: state }',
      'sources:',
      '  - name: mesh',
      '    type: xds',
      `    address: ${fake.address}`,
      '    kinds: [VirtualService, DestinationRule, ServiceEntry]',
      '',
    ].join('\n'),
  );
  const xds = `127.0.0.1:${await freePort()}`;
  let meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
  const istiod = connectIstiod(meshmux.xds);
  try {
    await istiod.waitFor(
      (c) => c.configs(VS).size === 5,
      WAIT_MS,
      () => '5 VirtualServices served',
    );
    const file = path.join(dir.dir, 'state', 'mesh.state');
    await until(
      () =>
        access(file).then(
          () => true,
          () => false,
        ),
      WAIT_MS,
      'the first record written',
    );
    const changedAt = performance.now();
    fake.set(
      'VirtualService',
      Array.from({ length: count }, (_, i) => fakeVirtualService(`svc-${i}`)),
    );
    fake.push();
    await istiod.waitFor(
      (c) => c.configs(VS).size === count,
      WAIT_MS,
      () => `${count} VirtualServices served`,
    );
    const servedMs = performance.now() - changedAt;
    const held = inventory(istiod);
    await meshmux.kill('SIGKILL');
    await fake.stop();
    const streamsBefore = istiod.streams;
    meshmux = await MeshmuxProcess.start(configFile, { cwd: dir.dir, xds });
    await answeredAfter(istiod, streamsBefore, 'the restarted meshmux answered every type');
    return { lost: lost(held, inventory(istiod)), servedMs };
  } finally {
    istiod.close();
    await meshmux.kill();
    await fake.stop();
    await dir.dispose();
  }
}

describe('a change is kept before istiods are sent it', () => {
  it('a restart right after a change of a few objects serves every object the istiod was sent', async () => {
    const { lost: gone, servedMs } = await killedRightAfterTheChange(10);
    report('killed at once after 5 VirtualServices were added', {
      'ms change to istiod': servedMs,
      'objects lost at the istiod': gone.length,
    });
    assert.deepEqual(gone, []);
  });

  it('a restart right after a change of most objects serves every object the istiod was sent', async () => {
    // 35 objects inserted into 15: the record is written whole, not journaled.
    const { lost: gone, servedMs } = await killedRightAfterTheChange(40);
    report('killed at once after 35 VirtualServices were added', {
      'ms change to istiod': servedMs,
      'objects lost at the istiod': gone.length,
    });
    assert.deepEqual(gone, []);
  });
});
