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
    readonly peerIp?: string,
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
    this.budget.release(bytes, this);
  }
}

describe('WriteBudget', () => {
  it('lets writes in up to the budget, then serves waiters first come, first served', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10, maxStreamBytes: 1000 });
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
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10, maxStreamBytes: 1000 });
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
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10, maxStreamBytes: 1000 });
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

  it('lets a waiter that fits go past one that does not, which keeps its place', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10, maxStreamBytes: 1000 });
    const log: string[] = [];
    const a = new Writer('a', budget, 60, log);
    const big = new Writer('big', budget, 80, log);
    const medium = new Writer('medium', budget, 30, log);
    const late = new Writer('late', budget, 30, log);
    assert.equal(a.tryWrite(), true);
    assert.equal(big.tryWrite(), false, '140 bytes would exceed 100');
    assert.equal(medium.tryWrite(), true, 'fits beside a: the waiting big one does not hold it back');
    assert.equal(late.tryWrite(), false, '120 bytes would exceed 100');
    medium.finish();
    assert.deepEqual(log, ['a', 'medium', 'late'], 'late fits in what medium gave back; big still does not');
    a.finish();
    late.finish();
    assert.deepEqual(log, ['a', 'medium', 'late', 'big'], 'big kept its place and went once there was room');
  });

  it('holds a stream over its own share until its own writes flush, without holding anyone else', () => {
    const budget = new WriteBudget({ maxBytes: 1000, smallBytes: 10, maxStreamBytes: 100 });
    const log: string[] = [];
    const first = new Writer('s1', budget, 80, log);
    assert.equal(first.tryWrite(), true);
    assert.equal(budget.take(80, first), false, 'a second response would put the stream at 160 bytes');
    const other = new Writer('other', budget, 80, log);
    assert.equal(other.tryWrite(), true, 'another stream is not held back');
    other.finish();
    assert.equal(log.length, 2, 'another stream flushing does not resume the stream over its share');
    first.finish();
    assert.deepEqual(log, ['s1', 'other', 's1'], 'its own flush resumes it');
  });

  it('lets a single response larger than a stream share go alone on its stream', () => {
    const budget = new WriteBudget({ maxBytes: 1000, smallBytes: 10, maxStreamBytes: 100 });
    const log: string[] = [];
    const huge = new Writer('huge', budget, 300, log);
    assert.equal(huge.tryWrite(), true);
    assert.equal(budget.heldBy(huge), 300);
  });

  it('stops counting a parked stream globally, so others fit, while its share stays taken', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10, maxStreamBytes: 100 });
    const log: string[] = [];
    const stalled = new Writer('stalled', budget, 90, log);
    const healthy = new Writer('healthy', budget, 90, log);
    assert.equal(stalled.tryWrite(), true);
    assert.equal(healthy.tryWrite(), false);
    budget.park(stalled);
    assert.deepEqual(log, ['stalled', 'healthy'], 'parking gave the room to the waiting stream');
    assert.equal(budget.bytesInFlight, 90);
    assert.equal(budget.parkedBytes, 90);
    assert.equal(budget.take(90, stalled), false, 'the parked stream is still over its share');
    budget.forget(stalled);
    assert.equal(budget.parkedBytes, 0, 'a closed stream gives its parked bytes back');
    assert.equal(budget.bytesInFlight, 90, "and only those: the healthy stream's bytes stay counted");
    healthy.finish();
    assert.equal(budget.bytesInFlight, 0);
    assert.equal(budget.waiting, 0, 'the closed stream no longer waits');
  });

  it('gives room first to streams a write of which flushed, so clients that never read queue behind them', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10, maxStreamBytes: 100 });
    const log: string[] = [];
    const reader = new Writer('reader', budget, 50, log);
    assert.equal(reader.tryWrite(), true);
    reader.finish();
    // Two new streams that never read fill the budget; more of them, then the reader, wait.
    const stuck = Array.from({ length: 6 }, (_, i) => new Writer(`stuck-${i}`, budget, 50, log));
    for (const s of stuck) s.tryWrite();
    assert.equal(reader.tryWrite(), false);
    assert.deepEqual(log, ['reader', 'stuck-0', 'stuck-1']);
    // The first two are parked (their peers stopped reading): the reader goes before the others.
    budget.park(stuck[0] as Writer);
    assert.deepEqual(log.slice(3), ['reader'], 'the reading stream had the first room');
    budget.park(stuck[1] as Writer);
    assert.deepEqual(log.slice(4), ['stuck-2']);
  });

  it('takes turns between peer addresses among streams never seen reading, so one address opening many waits for itself', () => {
    const budget = new WriteBudget({ maxBytes: 100, smallBytes: 10, maxStreamBytes: 100 });
    const log: string[] = [];
    // One address opens six streams that never read: two fill the budget, four wait.
    const stuck = Array.from({ length: 6 }, (_, i) => new Writer(`stuck-${i}`, budget, 50, log, '10.0.0.9'));
    for (const s of stuck) s.tryWrite();
    // A new istiod elsewhere, and a second one behind the same address as the stuck streams.
    const fresh = new Writer('fresh', budget, 50, log, '10.0.0.1');
    const sibling = new Writer('sibling', budget, 50, log, '10.0.0.9');
    assert.equal(fresh.tryWrite(), false);
    assert.equal(sibling.tryWrite(), false);
    assert.deepEqual(log, ['stuck-0', 'stuck-1']);
    // The first room goes to the new istiod, ahead of the four older streams of the busy address;
    // once that address holds nothing (both parked), one of its streams goes.
    budget.park(stuck[0] as Writer);
    assert.deepEqual(log.slice(2), ['fresh']);
    budget.park(stuck[1] as Writer);
    assert.deepEqual(log.slice(3), ['stuck-2']);
    // A round later (parked again), the busy address's next stream; its others keep their order.
    budget.park(stuck[2] as Writer);
    assert.deepEqual(log.slice(4), ['stuck-3']);
    fresh.finish();
    assert.deepEqual(log.slice(5), ['stuck-4'], 'the room a reader gives back goes to the line in order');
    budget.park(stuck[3] as Writer);
    budget.park(stuck[4] as Writer);
    assert.deepEqual(log.slice(6), ['stuck-5', 'sibling']);
  });

  it('lets a new istiod behind a busy address go once a stalling address holds its parked bytes', () => {
    const budget = new WriteBudget({ maxBytes: 50, smallBytes: 5, maxStreamBytes: 100 });
    const log: string[] = [];
    // Two istiods behind one address (a NAT) read, and each has a response in flight again.
    const [a1, a2] = ['a1', 'a2'].map((n) => new Writer(n, budget, 20, log, '10.0.0.1')) as [Writer, Writer];
    for (const w of [a1, a2]) {
      w.tryWrite();
      w.finish();
      w.tryWrite();
    }
    // A third istiod behind it arrives, then a tool elsewhere opens streams that never read.
    const a3 = new Writer('a3', budget, 20, log, '10.0.0.1');
    assert.equal(a3.tryWrite(), false);
    const tool = Array.from({ length: 4 }, (_, i) => new Writer(`t${i}`, budget, 20, log, '10.0.0.9'));
    for (const t of tool) assert.equal(t.tryWrite(), false);
    // Room from a1: the tool's idle address goes first (a new istiod elsewhere, as far as anyone knows).
    a1.finish();
    assert.deepEqual(log.slice(4), ['t0']);
    // t0 parked: its address still has bytes in flight, so a3, first in line, goes, not t1.
    budget.park(tool[0] as Writer);
    assert.deepEqual(log.slice(5), ['a3']);
  });
});
