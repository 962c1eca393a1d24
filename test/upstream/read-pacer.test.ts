import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VirtualTimeScheduler } from 'rxjs';
import { sourceClock, type SourceClock } from '../../src/upstream/runtime/source-clock.js';
import { DEFAULT_READ_PACING, ReadPacer, type ReadPacing } from '../../src/upstream/streaming/read-pacer.js';

/**
 * An upstream read through a pacer on virtual time: each read takes `cost(i)` ms of the main
 * thread (virtual time moves on inside it), and the next one comes `gapMs` later, or once the
 * pacer lets it. Returns when each read started, up to `untilMs`.
 */
function readPaced(
  pacing: ReadPacing,
  cost: (i: number) => number,
  untilMs: number,
  gapMs = 0,
): { starts: number[] } {
  const scheduler = new VirtualTimeScheduler();
  const pacer = new ReadPacer(sourceClock(scheduler), pacing);
  const starts: number[] = [];
  const read = (): void => {
    const i = starts.length;
    starts.push(scheduler.now());
    pacer.run(() => {
      scheduler.frame += cost(i);
    });
    if (pacer.hold(read) === undefined) scheduler.schedule(read, gapMs);
  };
  scheduler.schedule(read, 0);
  scheduler.maxFrames = untilMs;
  scheduler.flush();
  return { starts };
}

/** A clock whose time the test sets, and the waits asked of it. */
function handClock(): { clock: SourceClock; set: (t: number) => void; waits: number[] } {
  let now = 0;
  const waits: number[] = [];
  return {
    clock: {
      now: () => now,
      after: (ms) => {
        waits.push(ms);
        return () => undefined;
      },
    },
    set: (t) => (now = t),
    waits,
  };
}

describe('ReadPacer: the share of the main thread one upstream may take', () => {
  it('reads back to back until its burst of a second is spent, then waits as long as each response took', () => {
    const { starts } = readPaced(DEFAULT_READ_PACING, () => 400, 4_000);
    // 1,000 ms saved up, each 400 ms read costing 200 ms of it (it earns half of the time it
    // takes): five reads go back to back, then each waits 400 ms, the time it took.
    assert.deepEqual(starts, [0, 400, 800, 1_200, 1_600, 2_000, 2_800, 3_600]);
  });

  it('takes half the main thread over time, whatever its responses cost', () => {
    const costs = [730, 90, 1_400, 260, 15, 600];
    const cost = (i: number): number => costs[i % costs.length] ?? 0;
    const { starts } = readPaced(DEFAULT_READ_PACING, cost, 120_000);
    // Up to the last read's start: every read before it and the wait after it.
    const span = starts.at(-1) ?? 0;
    let busyMs = 0;
    for (let i = 0; i < starts.length - 1; i++) busyMs += cost(i);
    assert.ok(busyMs / span <= 0.5 + DEFAULT_READ_PACING.burstMs / span, `${busyMs} ms busy in ${span} ms`);
    assert.ok(busyMs / span >= 0.45, `${busyMs} ms busy in ${span} ms`);
  });

  it('waits three times as long as it read with a share of a quarter', () => {
    const { starts } = readPaced({ share: 0.25, burstMs: 0, maxWaitMs: 10_000 }, () => 100, 1_200);
    assert.deepEqual(starts, [0, 400, 800, 1_200]);
  });

  it('never waits while it takes less than its share, nor after one large response within its burst', () => {
    const small = readPaced(DEFAULT_READ_PACING, () => 10, 60_000, 100);
    assert.deepEqual(
      small.starts.slice(1).map((t, i) => t - (small.starts[i] ?? 0)),
      small.starts.slice(1).map(() => 110),
      'every read 100 ms after the one before ended',
    );
    const { clock, set, waits } = handClock();
    const pacer = new ReadPacer(clock);
    set(10_000);
    pacer.run(() => set(10_900));
    assert.equal(pacer.waitMs(), 0);
    assert.equal(
      pacer.hold(() => undefined),
      undefined,
    );
    assert.deepEqual(waits, []);
  });

  it('waits at most maxWaitMs after a read, however long it took, and owes nothing after', () => {
    const { clock, set, waits } = handClock();
    const pacer = new ReadPacer(clock, { share: 0.5, burstMs: 0, maxWaitMs: 2_000 });
    pacer.run(() => set(30_000));
    assert.equal(pacer.waitMs(), 2_000);
    assert.notEqual(
      pacer.hold(() => undefined),
      undefined,
    );
    assert.deepEqual(waits, [2_000]);
    set(32_000);
    assert.equal(pacer.waitMs(), 0, 'the wait paid what it owed');
  });

  it('charges nothing for a read during which the clock was stepped back', () => {
    const { clock, set } = handClock();
    set(50_000);
    const pacer = new ReadPacer(clock, { share: 0.5, burstMs: 0, maxWaitMs: 2_000 });
    pacer.run(() => set(20_000));
    assert.equal(pacer.waitMs(), 0);
    pacer.run(() => set(20_300));
    assert.equal(pacer.waitMs(), 300, 'time counts again from where the clock stands');
  });

  it('takes no wait shorter than 5 ms: the debt stays and the next read adds to it', () => {
    const { clock, set } = handClock();
    const pacer = new ReadPacer(clock, { share: 0.5, burstMs: 0, maxWaitMs: 2_000 });
    pacer.run(() => set(4));
    assert.equal(pacer.waitMs(), 0, 'owes 2 ms: a wait of 4 ms');
    pacer.run(() => set(8));
    assert.equal(pacer.waitMs(), 8);
  });

  it('never waits with a share of the whole main thread', () => {
    const { starts } = readPaced({ share: 1, burstMs: 0, maxWaitMs: 2_000 }, () => 500, 5_000);
    assert.deepEqual(
      starts,
      Array.from({ length: 11 }, (_, i) => i * 500),
    );
  });
});
