/** The search by halves sorted lists rely on, against a look at every element. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { firstAtOrAfter } from '../../src/core/first-at-or-after.js';

function scanned<T extends number | string>(sorted: readonly T[], value: T): number {
  const at = sorted.findIndex((v) => v >= value);
  return at < 0 ? sorted.length : at;
}

describe('firstAtOrAfter', () => {
  it('finds the first number at or after any value, repeats and ends included', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -20, max: 20 })),
        fc.integer({ min: -25, max: 25 }),
        (list, value) => {
          const sorted = [...list].sort((a, b) => a - b);
          assert.equal(firstAtOrAfter(sorted, value), scanned(sorted, value));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('orders strings as the built-in sort does', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary', maxLength: 4 })),
        fc.string({ unit: 'binary', maxLength: 4 }),
        (list, value) => {
          const sorted = [...list].sort();
          assert.equal(firstAtOrAfter(sorted, value), scanned(sorted, value));
        },
      ),
      { numRuns: 500 },
    );
  });
});
