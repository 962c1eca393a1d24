import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SemanticGroups } from '../../src/merge/semantic-groups.js';

describe('semantic groups', () => {
  it('answers as a map of sets would, whatever keys claim and give up', () => {
    const key = fc.constantFrom('a', 'b', 'c', 'd');
    const group = fc.constantFrom('host|x', 'host|y', 'host|z');
    const step = fc.record({ key, now: fc.uniqueArray(group, { maxLength: 3 }) });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const index = new SemanticGroups();
        const model = new Map<string, readonly string[]>();
        for (const { key: k, now: claimed } of steps) {
          const now: readonly string[] = claimed;
          // What the key claims is the caller's to say, as the kind table keeps it with its holder.
          const before = model.get(k) ?? [];
          const reported: [string, number, boolean][] = [];
          index.move(k, before, now, (g, size, claims) => reported.push([g, size, claims]));
          model.set(k, now);
          const sizeOf = (g: string): number => [...model.values()].filter((gs) => gs.includes(g)).length;
          // Each group left or claimed once, with its size after the move.
          const expected: [string, number, boolean][] = [
            ...before
              .filter((g) => !now.includes(g))
              .map((g): [string, number, boolean] => [g, sizeOf(g), false]),
            ...now.map((g): [string, number, boolean] => [g, sizeOf(g), true]),
          ];
          assert.deepEqual(reported, expected);
        }
        for (const g of ['host|x', 'host|y', 'host|z', 'host|none']) {
          const expected = [...model]
            .filter(([, gs]) => gs.includes(g))
            .map(([k]) => k)
            .sort();
          assert.deepEqual([...index.membersOf(g)].sort(), expected, g);
          assert.equal(index.sizeOf(g), expected.length, g);
        }
      }),
      { numRuns: 300 },
    );
  });
});
