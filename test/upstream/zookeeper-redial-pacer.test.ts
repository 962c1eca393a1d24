import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VirtualTimeScheduler } from 'rxjs';
import { sourceClock } from '../../src/upstream/runtime/source-clock.js';
import { RedialPacer, ZOOKEEPER_REDIAL_BACKOFF } from '../../src/upstream/zookeeper/redial-pacer.js';

/** A pacer on virtual time whose jitter draws `random`, and the times (ms) of the dials it let go. */
function pacedDials(random: () => number): {
  pacer: RedialPacer;
  dials: number[];
  /** Dials now and, as the client library does when the connection closes, asks for the next dial. */
  dial: () => void;
  runUntil: (t: number) => void;
} {
  const scheduler = new VirtualTimeScheduler();
  const pacer = new RedialPacer(sourceClock(scheduler), ZOOKEEPER_REDIAL_BACKOFF, random);
  const dials: number[] = [];
  const dial = (): void => {
    dials.push(scheduler.now());
    pacer.schedule(dial);
  };
  return {
    pacer,
    dials,
    dial,
    runUntil: (t) => {
      scheduler.maxFrames = t;
      scheduler.flush();
    },
  };
}

describe('the redial pacer of the ZooKeeper source', () => {
  it('dials a server that closes every connection 7 times in its first 10 s, then every 30 s', () => {
    const paced = pacedDials(() => 0.5);
    paced.pacer.schedule(paced.dial);
    paced.runUntil(10_000);
    assert.deepEqual(paced.dials, [0, 100, 300, 700, 1_500, 3_100, 6_300]);
    paced.runUntil(600_000);
    const late = paced.dials.filter((t) => t > 300_000);
    assert.deepEqual(
      late.slice(1).map((t, i) => t - (late[i] ?? 0)),
      late.slice(1).map(() => ZOOKEEPER_REDIAL_BACKOFF.maxMs),
      'capped at 30 s',
    );
  });

  it('never dials more than 8 times in 10 s, however the jitter falls', () => {
    const paced = pacedDials(() => 0);
    paced.pacer.schedule(paced.dial);
    paced.runUntil(10_000);
    assert.ok(paced.dials.length <= 8, `${paced.dials.length} dials: ${paced.dials.join(' ')}`);
    assert.ok(paced.dials.length >= 2);
  });

  it('dials at once again after a healthy connection, and starts the backoff over', () => {
    const { pacer, dials, runUntil } = pacedDials(() => 0.5);
    const record = (): void => void dials.push(-1);
    pacer.schedule(record);
    pacer.schedule(record);
    pacer.schedule(record);
    runUntil(1_000);
    assert.equal(dials.length, 3);
    assert.equal(pacer.attempts, 3);
    assert.equal(pacer.healthy(), 3, 'the dials it took');
    assert.equal(pacer.attempts, 0);
    let dialled = false;
    pacer.schedule(() => (dialled = true));
    assert.equal(dialled, true, 'the first dial after a healthy connection goes at once');
    assert.equal(pacer.lastDelay, 0);
    pacer.schedule(() => undefined);
    assert.equal(pacer.lastDelay, ZOOKEEPER_REDIAL_BACKOFF.initialMs, 'the backoff started over');
  });

  it('does not dial what was cancelled', () => {
    const { pacer, runUntil } = pacedDials(() => 0.5);
    pacer.schedule(() => undefined);
    let dialled = false;
    const cancel = pacer.schedule(() => (dialled = true));
    cancel();
    runUntil(60_000);
    assert.equal(dialled, false);
  });
});
