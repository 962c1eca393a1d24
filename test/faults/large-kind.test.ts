/**
 * A source with one kind of 150,000 objects, against meshmux running as its own process: the
 * kinds of a stream used to be joined into one snapshot by spreading each list as arguments, which
 * overflows the call stack at some 125,000 objects and threw out of the stream's data handler,
 * taking the process down (and again on every restart). Now the whole kind is served.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeServiceEntry, fakeVirtualService } from '../support/fake-objects.js';
import { connectIstiod, readiness, report } from '../support/fault-kit.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SE, VS } from '../support/type-urls.js';

const COUNT = 150_000;

describe('faults: an xds upstream with a kind of 150,000 objects', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let upstream: FakeAdsServer;
  let meshmux: MeshmuxProcess;
  let client: IstiodClient;

  before(async () => {
    dir = await tempDir('meshmux-fault-large-kind-');
    upstream = await FakeAdsServer.start({ peer: 'istiod' });
    upstream.set(
      'ServiceEntry',
      Array.from({ length: COUNT }, (_, i) => fakeServiceEntry(`svc-${i}`, `svc-${i}.example.com`)),
    );
    upstream.set('VirtualService', [fakeVirtualService('reviews')]);
    await writeFile(
      path.join(dir.dir, 'meshmux.yaml'),
      [
        'sources:',
        '  - name: large',
        '    type: xds',
        `    address: ${upstream.address}`,
        '    kinds: [ServiceEntry, VirtualService]',
        '',
      ].join('\n'),
    );
    meshmux = await MeshmuxProcess.start(path.join(dir.dir, 'meshmux.yaml'), { cwd: dir.dir });
    client = connectIstiod(meshmux.xds);
  });
  after(async () => {
    client.close();
    await meshmux.kill();
    await upstream.stop();
    await dir.dispose();
  });

  it('serves every object of the kind, the process alive and the source synced', async () => {
    await client.waitFor(
      (c) => !meshmux.alive || (c.configs(SE).size === COUNT && c.configs(VS).size === 1),
      120_000,
      () =>
        `the istiod holds ${client.configs(SE).size} ServiceEntries; meshmux alive: ${meshmux.alive}\n${meshmux.errorOutput.slice(-2000)}`,
    );
    const servedMs = performance.now() - meshmux.spawnedAt;
    assert.ok(meshmux.alive, `meshmux exited:\n${meshmux.errorOutput.slice(-2000)}`);
    const { body } = await readiness(meshmux.http);
    assert.equal(body.ready, true);
    assert.equal(body.sources.find((s) => s.name === 'large')?.state, 'synced');
    report('a kind of 150,000 objects from one upstream', {
      'objects served': client.configs(SE).size,
      'ms from spawn to the istiod holding them': servedMs,
    });
  });
});
