/**
 * A state-of-the-world upstream that sends objects it sent before elsewhere than where they were:
 * in another order, or under the kind's other spelling of its type URL. The source hands back the
 * objects it read then (the same instances: nothing decoded, nothing held twice), found in the
 * responses it keeps, and reads anew only what changed. Real gRPC against a fake istiod.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeServiceEntry, type FakeObject } from '../support/fake-objects.js';
import { foldSourceEvents } from '../support/folded-source-state.js';
import { syncedXdsSource, type SourceEventRecorder } from '../support/source-event-recorder.js';

const SE = 'networking.istio.io/ServiceEntry';
const COUNT = 200;

function serviceEntries(changed?: number): FakeObject[] {
  return Array.from({ length: COUNT }, (_, i) =>
    fakeServiceEntry(`svc-${i}`, i === changed ? `moved-${i}.example.internal` : `svc-${i}.example.internal`),
  );
}

/** The ServiceEntries the source serves after its events so far, by `namespace/name`. */
function served(recorder: SourceEventRecorder): Map<string, ConfigResource> {
  return foldSourceEvents(recorder.events).get(SE) ?? new Map<string, ConfigResource>();
}

/** Names of the objects of `now` that are not the very instances `was` holds under their name. */
function readAnew(was: Map<string, ConfigResource>, now: Map<string, ConfigResource>): string[] {
  return [...now].filter(([key, r]) => was.get(key) !== r).map(([key]) => key);
}

describe('an xds source finding objects it read before where a response moves them', () => {
  let fake: FakeAdsServer;
  let recorder: SourceEventRecorder;

  before(async () => {
    fake = await FakeAdsServer.start({ peer: 'istiod', serves: 'both' });
    fake.set('ServiceEntry', serviceEntries());
    // Both spellings subscribed (the default), both answered with the same objects.
    recorder = await syncedXdsSource(fake.address, ['ServiceEntry'], 'auto');
    assert.equal(served(recorder).size, COUNT);
  });
  after(async () => {
    recorder.close();
    await fake.stop();
  });

  /** Pushes the objects as `fake` holds them now and waits for the snapshot that names `key` as `host`. */
  async function pushUntil(key: string, host: string): Promise<void> {
    const from = recorder.count;
    fake.push();
    await recorder.next(
      (e) =>
        e.type === 'snapshot' &&
        [...e.resources].some(
          (r) => `${r.namespace}/${r.name}` === key && Buffer.from(r.body).includes(host),
        ),
      from,
    );
  }

  it('hands back the objects it holds when the upstream lists them in reverse, and reads only the changed one', async () => {
    const was = served(recorder);
    fake.set('ServiceEntry', serviceEntries(7).reverse());
    await pushUntil('payments/svc-7', 'moved-7.example.internal');
    const now = served(recorder);
    assert.equal(now.size, COUNT);
    assert.deepEqual(readAnew(was, now), ['payments/svc-7']);
  });

  it('serves the same instances, changed ones included, from the other spelling of the type URL once the one it served goes empty', async () => {
    fake.set('ServiceEntry', serviceEntries(9));
    await pushUntil('payments/svc-9', 'moved-9.example.internal');
    const was = served(recorder);
    // The legacy spelling has listed the same objects all along: served from it now, they are the
    // objects read from the current one, none read a second time.
    fake.serves = 'legacy';
    fake.set('ServiceEntry', serviceEntries(9).concat(fakeServiceEntry('marker', 'marker.example.internal')));
    await pushUntil('payments/marker', 'marker.example.internal');
    const now = served(recorder);
    assert.equal(now.size, COUNT + 1);
    assert.deepEqual(readAnew(was, now), ['payments/marker']);
  });
});
