import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ConfigResource } from '../../src/core/resource.js';
import type { KindSnapshot } from '../../src/merge/config-snapshot.js';
import { diffSorted } from '../../src/merge/kind-changes.js';
import { KindTable, type SourceRank } from '../../src/merge/kind-table.js';
import type { KindState } from '../../src/merge/source-ledger.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const A: SourceRank = { name: 'a', priority: 0, order: 0 };
const B: SourceRank = { name: 'b', priority: 5, order: 1 };

function table(): KindTable {
  let generation = 0;
  return new KindTable(VS, undefined, 'serve-all', () => ++generation);
}

/** `count` objects in a scrambled order (namespaces and names interleaved), keyed as a ledger keys them. */
function state(count: number, from = 0, body = 'v1'): Map<string, ConfigResource> {
  const out = new Map<string, ConfigResource>();
  for (let i = 0; i < count; i++) {
    const n = from + ((i * 7919) % count);
    const r = fakeResource(`obj-${n}`, { namespace: `ns-${n % 13}`, body });
    out.set(`${r.namespace}/${r.name}`, r);
  }
  return out;
}

/** The same change applied one key at a time (never the bulk path). */
function oneByOne(t: KindTable, rank: SourceRank, before: KindState, after: KindState): void {
  const current = new Map(before);
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    const next = new Map(current);
    const r = after.get(key);
    if (r === undefined) next.delete(key);
    else next.set(key, r);
    if (next.get(key) === current.get(key)) continue;
    t.apply(rank, new Map(current), next, { changed: new Set([key]) });
    current.clear();
    for (const [k, v] of next) current.set(k, v);
  }
}

function served(t: KindTable): string[] {
  return (t.snapshot()?.resources ?? []).map((r) => `${r.namespace}/${r.name}@${r.version}`);
}

