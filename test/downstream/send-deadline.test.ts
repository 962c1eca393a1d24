import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VirtualTimeScheduler } from 'rxjs';
import { SendDeadline } from '../../src/downstream/send-deadline.js';

/** A deadline on virtual time, recording what it reports and when. */
function rig(stallAfterMs = 2_000, timeoutMs = 30_000) {
  const scheduler = new VirtualTimeScheduler();
  const events: string[] = [];
  const deadline = new SendDeadline({
    scheduler,
    stallAfterMs,
    timeoutMs,
    onStall: () => events.push(`stall@${scheduler.now()}`),
    onTimeout: (pendingMs) => events.push(`timeout@${scheduler.now()} after ${pendingMs}`),
  });
  /** Runs virtual time up to `at` ms. */
  const runTo = (at: number): void => {
    scheduler.maxFrames = at;
    scheduler.flush();
    scheduler.frame = at;
  };
  return { deadline, events, runTo };
}

describe('SendDeadline', () => {
  it('reports a stall, then a timeout, for a write that never flushes', () => {
    const { deadline, events, runTo } = rig();
    deadline.written();
    runTo(40_000);
    assert.deepEqual(events, ['stall@2000', 'timeout@30000 after 30000']);
  });

  it('reports nothing for a peer whose writes each flush within the limits', () => {
    const { deadline, events, runTo } = rig();
    for (let at = 0; at < 100_000; at += 1_500) {
      runTo(at);
      deadline.written();
      runTo(at + 1_000);
      deadline.flushed();
    }
    runTo(200_000);
    assert.deepEqual(events, []);
  });

  it('times the oldest unflushed write: a newer write does not move the deadline', () => {
    const { deadline, events, runTo } = rig();
    deadline.written();
    runTo(10_000);
    deadline.written();
    runTo(25_000);
    deadline.flushed();
    assert.deepEqual(events, ['stall@2000'], 'the first flushed at 25 s');
    runTo(60_000);
    assert.deepEqual(events, ['stall@2000', 'stall@25000', 'timeout@40000 after 30000']);
  });

  it('stops timing when the stream ends', () => {
    const { deadline, events, runTo } = rig();
    deadline.written();
    runTo(1_000);
    deadline.stop();
    runTo(60_000);
    assert.deepEqual(events, []);
  });
});
