/**
 * Creation times meshmux stamps (files, git, ZooKeeper name none) are sticky per source: a
 * restart, a new read or another replica never serves the same object under another time, while
 * the times an upstream gives pass as given.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigResource, Timestamp } from '../../src/core/resource.js';
import type { SourceEvent } from '../../src/core/source-event.js';
import { SourceLedger } from '../../src/merge/source-ledger.js';
import { DEFAULT_SOURCE_POLICY } from '../../src/merge/source-rules.js';
import { snapshotEvent, stampedObject } from '../support/resources.js';
import { decodeStateFile, encodeStateFile } from '../../src/state/state-file.js';

const VS = 'networking.istio.io/VirtualService';

const object = stampedObject;

function ledger(): SourceLedger {
  return new SourceLedger(
    { name: 'shop', type: 'file', defaultNamespace: 'default' },
    { ...DEFAULT_SOURCE_POLICY, settleMs: 0 },
    0,
  );
}

/** A full state whose revision names its objects. */
function state(...resources: ConfigResource[]): SourceEvent {
  return snapshotEvent(resources, undefined, resources.map((r) => r.name).join(','));
}

const timeOf = (l: SourceLedger, name: string): Timestamp | undefined =>
  l.kind(VS).get(`shop/${name}`)?.createTime;

describe('creation times meshmux stamped', () => {
  it('keeps the time restored from the record when the source reads the object again after a restart', async () => {
    const before = ledger();
    before.apply(state(object('reviews', 1_000, true), object('ratings', 1_000, true)), new Date(5_000));
    const record = decodeStateFile(
      Buffer.concat(await encodeStateFile(before.record(new Date(6_000)))),
      'record',
    );

    const after = ledger();
    after.restore(record, new Date(4_000));
    // The restarted source stamps the time it reads them at; one of them was also edited.
    after.apply(
      state(object('reviews', 9_000, true), object('ratings', 9_000, true, 'edited')),
      new Date(9_000),
    );
    assert.deepEqual(timeOf(after, 'reviews'), { seconds: 1_000, nanos: 0 });
    assert.deepEqual(timeOf(after, 'ratings'), { seconds: 1_000, nanos: 0 }, 'an edit keeps the time too');
    assert.equal(after.kind(VS).get('shop/ratings')?.body.byteLength, 'edited'.length);
  });

  it('keeps the time an object was first served under while the source holds it, and stamps anew once it was gone', () => {
    const l = ledger();
    l.apply(state(object('reviews', 1_000, true)), new Date(1_000));
    l.apply(state(object('reviews', 2_000, true, 'edited')), new Date(2_000));
    assert.deepEqual(timeOf(l, 'reviews'), { seconds: 1_000, nanos: 0 });
    l.apply(state(object('other', 3_000, true)), new Date(3_000));
    l.apply(state(object('other', 3_000, true), object('reviews', 4_000, true)), new Date(4_000));
    assert.deepEqual(
      timeOf(l, 'reviews'),
      { seconds: 4_000, nanos: 0 },
      'deleted and created again: a new time',
    );
  });

  it('passes the times an upstream gives as given', () => {
    const l = ledger();
    l.apply(state(object('reviews', 1_000, false)), new Date(1_000));
    l.apply(state(object('reviews', 2_000, false, 'edited')), new Date(2_000));
    assert.deepEqual(timeOf(l, 'reviews'), { seconds: 2_000, nanos: 0 });
  });

  it("adopts another replica's times for the objects it stamped itself, and writes them into its own record", () => {
    const writer = ledger();
    writer.apply(state(object('reviews', 1_000, true), object('ratings', 1_000, false)), new Date(1_000));
    const follower = ledger();
    follower.apply(state(object('reviews', 1_700, true), object('ratings', 1_700, false)), new Date(1_700));

    const changes = follower.adoptCreateTimes(writer.record(new Date(2_000)));
    assert.deepEqual(
      changes.map((c) => c.kind),
      [VS],
    );
    assert.deepEqual(timeOf(follower, 'reviews'), { seconds: 1_000, nanos: 0 });
    assert.deepEqual(
      timeOf(follower, 'ratings'),
      { seconds: 1_700, nanos: 0 },
      "an upstream's own time is kept",
    );
    assert.deepEqual(
      follower.adoptCreateTimes(writer.record(new Date(2_500))),
      [],
      'adopting again changes nothing',
    );

    // A new read of the same object keeps the adopted time, and the follower's record says it.
    follower.apply(
      state(object('reviews', 1_700, true, 'edited'), object('ratings', 1_700, false)),
      new Date(3_000),
    );
    assert.deepEqual(timeOf(follower, 'reviews'), { seconds: 1_000, nanos: 0 });
    const recorded = [...follower.record(new Date(3_000)).resources].find((r) => r.name === 'reviews');
    assert.deepEqual(recorded?.createTime, { seconds: 1_000, nanos: 0 });
    assert.equal(recorded?.origin.createTimeStamped, true);
  });

  it("adopts another replica's time for what it serves while an update is held, not for the held content", () => {
    const writer = ledger();
    writer.apply(state(object('reviews', 1_000, true)), new Date(1_000));
    const follower = ledger();
    const many = Array.from({ length: 14 }, (_, i) => object(`o${i}`, 1_500, true));
    follower.apply(state(object('reviews', 1_500, true), ...many), new Date(1_500));
    // An edit with most objects gone: held, the old content still served.
    follower.apply(state(object('reviews', 1_600, true, 'edited')), new Date(1_600));
    assert.equal(follower.heldUpdate?.reason, 'mass-delete');
    follower.adoptCreateTimes(writer.record(new Date(2_000)));
    const served = follower.kind(VS).get('shop/reviews');
    assert.deepEqual(served?.createTime, { seconds: 1_000, nanos: 0 });
    assert.equal(Buffer.from(served?.body ?? []).toString(), 'reviews', 'the content served before');
    // Released, the edit is served under the adopted time.
    follower.release();
    assert.deepEqual(timeOf(follower, 'reviews'), { seconds: 1_000, nanos: 0 });
    assert.equal(Buffer.from(follower.kind(VS).get('shop/reviews')?.body ?? []).toString(), 'edited');
  });

  it("takes another replica's time for an object it reads only after that replica's record arrived", () => {
    const writer = ledger();
    writer.apply(state(object('reviews', 1_000, true), object('late', 1_000, true)), new Date(1_000));
    const follower = ledger();
    follower.apply(state(object('reviews', 1_500, true)), new Date(1_500));
    follower.adoptCreateTimes(writer.record(new Date(2_000)));
    // The follower's own read of the new object comes after the writer's record.
    follower.apply(state(object('reviews', 1_500, true), object('late', 2_500, true)), new Date(2_500));
    assert.deepEqual(timeOf(follower, 'late'), { seconds: 1_000, nanos: 0 });
  });
});