describe('a kind table taking many objects at once', () => {
  it('serves them in namespace and name order, exactly as when they arrive one at a time', () => {
    const bulk = table();
    const single = table();
    const first = state(600);
    bulk.apply(A, new Map(), first);
    oneByOne(single, A, new Map(), first);
    const expected = [...first.values()]
      .sort((x, y) =>
        x.namespace === y.namespace ? (x.name < y.name ? -1 : 1) : x.namespace < y.namespace ? -1 : 1,
      )
      .map((r) => `${r.namespace}/${r.name}@${r.version}`);
    assert.deepEqual(served(bulk), expected);
    assert.deepEqual(served(single), expected);
    assert.equal(bulk.snapshot()?.version, single.snapshot()?.version);
  });

  it('keeps order and version through a bulk replacement, a second source and a bulk removal', () => {
    const bulk = table();
    const single = table();
    const first = state(600);
    // Half replaced by other objects, the rest given new bodies.
    const second = new Map([...state(300, 300, 'v2'), ...state(300, 1000)]);
    const other = state(400, 200, 'from-b');
    bulk.apply(A, new Map(), first);
    bulk.apply(A, first, second);
    bulk.apply(B, new Map(), other);
    bulk.apply(A, second, new Map());
    oneByOne(single, A, new Map(), first);
    oneByOne(single, A, first, second);
    oneByOne(single, B, new Map(), other);
    oneByOne(single, A, second, new Map());
    assert.deepEqual(served(bulk), served(single));
    assert.equal(served(bulk).length, 400);
    assert.equal(bulk.snapshot()?.version, single.snapshot()?.version);
    bulk.apply(B, other, new Map());
    assert.equal(bulk.snapshot(), undefined, 'nothing left to serve');
  });
  it('serves an object two sources hold as the same instance once, marked served with whichever wins', () => {
    const t = table();
    const r = fakeResource('shared', { namespace: 'shop', body: 'v1' });
    const one = new Map([['shop/shared', r]]);
    t.apply(A, new Map(), one);
    // The higher-priority source takes the key over with the very same object.
    t.apply(B, new Map(), one);
    const served = (): readonly boolean[] => (t.conflicts()[0]?.parties ?? []).map((p) => p.served);
    assert.deepEqual(t.snapshot()?.resources, [r]);
    assert.deepEqual(served(), [true, false], 'the winner is the one served');
    // The source that no longer wins lets go: the object stays served, by the winner.
    t.apply(A, one, new Map());
    assert.deepEqual(t.snapshot()?.resources, [r]);
    t.apply(B, one, new Map());
    assert.equal(t.snapshot(), undefined, 'nothing served once neither holds it');
  });

  it('says what a bulk change following a snapshot did, as a walk of both lists finds it', () => {
    // Each step: a source's new state (a stretch of names, some objects kept as the same instance,
    // some given a new body), and whether a snapshot is taken after it.
    const stepArb = fc.record({
      source: fc.constantFrom(A, B),
      from: fc.nat({ max: 400 }),
      count: fc.integer({ min: 0, max: 700 }),
      body: fc.constantFrom('v1', 'v2', 'v3'),
      keepEvery: fc.integer({ min: 1, max: 4 }),
      snapshot: fc.boolean(),
    });
    let carried = 0;
    let walked = 0;
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 8 }), (steps) => {
        const t = table();
        const states = new Map<string, Map<string, ConfigResource>>([
          [A.name, new Map()],
          [B.name, new Map()],
        ]);
        let last: KindSnapshot | undefined;
        // Whether exactly one change (counted only when it had anything to do) came since `last`.
        let since = 0;
        steps.forEach((step, n) => {
          const before = states.get(step.source.name) as Map<string, ConfigResource>;
          const after = new Map<string, ConfigResource>();
          let i = 0;
          for (const [key, r] of state(step.count, step.from, step.body)) {
            const kept = before.get(key);
            after.set(key, kept !== undefined && i++ % step.keepEvery === 0 ? kept : r);
          }
          const differs = [...new Set([...before.keys(), ...after.keys()])].some(
            (k) => before.get(k) !== after.get(k),
          );
          t.apply(step.source, before, after);
          states.set(step.source.name, after);
          if (differs) since++;
          if (!step.snapshot && n < steps.length - 1) return;
          const snap = t.snapshot();
          const at = `step ${n + 1}`;
          const changes = snap?.changes;
          if (snap !== undefined && last !== undefined && changes !== undefined) {
            assert.equal(changes.from, last.serial, `${at}: leads from the last snapshot`);
            const walk = diffSorted(last.resources, snap.resources);
            assert.deepEqual(changes.removed, walk.removed, `${at}: removed`);
            assert.deepEqual(changes.added, walk.added, `${at}: added`);
            walked++;
            if (since === 1 && 2 * step.count > 256) carried++;
          }
          if (snap !== undefined) since = 0;
          last = snap;
        });
      }),
      { numRuns: 150, seed: 7 },
    );
    assert.ok(walked > 100, `${walked} change sets checked`);
    assert.ok(carried > 20, `${carried} change sets of large changes right after a snapshot`);
  });

  it('leaves the change set to a walk when more than one change came since the last snapshot', () => {
    const t = table();
    const first = state(600);
    t.apply(A, new Map(), first);
    const start = t.snapshot();
    const second = state(600, 0, 'v2');
    t.apply(A, first, second);
    const one = t.snapshot();
    assert.ok(one?.changes !== undefined, 'a bulk change right after a snapshot carries its change set');
    assert.equal(one.changes.from, start?.serial);
    assert.equal(one.changes.removed.length, 600);
    assert.equal(one.changes.added.length, 600);
    // Two bulk changes with no snapshot between: the second one's difference is not the pair's.
    const third = state(600, 0, 'v3');
    t.apply(A, second, third);
    t.apply(A, third, state(600, 300, 'v4'));
    assert.equal(t.snapshot()?.changes, undefined);
  });
});
