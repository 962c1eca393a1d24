import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MeshmuxError } from '../../../src/core/errors.js';
import type { SourceEvent, SourceSnapshotEvent } from '../../../src/core/source-event.js';
import { SourceStatusTracker } from '../../../src/upstream/runtime/source-status-tracker.js';
import { fakeResource } from '../../support/resources.js';

/** A tracker and the events it emitted, each written as `status:state[:error]` or `snapshot:revision`. */
function tracked(completeKinds?: ReadonlySet<string>): { tracker: SourceStatusTracker; log: string[] } {
  const log: string[] = [];
  const record = (e: SourceEvent): void => {
    if (e.type === 'status')
      log.push(`status:${e.state}${e.error === undefined ? '' : `:${e.error.message}`}`);
    else log.push(`snapshot:${e.revision}`);
  };
  return { tracker: new SourceStatusTracker(record, completeKinds), log };
}

function state(revision: string, options: { kinds?: string[]; errors?: string[] } = {}): SourceSnapshotEvent {
  return {
    type: 'snapshot',
    resources: [fakeResource(revision)],
    revision,
    ...(options.kinds === undefined ? {} : { kinds: new Set(options.kinds) }),
    errors: (options.errors ?? []).map((m) => new MeshmuxError('SCHEMA', m)),
    warnings: [],
  };
}

const unreachable = (why = 'connection refused'): MeshmuxError => new MeshmuxError('UNAVAILABLE', why);

describe('the source status tracker', () => {
  it('reports failing before the first complete state and stale after it', () => {
    const { tracker, log } = tracked();
    tracker.connecting();
    tracker.failed(unreachable());
    tracker.serve(state('r1'));
    tracker.failed(unreachable());
    assert.deepEqual(log, [
      'status:connecting',
      'status:failing:connection refused',
      'snapshot:r1',
      'status:stale:connection refused',
    ]);
    assert.equal(tracker.state, 'stale');
  });

  it('emits a status only when its state or error changes', () => {
    const { tracker, log } = tracked();
    tracker.connecting();
    tracker.connecting();
    tracker.failed(unreachable());
    tracker.failed(unreachable());
    tracker.failed(unreachable('timed out'));
    tracker.report(unreachable('timed out'));
    assert.deepEqual(log, [
      'status:connecting',
      'status:failing:connection refused',
      'status:failing:timed out',
    ]);
  });

  it('serves a state once, and again when its revision or its problems change', () => {
    const { tracker, log } = tracked();
    assert.equal(tracker.serve(state('r1')), true);
    assert.equal(tracker.serve(state('r1')), false);
    assert.equal(tracker.serve(state('r1', { errors: ['bad document'] })), true);
    assert.equal(tracker.serve(state('r2', { errors: ['bad document'] })), true);
    assert.deepEqual(log, ['snapshot:r1', 'snapshot:r1', 'snapshot:r2']);
    assert.equal(tracker.state, 'synced');
  });

  it('announces synced when the state it serves again has not changed since a failure', () => {
    const { tracker, log } = tracked();
    tracker.serve(state('r1'));
    tracker.failed(unreachable());
    tracker.serve(state('r1'));
    tracker.serve(state('r1'));
    assert.deepEqual(log, ['snapshot:r1', 'status:stale:connection refused', 'status:synced']);
  });

  it('takes a state of some kinds as complete only when it names every kind the source has', () => {
    const { tracker, log } = tracked(new Set(['a', 'b']));
    tracker.serve(state('r1', { kinds: ['a'] }));
    tracker.failed(unreachable());
    tracker.serve(state('r2', { kinds: ['a', 'b'] }));
    tracker.failed(unreachable());
    assert.deepEqual(log, [
      'snapshot:r1',
      'status:failing:connection refused',
      'snapshot:r2',
      'status:stale:connection refused',
    ]);
  });

  it('forwards every state it is handed as is, and counts as synced only once told', () => {
    const { tracker, log } = tracked();
    tracker.forward(state('v1', { kinds: ['a'] }));
    tracker.forward(state('v1', { kinds: ['a'] }));
    tracker.failed(unreachable());
    tracker.synced();
    tracker.failed(unreachable());
    assert.deepEqual(log, [
      'snapshot:v1',
      'snapshot:v1',
      'status:failing:connection refused',
      'status:synced',
      'status:stale:connection refused',
    ]);
  });

  it('never emits restored, which only the merge knows about', () => {
    const { tracker, log } = tracked();
    tracker.connecting();
    tracker.serve(state('r1'));
    tracker.failed(unreachable());
    tracker.synced();
    assert.ok(
      log.every((line) => !line.includes('restored')),
      log.join(' '),
    );
  });
});
