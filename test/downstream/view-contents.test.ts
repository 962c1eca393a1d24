import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ChunkedList } from '../../src/core/chunked-list.js';
import { ContentDigest } from '../../src/core/content-digest.js';
import { compareByName, type ConfigResource } from '../../src/core/resource.js';
import type { ClientView } from '../../src/downstream/client-view.js';
import { FULL_VIEW } from '../../src/downstream/client-view.js';
import { ClientPolicy, policyView } from '../../src/downstream/policy/client-policy.js';
import { ViewContents } from '../../src/downstream/view-contents.js';
import { EMPTY_KIND_VERSION, type KindSnapshot } from '../../src/merge/config-snapshot.js';
import { KindTable } from '../../src/merge/kind-table.js';
import { fakeResource } from '../support/resources.js';

const KIND = 'networking.istio.io/VirtualService';

const RED_TEAM_DENIED = policyView(
  new ClientPolicy({ name: 'no-red', deny: { labels: { team: 'red' } } }),
  '',
);
const CANARY = policyView(undefined, 'canary');
const VIEWS: readonly ClientView[] = [RED_TEAM_DENIED, CANARY, FULL_VIEW];

function object(
  namespace: string,
  name: string,
  labels: Record<string, string> = {},
  body = '',
): ConfigResource {
  return fakeResource(name, { namespace, labels, body: `${namespace}/${name}:${body}` });
}

function snapshot(generation: number, resources: ConfigResource[], sourceRevisions?: string[]): KindSnapshot {
  const sorted = [...resources].sort(compareByName);
  const digest = new ContentDigest();
  for (const r of sorted) digest.add(r);
  return {
    kind: KIND,
    version: digest.version(),
    generation,
    resources: sorted,
    ...(sourceRevisions === undefined ? {} : { sourceRevisions }),
  };
}

/** The content version of a set of objects, whatever built it. */
function contentVersion(resources: readonly ConfigResource[]): string {
  const digest = new ContentDigest();
  for (const r of resources) digest.add(r);
  return digest.version();
}

const editArb = fc.record({
  namespace: fc.constantFrom('a', 'b', 'c'),
  name: fc.constantFrom('1', '2', '3', '4', '5'),
  team: fc.constantFrom('red', 'blue', undefined),
  rev: fc.constantFrom('canary', 'stable', undefined),
  body: fc.constantFrom('x', 'y'),
  remove: fc.boolean(),
});

/** What an arbitrary generates. */
type EditOf<A> = A extends fc.Arbitrary<infer T> ? T : never;

/** Applies generated edits to a state by key: a removal, or a new instance of the object. */
function applyEdits(
  state: Map<string, ConfigResource>,
  edits: ReadonlyArray<EditOf<typeof editArb>>,
): Map<string, ConfigResource> {
  for (const e of edits) {
    const key = `${e.namespace}/${e.name}`;
    if (e.remove) state.delete(key);
    else {
      const labels: Record<string, string> = {
        ...(e.team === undefined ? {} : { team: e.team }),
        ...(e.rev === undefined ? {} : { 'istio.io/rev': e.rev }),
      };
      state.set(key, object(e.namespace, e.name, labels, e.body));
    }
  }
  return state;
}

