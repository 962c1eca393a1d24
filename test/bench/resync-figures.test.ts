import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resyncFigures, type MeasuredResync } from '../../bench/phases.js';

/** A resync of `gross` ms of the server's CPU over `ms` ms of waiting, with `reads` counters read. */
const resync = (gross: number, ms = 1000, reads = 4): MeasuredResync => ({
  ms,
  reads,
  gross,
  bytes: 0,
  pushes: 0,
});

const idle = (cpuMsPerSecond: number, cpuMsPerRead: number) => ({ cpuMsPerSecond, cpuMsPerRead });

describe('the identical resyncs’ figures', () => {
  it('keep the first apart and report the median of the ones after it', () => {
    const f = resyncFigures(
      [resync(200), resync(90), resync(40), resync(50), resync(60)],
      idle(0, 0),
      idle(0, 0),
    );
    assert.equal(f.first.net, 200);
    assert.deepEqual(
      f.later.map((r) => r.net),
      [90, 40, 50, 60],
    );
    // With the first among them, the median would be 60.
    assert.equal(f.netMs, 50);
    assert.equal(f.grossMs, 50);
  });

  it('take off what the idle server costs over as long, from the quieter of the two measurements', () => {
    // Before the resyncs the window caught other work (20 ms/s, 5 ms a read); after them it read 8 and 1.
    const f = resyncFigures([resync(100, 2000, 4), resync(60, 1500, 3)], idle(20, 5), idle(8, 1));
    assert.deepEqual(f.idle, idle(8, 1));
    // 100 − 8 × 2 − 1 × 5 and 60 − 8 × 1.5 − 1 × 4.
    assert.equal(f.first.net, 79);
    assert.equal(f.netMs, 44);
    assert.equal(f.grossMs, 60);
    // The other way round, the same.
    assert.deepEqual(resyncFigures([resync(100), resync(60)], idle(8, 5), idle(20, 1)).idle, idle(8, 1));
  });

  it('never count less than nothing, and need a resync after the first', () => {
    const f = resyncFigures([resync(5), resync(3)], idle(10, 1), idle(10, 1));
    assert.equal(f.first.net, 0);
    assert.equal(f.netMs, 0);
    assert.throws(() => resyncFigures([resync(50)], idle(0, 0), idle(0, 0)), /at least one after it/);
  });
});
