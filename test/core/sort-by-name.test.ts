/**
 * Every served list is in `compareByName`'s order, and replicas must agree on it byte for byte:
 * `sortByName`, which sorts a kind table's objects namespace by namespace, must give exactly the
 * order one sort by `compareByName` gives, whatever the names hold.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compareByName, mergedByName, sortByName } from '../../src/core/resource.js';

interface Named {
  readonly namespace: string;
  readonly name: string;
  /** Tells apart objects of one name, whose order a stable sort keeps. */
  readonly id: number;
}

/**
 * Text of few characters, so that names repeat and share prefixes: the separators that sort
 * before and after `/`, digits, letters outside ASCII, one above the surrogates (code units and
 * code points sort it apart) and one outside the BMP (two code units).
 */
function text(maxParts: number): fc.Arbitrary<string> {
  return fc
    .array(fc.constantFrom('a', 'b', '-', '.', '0', '9', 'z', 'é', 'Ａ', '😀', ''), { maxLength: maxParts })
    .map((parts) => parts.join(''));
}

describe('sortByName', () => {
  it('orders objects as one sort by compareByName does, objects of one name in the order given', () => {
    let repeated = 0;
    fc.assert(
      fc.property(fc.array(fc.record({ namespace: text(3), name: text(2) }), { maxLength: 60 }), (pairs) => {
        const items: Named[] = pairs.map((p, id) => ({ ...p, id }));
        const expected = [...items].sort(compareByName);
        const sorted = sortByName([...items]);
        assert.deepEqual(
          sorted.map((r) => r.id),
          expected.map((r) => r.id),
        );
        if (new Set(pairs.map((p) => `${p.namespace}\0${p.name}`)).size < pairs.length) repeated++;
      }),
      { numRuns: 500, seed: 3 },
    );
    assert.ok(repeated > 40, `${repeated} lists with a name given twice`);
  });

  it('sorts the list it is given, and keeps an order already sorted', () => {
    const items: Named[] = [
      { namespace: 'b', name: 'x', id: 0 },
      { namespace: 'a-b', name: 'y', id: 1 },
      { namespace: 'a', name: 'z', id: 2 },
      { namespace: 'a', name: 'b', id: 3 },
    ];
    const sorted = sortByName(items);
    assert.equal(sorted, items);
    // "a" before "a-b" (a prefix first), though "a/…" sorts after "a-b/…" as a key.
    assert.deepEqual(
      sorted.map((r) => r.id),
      [3, 2, 1, 0],
    );
    assert.deepEqual(
      sortByName([...sorted]).map((r) => r.id),
      [3, 2, 1, 0],
    );
  });
});

describe('mergedByName', () => {
  it('gives two sorted lists as one sort of both does, the first list first where names tie', () => {
    const named = fc.array(fc.record({ namespace: text(3), name: text(2) }), { maxLength: 40 });
    fc.assert(
      fc.property(named, named, (x, y) => {
        const first: Named[] = x.map((p, id) => ({ ...p, id })).sort(compareByName);
        const second: Named[] = y.map((p, id) => ({ ...p, id: 1000 + id })).sort(compareByName);
        const expected = [...first, ...second].sort(compareByName);
        assert.deepEqual(
          mergedByName(first, second).map((r) => r.id),
          expected.map((r) => r.id),
        );
      }),
      { numRuns: 500, seed: 5 },
    );
  });
});
