/**
 * What the merge engine takes from other replicas: a confirmation naming a held update by its
 * digest, and the creation times another replica's record gives objects this one stamped itself.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Subject } from 'rxjs';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { firstMatch } from '../support/deadline.js';
import { snapshotEvent, stampedObject } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';

const object = stampedObject;

/** A full state whose revision names its objects. */
function state(...resources: ConfigResource[]): SourceEvent {
  return snapshotEvent(resources, undefined, resources.map((r) => r.name).join(','));
}

/** An engine over one `file` source named `shop`, settled at once. */
function engine(): { engine: MergeEngine; events: Subject<SourceEvent> } {
  const events = new Subject<SourceEvent>();
  const e = new MergeEngine(
    [
      {
        descriptor: { name: 'shop', type: 'file', defaultNamespace: 'default' },
        events$: events,
        policy: { settleMs: 0 },
      },
    ],
    { syncTimeoutMs: 60_000 },
  );
  e.start();
  return { engine: e, events };
}

const next = (e: MergeEngine, what: string, p: (s: ConfigSnapshot) => boolean): Promise<ConfigSnapshot> =>
  firstMatch(e.snapshots$, p, 5_000, what);

const timeOf = (s: ConfigSnapshot, name: string): number | undefined =>
  s.kinds.get(VS)?.resources.find((r) => r.name === name)?.createTime.seconds;

describe('MergeEngine and other replicas', () => {
  it('applies a held update only when the confirmation names its digest', async () => {
    const { engine: e, events } = engine();
    events.next(state(object('a', 1), object('b', 1)));
    await next(e, 'served', (s) => s.ready);
    assert.equal(e.confirmHeld('shop', 'anything'), 'none', 'nothing held yet');
    events.next(state());
    const held = await next(e, 'held', (s) => s.sources[0]?.held !== undefined);
    const digest = held.sources[0]?.held?.digest ?? '';
    assert.notEqual(digest, '');
    assert.equal(e.confirmHeld('shop', 'another-update'), 'differs');
    assert.equal(e.current().sources[0]?.held?.digest, digest, 'a different update stays held');
    assert.equal(e.current().kinds.get(VS)?.resources.length, 2);
    assert.equal(e.confirmHeld('nobody', digest), 'none', 'an unknown source holds nothing');
    assert.equal(e.confirmHeld('shop', digest), 'applied');
    const applied = await next(e, 'applied', (s) => s.sources[0]?.held === undefined);
    assert.equal(applied.kinds.get(VS)?.resources.length ?? 0, 0);
    e.stop();
  });

  it("serves another replica's creation times for the objects it stamped, from a record of the same source only", async () => {
    const writer = engine();
    writer.events.next(state(object('a', 100), object('b', 100)));
    await next(writer.engine, 'writer served', (s) => s.ready);
    const follower = engine();
    follower.events.next(state(object('a', 700), object('b', 700)));
    await next(follower.engine, 'follower served', (s) => s.ready);

    // The writer's record, as the shared store hands it over.
    const record: SourceRecord = {
      source: 'shop',
      type: 'file',
      revision: 'a,b',
      savedMs: 0,
      complete: true,
      answeredKinds: [],
      resources: [object('a', 100), object('b', 100)],
    };
    follower.engine.adoptCreateTimes({ ...record, type: 'git' });
    follower.engine.adoptCreateTimes({ ...record, source: 'other' });
    // A later change, once served, shows that whatever the records above caused was served too.
    follower.events.next(state(object('a', 700), object('b', 700), object('marker', 700)));
    const before = await next(follower.engine, 'the marker', (s) => timeOf(s, 'marker') !== undefined);
    assert.equal(timeOf(before, 'a'), 700, 'a record of another type or source is not taken');
    follower.events.next(state(object('a', 700), object('b', 700)));
    await next(follower.engine, 'the marker gone', (s) => timeOf(s, 'marker') === undefined);

    follower.engine.adoptCreateTimes(record);
    const adopted = await next(follower.engine, 'times adopted', (s) => timeOf(s, 'a') === 100);
    assert.equal(timeOf(adopted, 'b'), 100);
    assert.ok(adopted.generation > before.generation);
    assert.equal(adopted.version, writer.engine.current().version, 'the same content version as the writer');
    follower.engine.adoptCreateTimes(record);
    follower.events.next(state(object('a', 700), object('b', 700), object('marker', 700)));
    const after = await next(follower.engine, 'the marker again', (s) => timeOf(s, 'marker') !== undefined);
    assert.equal(after.generation, adopted.generation + 1, 'adopting again published nothing');
    assert.equal(timeOf(after, 'a'), 100);
    writer.engine.stop();
    follower.engine.stop();
  });
});
