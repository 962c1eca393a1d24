import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WriteBudget, type BudgetWaiter } from '../../src/downstream/write-budget.js';

/** A stream that wants to write `bytes` and records when it got them. */
class Writer implements BudgetWaiter {
  holding = 0;
  constructor(
    readonly name: string,
    private readonly budget: WriteBudget,
    private readonly bytes: number,
    private readonly log: string[],
  ) {}
  tryWrite(): boolean {
    if (!this.budget.take(this.bytes, this)) return false;
    this.holding += this.bytes;
    this.log.push(this.name);
    return true;
  }
  resume(): void {
    this.tryWrite();
  }
  finish(): void {
    const bytes = this.holding;
    this.holding = 0;
    this.budget.release(bytes);
  }
}

describe('WriteBudget', () => {
  it('lets writes in up to the budget, then serves waiters first come, first served', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10 });
    const log: string[] = [];
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => new Writer(n, budget, 40, log)) as [
      Writer,
      Writer,
      Writer,
      Writer,
    ];
    assert.equal(a.tryWrite(), true);
    assert.equal(b.tryWrite(), true);
    assert.equal(c.tryWrite(), false, '120 bytes would exceed 100');
    assert.equal(d.tryWrite(), false, 'queued behind c');
    assert.equal(budget.waiting, 2);
    assert.equal(budget.bytesInFlight, 80);
    a.finish();
    assert.deepEqual(log, ['a', 'b', 'c'], 'c first; d does not fit yet');
    b.finish();
    assert.deepEqual(log, ['a', 'b', 'c', 'd']);
    assert.equal(budget.waiting, 0);
    assert.equal(budget.peakBytes, 80);
  });

  it('never holds back small responses, and lets one oversized response go alone', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10 });
    const log: string[] = [];
    const big = new Writer('big', budget, 500, log);
    const small = new Writer('small', budget, 8, log);
    const next = new Writer('next', budget, 50, log);
    assert.equal(big.tryWrite(), true, 'alone, even over the budget');
    assert.equal(next.tryWrite(), false);
    assert.equal(small.tryWrite(), true, 'small writes skip the queue');
    big.finish();
    assert.deepEqual(log, ['big', 'small', 'next']);
  });

  it('forgets a cancelled waiter and moves on to the next', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10 });
    const log: string[] = [];
    const a = new Writer('a', budget, 90, log);
    const b = new Writer('b', budget, 90, log);
    const c = new Writer('c', budget, 90, log);
    a.tryWrite();
    b.tryWrite();
    c.tryWrite();
    budget.cancel(b);
    a.finish();
    assert.deepEqual(log, ['a', 'c']);
  });
});