describe('view contents', () => {
  it('serves each view exactly the objects it admits, in order, through any sequence of changes to the kind', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(editArb, { maxLength: 6 }), { minLength: 1, maxLength: 8 }),
        (generations) => {
          const contents = new ViewContents();
          const held = new Map<string, ConfigResource>();
          generations.forEach((edits, g) => {
            // A fresh instance every time, even for equal content: the merge re-creates objects.
            applyEdits(held, edits);
            const kind = snapshot(g + 1, [...held.values()]);
            for (const view of VIEWS) {
              const got = contents.of(view, kind);
              const want = kind.resources.filter((r) => view.admits(r));
              assert.equal(got.resources.length, want.length, `${view.id}: count at generation ${g + 1}`);
              got.resources.forEach((r, i) => assert.equal(r, want[i], `${view.id}: object ${i}`));
              assert.equal(got.version, contentVersion(want), `${view.id}: version`);
              assert.equal(
                got.version,
                new ViewContents().of(view, kind).version,
                `${view.id}: as built afresh`,
              );
            }
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('follows the change sets of a real kind table, for views that look at every snapshot or skip some', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ edits: fc.array(editArb, { maxLength: 6 }), looks: fc.nat({ max: 7 }) }), {
          minLength: 1,
          maxLength: 10,
        }),
        (steps) => {
          let counter = 0;
          const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
          const rank = { name: 'git', priority: 0, order: 0 };
          const contents = new ViewContents();
          let held = new Map<string, ConfigResource>();
          steps.forEach(({ edits, looks }, n) => {
            const next = applyEdits(new Map(held), edits);
            table.apply(rank, held, next);
            held = next;
            const kind = table.snapshot();
            // Each view reads this snapshot or not, as its clients happen to ask (bit i of `looks`).
            VIEWS.forEach((view, i) => {
              if ((looks & (1 << i)) === 0) return;
              const got = contents.of(view, kind);
              const want = (kind?.resources ?? []).filter((r) => view.admits(r));
              const at = `${view.id} after step ${n + 1}`;
              // Equal content may be held as the instances of an earlier snapshot of the same generation.
              const named = (list: readonly ConfigResource[]) =>
                list.map((r) => `${r.namespace}/${r.name}@${r.version}`);
              assert.deepEqual(named(got.resources), named(want), `${at}: objects`);
              const content = got.version.split('~')[0];
              assert.equal(content, kind === undefined ? EMPTY_KIND_VERSION : contentVersion(want), at);
            });
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps a view list as it was, no copy, through changes to objects the view does not admit', () => {
    let counter = 0;
    const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
    const rank = { name: 'git', priority: 0, order: 0 };
    const contents = new ViewContents();
    const blue = object('a', '1', { team: 'blue' });
    const before = new Map([
      ['a/1', blue],
      ['a/2', object('a', '2', { team: 'red' })],
    ]);
    table.apply(rank, new Map(), before);
    const first = contents.of(RED_TEAM_DENIED, table.snapshot());

    // The red object changes, and another red one arrives: nothing this view serves moved.
    const reds = new Map(before);
    reds.set('a/2', object('a', '2', { team: 'red' }, 'edited'));
    reds.set('b/1', object('b', '1', { team: 'red' }));
    table.apply(rank, before, reds);
    const second = contents.of(RED_TEAM_DENIED, table.snapshot());
    assert.equal(second.list, first.list, 'the same list, not a copy of it');
    assert.equal(second.version, first.version);

    // A blue object arrives: a new list, the one handed out before untouched.
    const blues = new Map(reds);
    const blue2 = object('b', '2', { team: 'blue' });
    blues.set('b/2', blue2);
    table.apply(rank, reds, blues);
    const third = contents.of(RED_TEAM_DENIED, table.snapshot());
    assert.notEqual(third.resources, first.resources);
    assert.deepEqual(first.resources, [blue]);
    assert.deepEqual(third.resources, [blue, blue2]);
    assert.equal(third.version.split('~')[0], contentVersion([blue, blue2]));
  });

  it('edits a view for a change of a few of its objects, and builds it again for one of many, alike', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 3000 }),
        fc.array(fc.record({ changes: fc.integer({ min: 0, max: 400 }), seed: fc.nat() }), {
          minLength: 1,
          maxLength: 4,
        }),
        (size, steps) => {
          let counter = 0;
          const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
          const rank = { name: 'git', priority: 0, order: 0 };
          const contents = new ViewContents();
          const team = (i: number): string => (i % 3 === 0 ? 'red' : 'blue');
          let held = new Map<string, ConfigResource>();
          for (let i = 0; i < size; i++) held.set(`a/${i}`, object('a', `${i}`, { team: team(i) }));
          table.apply(rank, new Map(), held);
          let last = contents.of(RED_TEAM_DENIED, table.snapshot());
          steps.forEach(({ changes, seed }, n) => {
            const next = new Map(held);
            for (let j = 0; j < changes; j++) {
              const i = (seed + j * 7) % (size + 50);
              // Some removed, some new, most edited in place.
              if (j % 5 === 0) next.delete(`a/${i}`);
              else next.set(`a/${i}`, object('a', `${i}`, { team: team(i) }, `step ${n}`));
            }
            table.apply(rank, held, next);
            held = next;
            const kind = table.snapshot();
            const got = contents.of(RED_TEAM_DENIED, kind);
            const want = (kind?.resources ?? []).filter((r) => RED_TEAM_DENIED.admits(r));
            assert.equal(got.resources.length, want.length, `step ${n + 1}: count`);
            got.resources.forEach((r, i) => assert.equal(r, want[i], `step ${n + 1}: object ${i}`));
            assert.equal(got.version, new ViewContents().of(RED_TEAM_DENIED, kind).version, `step ${n + 1}`);
            // A few edits share every chunk they did not touch with the list before (an edit
            // touches one or two); many, none.
            const before = new Set(ChunkedList.chunksOf(last.list));
            const chunks = ChunkedList.chunksOf(got.list);
            const shared = chunks.filter((c) => before.has(c)).length;
            if (changes <= 10) assert.ok(shared >= chunks.length - 2 * changes, `step ${n + 1}: ${shared}`);
            if (changes >= 200) assert.equal(shared, 0, `step ${n + 1}: ${changes} changes`);
            last = got;
          });
        },
      ),
      { numRuns: 60 },
    );
  });

  it('builds a view again for a change of hundreds of its objects, even all in one chunk', () => {
    let counter = 0;
    const table = new KindTable(KIND, undefined, 'serve-all', () => ++counter);
    const rank = { name: 'git', priority: 0, order: 0 };
    const contents = new ViewContents();
    const name = (i: number): string => String(i).padStart(5, '0');
    const held = new Map<string, ConfigResource>();
    for (let i = 0; i < 6000; i++) held.set(`a/${name(i)}`, object('a', name(i), { team: 'blue' }));
    table.apply(rank, new Map(), held);
    const first = contents.of(RED_TEAM_DENIED, table.snapshot());
    const before = new Set(ChunkedList.chunksOf(first.list));
    // One object: every chunk but the one it lies in stays.
    const one = new Map(held);
    one.set('a/00010', object('a', name(10), { team: 'blue' }, 'edited'));
    table.apply(rank, held, one);
    const second = contents.of(RED_TEAM_DENIED, table.snapshot());
    const chunks = ChunkedList.chunksOf(second.list);
    assert.equal(chunks.filter((c) => before.has(c)).length, chunks.length - 1);
    // Three hundred objects of the first chunk: the content is built again, sharing nothing.
    const many = new Map(one);
    for (let i = 0; i < 300; i++) many.set(`a/${name(i)}`, object('a', name(i), { team: 'blue' }, 'again'));
    table.apply(rank, one, many);
    const kind = table.snapshot();
    const third = contents.of(RED_TEAM_DENIED, kind);
    const kept = new Set(ChunkedList.chunksOf(second.list));
    assert.equal(ChunkedList.chunksOf(third.list).filter((c) => kept.has(c)).length, 0);
    assert.deepEqual(third.resources, kind?.resources);
    assert.equal(third.version, new ViewContents().of(RED_TEAM_DENIED, kind).version);
  });

  it('serves an absent kind as empty, under the empty version', () => {
    const got = new ViewContents().of(RED_TEAM_DENIED, undefined);
    assert.equal(got.version, EMPTY_KIND_VERSION);
    assert.deepEqual(got.resources, []);
  });

  it('serves a view that admits everything the kind itself, under the kind version', () => {
    const kind = snapshot(1, [object('a', '1'), object('b', '2', { team: 'red' })]);
    const got = new ViewContents().of(FULL_VIEW, kind);
    assert.equal(got.resources, kind.resources);
    assert.equal(got.version, kind.version);
  });

  it('returns the same content for the same generation without rebuilding it', () => {
    const contents = new ViewContents();
    const kind = snapshot(1, [object('a', '1'), object('a', '2', { team: 'red' })]);
    const first = contents.of(RED_TEAM_DENIED, kind);
    assert.equal(contents.of(RED_TEAM_DENIED, kind), first);
    const next = contents.of(RED_TEAM_DENIED, snapshot(2, [object('a', '1')]));
    assert.notEqual(next, first, 'a new generation gets a new content');
  });

  it('leaves the content it handed out for an earlier generation as it was', () => {
    const contents = new ViewContents();
    const one = object('a', '1');
    const first = contents.of(RED_TEAM_DENIED, snapshot(1, [one]));
    const held = [...first.resources];
    contents.of(RED_TEAM_DENIED, snapshot(2, [one, object('a', '2'), object('b', '1')]));
    contents.of(RED_TEAM_DENIED, snapshot(3, [object('b', '1')]));
    assert.deepEqual(first.resources, held, 'a response being written keeps its objects');
  });

  it('names the sources revisions after the content, and moves them only when the view content changes', () => {
    const contents = new ViewContents();
    const blue = object('a', '1', { team: 'blue' });
    const g1 = contents.of(RED_TEAM_DENIED, snapshot(1, [blue], ['r1', 'z1']));
    assert.equal(g1.version, `${contentVersion([blue])}~r1,z1`);

    // A red object arrives: the kind changes, this view does not, and keeps its version.
    const red = object('a', '2', { team: 'red' });
    const g2 = contents.of(RED_TEAM_DENIED, snapshot(2, [blue, red], ['r2', 'z1']));
    assert.equal(g2.version, g1.version);
    assert.deepEqual(g2.resources, [blue]);

    // A blue object arrives: the content changes and the version names the current revisions.
    const blue2 = object('b', '1', { team: 'blue' });
    const g3 = contents.of(RED_TEAM_DENIED, snapshot(3, [blue, red, blue2], ['r3', 'z1']));
    assert.equal(g3.version, `${contentVersion([blue, blue2])}~r3,z1`);

    // Without revisions the version is the content alone.
    const g4 = contents.of(RED_TEAM_DENIED, snapshot(4, [blue], []));
    assert.equal(g4.version, contentVersion([blue]));
    const fresh = new ViewContents().of(CANARY, snapshot(1, [blue]));
    assert.equal(fresh.version, contentVersion([blue]));
  });

  it('keeps state per view and kind, and forgets a view with the kinds it held', () => {
    const contents = new ViewContents();
    assert.equal(contents.views, 0);
    assert.equal(contents.entries, 0);
    const vs = snapshot(1, [object('a', '1')]);
    const gw: KindSnapshot = { ...vs, kind: 'networking.istio.io/Gateway' };
    contents.of(RED_TEAM_DENIED, vs);
    contents.of(RED_TEAM_DENIED, gw);
    contents.of(CANARY, vs);
    contents.of(CANARY, undefined);
    assert.equal(contents.views, 2);
    assert.equal(contents.entries, 3);
    assert.deepEqual(
      contents.forget(RED_TEAM_DENIED.id).sort(),
      [KIND, 'networking.istio.io/Gateway'].sort(),
    );
    assert.equal(contents.views, 1);
    assert.equal(contents.entries, 1);
    assert.deepEqual(contents.forget(RED_TEAM_DENIED.id), [], 'a forgotten view holds nothing');
    // A view that comes back is built afresh, from the kind as it is now.
    const now = snapshot(2, [object('a', '1'), object('a', '9')]);
    assert.equal(contents.of(RED_TEAM_DENIED, now).resources.length, 2);
  });
});
