/** Keys in code-unit order, as the built-in sort gives them: what versions and encodings rely on. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { sortedKeys } from '../../src/core/sorted-keys.js';

describe('sortedKeys', () => {
  it('orders any keys as Array.prototype.sort orders strings, the map untouched', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), fc.string(), { maxKeys: 12 }),
        (map) => {
          const before = Object.keys(map);
          assert.deepEqual(sortedKeys(map), Object.keys(map).sort());
          assert.deepEqual(Object.keys(map), before);
        },
      ),
      { numRuns: 500 },
    );
  });
});
