/**
 * What a view keeps once its last istiod has left, through real gRPC streams: within the grace
 * period it keeps what is current, and lets go of a kind as soon as the kind moves on, so an idle
 * view never pins objects the configuration no longer holds.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { until } from '../support/deadline.js';
import type { AdsCounters } from '../../src/downstream/ads-server.js';
import { SE } from '../support/type-urls.js';

const WAIT_MS = 15_000;

function serviceEntries(count: number, generation: number): string {
  return Array.from(
    { length: count },
    (_, i) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-${i}, namespace: shop}
spec: {hosts: [svc-${i}.g${generation}.example.com], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
`,
  ).join('---\n');
}

describe('a view without clients', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  const file = (): string => path.join(dir, 'shop.yaml');
  const servedCount = (): number =>
    meshmux.engine.current().kinds.get('networking.istio.io/ServiceEntry')?.resources.length ?? 0;

  /** The ADS server's counters once `check` holds of them. */
  async function countersWhen(what: string, check: (c: AdsCounters) => boolean): Promise<AdsCounters> {
    let last = meshmux.ads.counters();
    await until(() => check((last = meshmux.ads.counters())), WAIT_MS, what, { intervalMs: 20 });
    return last;
  }

  before(async () => {
    ({ dir, dispose } = await tempDir());
    await writeFile(file(), serviceEntries(300, 1));
    // A grace period far longer than the test: everything below happens within it.
    meshmux = await startFromYaml(
      // Shrinking to a tenth is what this test does on purpose: no deletion guard holds it.
      `server: {viewGrace: 10m}\nsources: [{name: shop, type: file, path: ./shop.yaml, maxDeleteRatio: 1}]\n`,
      dir,
    );
  });
  after(async () => {
    await meshmux.stop();
    await dispose();
  });

  it('lets go of a kind that moved on while it was idle, and builds it again for a client that returns', async () => {
    const first = new IstiodClient({ address: meshmux.xds, release: [SE], revision: 'canary' }).start();
    await first.waitForSync(WAIT_MS);
    assert.equal(first.configs(SE).size, 300);
    const served = await countersWhen(
      'the view to hold the ServiceEntries',
      (c) => c.viewContents >= 1 && c.cachedResponses >= 1,
    );
    first.close();
    const idle = await countersWhen('the view to be idle', (c) => c.idleViews === 1 && c.streams === 0);
    assert.equal(idle.views, served.views, 'kept for the grace period');
    assert.equal(idle.viewContents, served.viewContents, 'nothing moved yet: what it holds is current');

    // The kind shrinks to a tenth while nobody watches it.
    await writeFile(file(), serviceEntries(30, 2));
    await until(() => servedCount() === 30, WAIT_MS, 'the smaller state to be served', { intervalMs: 20 });
    const after = await countersWhen(
      'the idle view to let go of the old ServiceEntries',
      (c) => c.viewContents < served.viewContents,
    );
    assert.equal(after.views, served.views, 'the view itself is still kept');
    assert.equal(after.idleViews, 1);
    assert.ok(
      after.cachedResponses < served.cachedResponses,
      `responses kept: ${after.cachedResponses} of ${served.cachedResponses}`,
    );
    assert.ok(
      after.blockLists < served.blockLists,
      `block lists kept: ${after.blockLists} of ${served.blockLists}`,
    );

    // Back within the grace period: the same view, built again from what is current.
    const back = new IstiodClient({ address: meshmux.xds, release: [SE], revision: 'canary' }).start();
    try {
      await back.waitForSync(WAIT_MS);
      assert.equal(back.configs(SE).size, 30);
      assert.ok([...back.configs(SE).keys()].every((k) => /^shop\/svc-\d+$/.test(k)));
      const again = await countersWhen(
        'the view to be in use again',
        (c) => c.idleViews === 0 && c.viewContents >= 1,
      );
      assert.equal(again.views, served.views, 'the view kept through the grace period was reused');
    } finally {
      back.close();
    }
  });
});
