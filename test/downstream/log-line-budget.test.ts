import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogLineBudget } from '../../src/downstream/log-line-budget.js';

describe('log line budget', () => {
  it('lets a window take its lines, counts the rest, and names them in the first line after', () => {
    let now = 0;
    const budget = new LogLineBudget(() => now, 3, 1_000);
    const seen = Array.from({ length: 5 }, () => budget.allow());
    assert.deepEqual(
      seen.map((a) => a.log),
      [true, true, true, false, false],
    );
    now = 999;
    assert.equal(budget.allow().log, false);
    now = 1_000;
    assert.deepEqual(budget.allow(), { log: true, leftOut: 3 });
    assert.deepEqual(budget.allow(), { log: true, leftOut: 0 });
  });
});
