import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ChunkedList } from '../../src/core/chunked-list.js';

const byValue = (a: number, b: number): number => a - b;

/** An edit: insert a value where it sorts, or remove the item at a place (modulo the length). */
const editArb = fc.oneof(
  fc.record({ op: fc.constant('insert' as const), value: fc.integer({ min: 0, max: 100_000 }) }),
  fc.record({ op: fc.constant('remove' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('replace' as const), at: fc.nat() }),
);

/** A list as built three ways: wrapped whole, cut from an iterable, or filtered. */
const startArb = fc.record({
  values: fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 3000, size: 'max' }),
  how: fc.constantFrom('wrapping' as const, 'filtered' as const, 'odd' as const),
});

function start(
  values: number[],
  how: 'wrapping' | 'filtered' | 'odd',
): { list: ChunkedList<number>; model: number[] } {
  const sorted = [...values].sort(byValue);
  if (how === 'wrapping') return { list: ChunkedList.wrapping(sorted), model: [...sorted] };
  if (how === 'filtered') return { list: ChunkedList.filtered(sorted), model: [...sorted] };
  const odd = (v: number): boolean => v % 2 === 1;
  return { list: ChunkedList.filtered(sorted, odd), model: sorted.filter(odd) };
}

function assertSame(list: ChunkedList<number>, model: readonly number[], where: string): void {
  assert.equal(list.length, model.length, `${where}: length`);
  assert.deepEqual(list.toArray(), model, `${where}: items`);
  assert.deepEqual([...list], model, `${where}: iteration`);
  // In order (the cached chunk), then at random places, then outside.
  for (let i = 0; i < model.length; i++) if (list.at(i) !== model[i]) assert.fail(`${where}: at(${i})`);
  for (let k = 0; k < 50 && model.length > 0; k++) {
    const i = (k * 7919) % model.length;
    assert.equal(list.at(i), model[i], `${where}: at(${i}) out of order`);
  }
  assert.equal(list.at(-1), undefined);
  assert.equal(list.at(model.length), undefined);
}

/** An edit at a place (modulo the length): insert -1, remove, or replace with -2. */
type PlacedEdit = readonly [number, 'insert' | 'remove' | 'replace'];

/** `a` after `edits`, each made with the list's own edits, so it shares the chunks none fell in. */
function editedAt(a: ChunkedList<number>, edits: readonly PlacedEdit[]): ChunkedList<number> {
  let b = a;
  for (const [at, edit] of edits) {
    const i = at % Math.max(b.length, 1);
    if (edit === 'insert') b = b.inserted(Math.min(i, b.length), -1);
    else if (b.length > 0 && edit === 'remove') b = b.removed(i);
    else if (b.length > 0) b = b.replaced(i, -2);
  }
  return b;
}

/** Up to `most` edits at places drawn by fast-check. */
const placedEdits = (most: number): fc.Arbitrary<PlacedEdit[]> =>
  fc.array(fc.tuple(fc.nat(), fc.constantFrom('insert' as const, 'remove' as const, 'replace' as const)), {
    maxLength: most,
  });

