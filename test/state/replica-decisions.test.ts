/**
 * Decisions made on another replica, applied here: a confirmation names the held update by its
 * digest and is applied only to that update, also when the update is held here a little later.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import {
  CONFIRMATION_WINDOW_MS,
  ReplicaDecisions,
  type HeldUpdates,
} from '../../src/state/replica-decisions.js';

const log = pino({ level: 'silent' });

/** Held updates by source, with what was applied. */
function merge(held: Record<string, string>): HeldUpdates & { applied: string[] } {
  const applied: string[] = [];
  return {
    applied,
    confirmHeld(source, digest) {
      const h = held[source];
      if (h === undefined) return 'none';
      if (h !== digest) return 'differs';
      applied.push(source);
      delete held[source];
      return 'applied';
    },
  };
}

const confirm = (source: string, digest: string, atMs: number) =>
  ({ kind: 'confirm', source, digest, replica: 'other', atMs }) as const;

describe('ReplicaDecisions', () => {
  it('applies a confirmation to the update held here when the digests agree', () => {
    const held = merge({ shop: 'd1' });
    const decisions = new ReplicaDecisions(
      held,
      () => undefined,
      log,
      () => 1_000,
    );
    decisions.onSignal(confirm('shop', 'd1', 1_000));
    assert.deepEqual(held.applied, ['shop']);
    assert.deepEqual(decisions.report(), []);
  });

  it('leaves a different held update held and reports it', () => {
    const held = merge({ shop: 'mine' });
    const decisions = new ReplicaDecisions(
      held,
      () => undefined,
      log,
      () => 1_000,
    );
    decisions.onSignal(confirm('shop', 'theirs', 1_000));
    assert.deepEqual(held.applied, []);
    assert.deepEqual(
      decisions.report().map((c) => [c.source, c.digest, c.state]),
      [['shop', 'theirs', 'differs']],
    );
  });

  it('applies a confirmation that arrived first once the same update is held, within the window only', () => {
    let now = 1_000;
    const state: Record<string, string> = {};
    const held = merge(state);
    const decisions = new ReplicaDecisions(
      held,
      () => undefined,
      log,
      () => now,
    );
    decisions.onSignal(confirm('shop', 'd1', now));
    decisions.onSignal(confirm('late', 'd2', now));
    assert.deepEqual(
      decisions.report().map((c) => c.state),
      ['waiting', 'waiting'],
    );
    now += 10_000;
    state['shop'] = 'd1';
    decisions.retry();
    assert.deepEqual(held.applied, ['shop']);
    now += CONFIRMATION_WINDOW_MS;
    state['late'] = 'd2';
    decisions.retry();
    assert.deepEqual(held.applied, ['shop'], 'a confirmation past its window applies to nothing');
    assert.deepEqual(decisions.report(), []);
  });

  it('fetches a source when another replica received a push notification for it', () => {
    const refreshed: string[] = [];
    const decisions = new ReplicaDecisions(merge({}), (s) => refreshed.push(s), log);
    decisions.onSignal({ kind: 'refresh', source: 'config', replica: 'other', atMs: 0 });
    assert.deepEqual(refreshed, ['config']);
  });
});
