import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ConfigResource } from '../../src/core/resource.js';
import type { KindSnapshot } from '../../src/merge/config-snapshot.js';
import { changesBetween, diffSorted } from '../../src/merge/kind-changes.js';
import { KindTable, type SourceRank } from '../../src/merge/kind-table.js';
import { fakeResource } from '../support/resources.js';

const KIND = 'networking.istio.io/ServiceEntry';
const SOURCES: readonly SourceRank[] = [
  { name: 'high', priority: 5, order: 0 },
  { name: 'low', priority: 0, order: 1 },
];

const stepArb = fc.record({
  source: fc.nat({ max: SOURCES.length - 1 }),
  edits: fc.array(
    fc.record({
      namespace: fc.constantFrom('a', 'ab', 'b'),
      name: fc.constantFrom('1', '2', '3', '10'),
      body: fc.constantFrom('x', 'y', 'z'),
      remove: fc.boolean(),
    }),
    { maxLength: 4 },
  ),
  /** Whether a snapshot is taken after this step (the serving side does not look at every one). */
  look: fc.boolean(),
});

function object(namespace: string, name: string, body: string): ConfigResource {
  return fakeResource(name, { kind: KIND, namespace, body });
}

/** The pair of lists as names and bodies, for messages that say what differed. */
function shown(d: { removed: readonly ConfigResource[]; added: readonly ConfigResource[] }): string {
  const one = (r: ConfigResource): string => `${r.namespace}/${r.name}:${r.version.slice(0, 6)}`;
  return `-[${d.removed.map(one).join(' ')}] +[${d.added.map(one).join(' ')}]`;
}

describe('the change set a kind snapshot carries', () => {
  it('is exactly the difference from the snapshot before it, whatever happened in between', () => {
    let carried = 0;
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 16 }), (steps) => {
        let counter = 0;
        const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
        const states = SOURCES.map(() => new Map<string, ConfigResource>());
        let previous: KindSnapshot | undefined;
        steps.forEach((step, n) => {
          const before = states[step.source] as Map<string, ConfigResource>;
          const after = new Map(before);
          for (const e of step.edits) {
            const key = `${e.namespace}/${e.name}`;
            if (e.remove) after.delete(key);
            else after.set(key, object(e.namespace, e.name, `${step.source}${e.body}`));
          }
          table.apply(SOURCES[step.source] as SourceRank, before, after);
          states[step.source] = after;
          if (!step.look) return;
          const snap = table.snapshot();
          const at = `step ${n + 1}`;
          if (snap?.changes !== undefined) {
            assert.ok(previous !== undefined, `${at}: changes only lead from a snapshot`);
            if (snap.changes.from === previous.serial) {
              carried++;
              const walked = diffSorted(previous.resources, snap.resources);
              assert.equal(shown(snap.changes), shown(walked), `${at}: the change set`);
              assert.deepEqual(snap.changes.removed, walked.removed, `${at}: the same instances removed`);
              assert.deepEqual(snap.changes.added, walked.added, `${at}: the same instances added`);
            }
          }
          // Whoever reads the difference gets the walk's answer, by the change set or without it.
          const read = changesBetween(previous, snap);
          const walked = diffSorted(previous?.resources ?? [], snap?.resources ?? []);
          assert.equal(shown(read), shown(walked), `${at}: changesBetween`);
          previous = snap;
        });
      }),
      { numRuns: 400 },
    );
    assert.ok(carried > 100, `change sets compared with the walk ${carried} times`);
  });

  it('is carried by a one-object change to a large kind, so nothing has to walk the kind', () => {
    let counter = 0;
    const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
    const state = new Map<string, ConfigResource>();
    for (let i = 0; i < 5_000; i++) state.set(`ns/svc-${i}`, object('ns', `svc-${i}`, 'v0'));
    table.apply(SOURCES[0] as SourceRank, new Map(), state);
    const first = table.snapshot();
    assert.equal(first?.changes, undefined, 'the first state has nothing to lead from');
    const next = new Map(state);
    const replaced = object('ns', 'svc-42', 'v1');
    next.set('ns/svc-42', replaced);
    next.delete('ns/svc-7');
    table.apply(SOURCES[0] as SourceRank, state, next, { changed: new Set(['ns/svc-42', 'ns/svc-7']) });
    const second = table.snapshot();
    assert.equal(second?.changes?.from, first?.serial);
    assert.deepEqual(
      second?.changes?.removed.map((r) => r.name),
      ['svc-42', 'svc-7'],
      'the old svc-42 and svc-7, in served order',
    );
    assert.deepEqual(second?.changes?.added, [replaced]);
  });

  it("is the walk's answer between any two snapshots of a large kind, read from the chunks that differ", () => {
    const editsArb = fc.array(
      fc.record({ i: fc.nat({ max: 3999 }), body: fc.constantFrom('x', 'y'), remove: fc.boolean() }),
      { minLength: 1, maxLength: 6 },
    );
    fc.assert(
      fc.property(fc.array(editsArb, { minLength: 2, maxLength: 6 }), (steps) => {
        let counter = 0;
        const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
        const key = (i: number): [string, string] => [`ns-${i % 7}`, `svc-${i}`];
        let state = new Map<string, ConfigResource>();
        for (let i = 0; i < 3000; i++) {
          const [namespace, name] = key(i);
          state.set(`${namespace}/${name}`, object(namespace, name, 'v0'));
        }
        table.apply(SOURCES[0] as SourceRank, new Map(), state);
        const snaps = [table.snapshot() as KindSnapshot];
        for (const edits of steps) {
          const next = new Map(state);
          for (const e of edits) {
            const [namespace, name] = key(e.i);
            if (e.remove) next.delete(`${namespace}/${name}`);
            else next.set(`${namespace}/${name}`, object(namespace, name, `${e.body}${snaps.length}`));
          }
          table.apply(SOURCES[0] as SourceRank, state, next);
          state = next;
          snaps.push(table.snapshot() as KindSnapshot);
        }
        // Every pair, most of them snapshots apart (no change set leads from one to the other).
        for (let a = 0; a < snaps.length; a++) {
          for (let b = a + 1; b < snaps.length; b++) {
            const read = changesBetween(snaps[a], snaps[b]);
            const walked = diffSorted(
              (snaps[a] as KindSnapshot).resources,
              (snaps[b] as KindSnapshot).resources,
            );
            assert.equal(shown(read), shown(walked), `snapshots ${a} and ${b}`);
            assert.deepEqual(read.removed, walked.removed, `snapshots ${a} and ${b}: the instances removed`);
            assert.deepEqual(read.added, walked.added, `snapshots ${a} and ${b}: the instances added`);
            // The ADS server, the metrics and each view ask for the same pair: walked once.
            assert.equal(changesBetween(snaps[a], snaps[b]), read, `snapshots ${a} and ${b}: asked again`);
          }
        }
      }),
      { numRuns: 30 },
    );
  });

  it('is left out after a gap, where the kind had no objects', () => {
    let counter = 0;
    const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
    const one = new Map([['ns/a', object('ns', 'a', 'x')]]);
    table.apply(SOURCES[0] as SourceRank, new Map(), one);
    assert.ok(table.snapshot() !== undefined);
    table.apply(SOURCES[0] as SourceRank, one, new Map());
    assert.equal(table.snapshot(), undefined);
    const again = new Map([['ns/b', object('ns', 'b', 'x')]]);
    table.apply(SOURCES[0] as SourceRank, new Map(), again);
    assert.equal(table.snapshot()?.changes, undefined);
  });
});