describe('ChunkedList', () => {
  it('holds what an array edited the same way holds, and leaves every earlier list as it was', () => {
    fc.assert(
      fc.property(startArb, fc.array(editArb, { maxLength: 60 }), ({ values, how }, edits) => {
        const built = start(values, how);
        const model = built.model;
        let list = built.list;
        assertSame(list, model, 'built');
        const earlier: Array<{ list: ChunkedList<number>; model: number[] }> = [{ list, model: [...model] }];
        for (const e of edits) {
          if (e.op === 'insert') {
            const at = list.position(e.value, byValue);
            const want = model.findIndex((v) => v >= e.value);
            assert.equal(at, want < 0 ? model.length : want, `position of ${e.value}`);
            list = list.inserted(at, e.value);
            model.splice(at, 0, e.value);
          } else if (e.op === 'remove') {
            if (model.length === 0) continue;
            const at = e.at % model.length;
            list = list.removed(at);
            model.splice(at, 1);
          } else {
            if (model.length === 0) continue;
            // The same value again (the order stands), as a new object replaces an old one.
            const at = e.at % model.length;
            list = list.replaced(at, model[at] as number);
            assert.equal(list.at(at), model[at]);
          }
          earlier.push({ list, model: [...model] });
        }
        assertSame(list, model, 'after the edits');
        for (const [n, e] of earlier.entries()) assert.deepEqual(e.list.toArray(), e.model, `list ${n} kept`);
      }),
      // Shrinking lists of thousands takes minutes: the first counterexample is reported as found.
      { numRuns: 200, endOnFailure: true },
    );
  });

  it('grows a list by inserting at the end and at the front, one item at a time, past many chunks', () => {
    let list = ChunkedList.empty<number>();
    const model: number[] = [];
    for (let i = 0; i < 3000; i++) {
      const at = i % 3 === 0 ? 0 : list.length;
      list = list.inserted(at, i);
      model.splice(at, 0, i);
    }
    assertSame(list, model, 'grown');
    while (list.length > 0) list = list.removed(list.length >>> 1);
    assert.deepEqual(list.toArray(), []);
  });

  it('gives every item of a list of more chunks than one join takes, in order', () => {
    // 1,100 chunks of 512: past the chunks joined at once, and stretches of it past them too.
    const items = Array.from({ length: 1100 * 512 + 7 }, (_, i) => i);
    const list = ChunkedList.filtered(items);
    const all = list.toArray();
    assert.equal(all.length, items.length);
    assert.ok(
      all.every((x, i) => x === i),
      'every item in its place',
    );
    const edited = list.replaced(3, -1).replaced(items.length - 2, -2);
    // The first chunk and the last (7 items) differ.
    const [was, now] = ChunkedList.unshared(list, edited);
    const tail = items.slice(-7);
    assert.deepEqual(was, [...items.slice(0, 512), ...tail]);
    assert.deepEqual(now, [
      ...items.slice(0, 3),
      -1,
      ...items.slice(4, 512),
      ...tail.slice(0, 5),
      -2,
      tail[6],
    ]);
    assert.ok(
      ChunkedList.unshared(list, ChunkedList.filtered([...items])).every(
        (side) => side.length === items.length,
      ),
      'lists sharing no chunk differ whole',
    );
  });

  it('refuses places outside the list', () => {
    const list = ChunkedList.filtered([1, 2, 3]);
    assert.throws(() => list.inserted(4, 9), RangeError);
    assert.throws(() => list.removed(3), RangeError);
    assert.throws(() => list.replaced(3, 9), RangeError);
    assert.throws(() => ChunkedList.empty<number>().removed(0), RangeError);
  });

  it('finds the stretches two lists hold in the same chunks, each item in them the same in both', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5000 }), placedEdits(6), (size, edits) => {
        const a = ChunkedList.filtered(Array.from({ length: size }, (_, i) => i * 2));
        const b = editedAt(a, edits);
        const runs = ChunkedList.sharedRuns(a, b);
        let covered = 0;
        let lastEnd = 0;
        for (const run of runs) {
          assert.ok(run.to >= lastEnd, 'in the order of the second list, apart');
          for (let k = 0; k < run.length; k++) assert.equal(b.at(run.to + k), a.at(run.from + k));
          covered += run.length;
          lastEnd = run.to + run.length;
        }
        // An edit touches one chunk: the others are found whatever their place.
        const chunks = Math.ceil(size / 512);
        if (edits.length === 0) assert.equal(covered, size);
        else if (chunks > 2 * edits.length)
          assert.ok(covered >= size - edits.length * 1024, `${covered} of ${size}`);
      }),
      { numRuns: 200 },
    );
    assert.deepEqual(ChunkedList.sharedRuns([1, 2], ChunkedList.filtered([1, 2])), []);
  });

  it('gives where two lists differ as stretches between shared chunks, from which the second list is the first', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 6000 }), placedEdits(8), fc.boolean(), (size, edits, joined) => {
        const values = Array.from({ length: size }, (_, i) => i * 2);
        // Joined: an array taken as one chunk (no larger than the chunks an insertion grows),
        // then a list in chunks.
        const cut = Math.min(size >>> 1, 1000);
        const a = joined
          ? ChunkedList.joined([values.slice(0, cut), ChunkedList.filtered(values.slice(cut))])
          : ChunkedList.filtered(values);
        const b = editedAt(a, edits);
        const stretches = ChunkedList.unsharedStretches(a, b);
        // Rebuilt from `a` by replacing each stretch, in order, `b` is what it holds.
        const rebuilt: number[] = [];
        let from = 0;
        let unshared = 0;
        for (const s of stretches) {
          assert.ok(s.wasFrom >= from, 'stretches in order, apart');
          for (let i = from; i < s.wasFrom; i++) rebuilt.push(a.at(i) as number);
          assert.equal(rebuilt.length, s.nowFrom, "a stretch starts where the second list's items do");
          s.was.forEach((v, k) => assert.equal(v, a.at(s.wasFrom + k)));
          s.now.forEach((v, k) => assert.equal(v, b.at(s.nowFrom + k)));
          rebuilt.push(...s.now);
          from = s.wasFrom + s.was.length;
          unshared += s.was.length + s.now.length;
        }
        for (let i = from; i < a.length; i++) rebuilt.push(a.at(i) as number);
        assert.deepEqual(rebuilt, b.toArray());
        const [was, now] = ChunkedList.unshared(a, b);
        assert.deepEqual(
          [was, now],
          [stretches.flatMap((s) => s.was), stretches.flatMap((s) => s.now)],
          'unshared: the stretches one after the other',
        );
        // Each edit copies the chunk it falls in (up to 1024 items once grown, one more with an
        // insertion): wherever the edits fall, what differs is those chunks, not what lies
        // between them.
        assert.ok(unshared <= edits.length * 2049, `${unshared} items unshared after ${edits.length} edits`);
        if (edits.length === 0) assert.deepEqual(stretches, []);
      }),
      { numRuns: 200 },
    );
    // Two changes at either end of 20k items: the two chunks they fell in, not all between.
    const long = ChunkedList.filtered(Array.from({ length: 20_000 }, (_, i) => i));
    const ends = long.replaced(100, -1).replaced(19_900, -1);
    const apart = ChunkedList.unsharedStretches(long, ends);
    assert.deepEqual(
      apart.map((s) => [s.wasFrom, s.was.length, s.nowFrom, s.now.length]),
      [
        [0, 512, 0, 512],
        [19_456, 512, 19_456, 512],
      ],
    );
    assert.deepEqual(ChunkedList.unsharedStretches([1, 2], ChunkedList.filtered([1, 3])), [
      { wasFrom: 0, was: [1, 2], nowFrom: 0, now: [1, 3] },
    ]);
    assert.deepEqual(ChunkedList.unsharedStretches([], ChunkedList.empty()), []);
  });
});
