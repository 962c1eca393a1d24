import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { fakeDestinationRule, fakeVirtualService } from '../support/fake-objects.js';
import { startFromYaml } from '../support/meshmux-harness.js';
import { until } from '../support/deadline.js';

const DR_V1 = 'networking.istio.io/v1/DestinationRule';

type Meshmux = Awaited<ReturnType<typeof startFromYaml>>;

/** meshmux in process with one xds source: a fake upstream holding `virtualServices` and a DestinationRule. */
async function startWith(
  virtualServices: ReturnType<typeof fakeVirtualService>[],
  mute?: ReadonlySet<string>,
): Promise<{ fake: FakeAdsServer; meshmux: Meshmux }> {
  const fake = await FakeAdsServer.start({
    peer: 'istiod',
    ...(mute === undefined ? {} : { mute: new Set(mute) }),
  });
  fake.set('VirtualService', virtualServices).set('DestinationRule', [fakeDestinationRule('reviews')]);
  const meshmux = await startFromYaml(
    [
      'syncTimeout: 60s',
      'sources:',
      '  - name: upstream',
      '    type: xds',
      `    address: ${fake.address}`,
      '    kinds: [VirtualService, DestinationRule]',
      '    apiVersions: current',
    ].join('\n'),
    process.cwd(),
  );
  return { fake, meshmux };
}

describe('encoding ahead of the first istiod (meshmux in process, a real gRPC upstream)', () => {
  let fake: FakeAdsServer;
  let meshmux: Meshmux;

  before(async () => {
    // DestinationRules go unanswered at first: the snapshot is published, not ready.
    ({ fake, meshmux } = await startWith(
      [fakeVirtualService('reviews'), fakeVirtualService('ratings')],
      new Set([DR_V1]),
    ));
  });
  after(async () => {
    await meshmux.stop();
    await fake.stop();
  });

  it('waits until every source has answered, then encodes everything before anyone connects', async () => {
    await until(
      () => meshmux.engine.current().kinds.get('networking.istio.io/VirtualService')?.resources.length === 2,
      10_000,
      'the VirtualServices in a published snapshot',
    );
    assert.equal(meshmux.engine.current().ready, false);
    // A background run would have encoded both within a few turns of the event loop.
    await delay(200);
    assert.equal(meshmux.ads.counters().encodes, 0, 'nothing encoded while a source has not answered');

    fake.mute = new Set();
    fake.push();
    await until(() => meshmux.engine.current().ready, 10_000, 'the snapshot to be ready');
    await until(() => meshmux.ads.counters().encodes === 3, 10_000, 'the three objects encoded');
    // A first state is framed into a slab shared by its objects, not a buffer each.
    assert.equal(meshmux.ads.counters().aheadSlabs, 1);
  });

  it('encodes what a later change adds, before anyone connects', async () => {
    await until(() => meshmux.ads.counters().encodes === 3, 10_000, 'the first three objects encoded');
    fake.set('VirtualService', [
      fakeVirtualService('reviews'),
      fakeVirtualService('ratings'),
      fakeVirtualService('details'),
    ]);
    fake.push();
    await until(() => meshmux.ads.counters().encodes === 4, 10_000, 'the added object encoded');
    fake.set('VirtualService', [
      fakeVirtualService('reviews', 'reviews.other.svc.cluster.local'),
      fakeVirtualService('ratings'),
      fakeVirtualService('details'),
    ]);
    fake.push();
    await until(() => meshmux.ads.counters().encodes === 5, 10_000, 'the changed object encoded');
    // Nothing else: the objects already encoded are not encoded again.
    await delay(200);
    assert.equal(meshmux.ads.counters().encodes, 5);
    // What the changes brought has memory of its own: no slab is begun for an object or two.
    assert.equal(meshmux.ads.counters().aheadSlabs, 1);
  });
});

describe('encoding ahead ends when an istiod connects (meshmux in process, a real gRPC upstream)', () => {
  const OBJECTS = 20_000;
  let fake: FakeAdsServer;
  let meshmux: Meshmux;

  before(async () => {
    ({ fake, meshmux } = await startWith(
      Array.from({ length: OBJECTS }, (_, k) => fakeVirtualService(`vs-${k}`)),
    ));
  });
  after(async () => {
    await meshmux.stop();
    await fake.stop();
  });

  it('encodes nothing more in the background once a client is connected', async () => {
    // Caught while the background run is under way: it encodes a few milliseconds' worth of
    // objects per turn of the event loop, and a client connects within a few turns.
    await until(
      () => meshmux.engine.current().ready && meshmux.ads.counters().encodes > 0,
      60_000,
      'the background run to begin',
      { intervalMs: 0 },
    );
    const atConnect = meshmux.ads.counters().encodes;
    assert.ok(atConnect < OBJECTS, `the run still under way (${atConnect} encoded)`);
    const stream = new RawAdsStream(meshmux.xds);
    try {
      // A client of the DestinationRules only: nothing it is served is a VirtualService.
      stream.send({ type_url: DR_V1, response_nonce: '2026-01-01 00:00:00 +0000 UTC m=+0.1' });
      const first = await stream.next(30_000);
      assert.equal(first.resources.length, 1);
      const connected = meshmux.ads.counters().encodes;
      await delay(500);
      assert.equal(meshmux.ads.counters().encodes, connected, 'nothing encoded after the client came');
      assert.ok(connected < OBJECTS, `the run ended before the end (${connected} of ${OBJECTS + 1})`);
    } finally {
      stream.close();
    }
  });
});
