import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LogLineBudget } from '../../src/core/log-line-budget.js';

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

  it('with a report, counts the lines a window left out in a line of their own once it ends', () => {
    let now = 0;
    const due: Array<{ at: number; work: () => void }> = [];
    const reported: number[] = [];
    const budget = new LogLineBudget(() => now, 2, 1_000, {
      schedule: (work, delayMs) => due.push({ at: now + delayMs, work }),
      log: (leftOut) => reported.push(leftOut),
    });
    now = 100;
    const seen = Array.from({ length: 6 }, () => budget.allow().log);
    assert.deepEqual(seen, [true, true, false, false, false, false]);
    assert.deepEqual(
      due.map((d) => d.at),
      [1_100],
      'one report, when the window ends',
    );
    now = 1_100;
    due.shift()?.work();
    assert.deepEqual(reported, [4]);
    assert.deepEqual(budget.allow(), { log: true, leftOut: 0 }, 'counted once');
    // A line logged before the report comes due names them itself, and the report says nothing.
    budget.allow();
    budget.allow();
    now = 2_100;
    assert.deepEqual(budget.allow(), { log: true, leftOut: 1 });
    due.shift()?.work();
    assert.deepEqual(reported, [4]);
  });
});
