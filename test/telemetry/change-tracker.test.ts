import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot, KindSnapshot } from '../../src/merge/config-snapshot.js';
import { ChangeTracker } from '../../src/telemetry/change-tracker.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';
const TYPE_URL: Record<string, string> = {
  'networking.istio.io/v1/VirtualService': VS,
  'networking.istio.io/v1/DestinationRule': DR,
};
const VS_URL = 'networking.istio.io/v1/VirtualService';
const DR_URL = 'networking.istio.io/v1/DestinationRule';

/** A snapshot with the given kind versions; nothing else matters to the tracker. */
function snapshot(generation: number, versions: Record<string, string>): ConfigSnapshot {
  const kinds = new Map<string, KindSnapshot>(
    Object.entries(versions).map(([kind, version]) => [
      kind,
      { kind, version, generation, resources: [fakeResource(version, { kind })] },
    ]),
  );
  return {
    generation,
    version: `g${generation}`,
    kinds,
    ready: true,
    budgetPassed: false,
    readyFor: () => true,
    waitingFor: [],
    sources: [],
    conflicts: [],
  };
}

function event(kinds?: string[], revision = 'r1'): SourceSnapshotEvent {
  return {
    type: 'snapshot',
    ...(kinds === undefined ? {} : { kinds: new Set(kinds) }),
    resources: [fakeResource('a')],
    revision,
    errors: [],
    warnings: [],
  };
}

function tracker() {
  const clock = { now: 0 };
  const t = new ChangeTracker({ kindOf: (u) => TYPE_URL[u], now: () => clock.now });
  return { t, clock };
}

describe('ChangeTracker', () => {
  it('completes a change at the ACK of the version that carries it, timed from its arrival', () => {
    const { t, clock } = tracker();
    t.build(snapshot(1, { [VS]: 'v1' }));
    const client = { streamId: 1 };
    t.connect(client);
    clock.now = 100;
    const change = t.arrive('git', event([VS]));
    clock.now = 105;
    const { merged } = t.build(snapshot(2, { [VS]: 'v2' }));
    assert.deepEqual([...(merged[0]?.kinds ?? [])], [VS]);
    clock.now = 110;
    const push = t.push(client, VS_URL, 'v2');
    assert.deepEqual(
      push.changes.map((c) => c.change),
      [change],
    );
    assert.equal(push.sinceBuildMs, 5);
    clock.now = 130;
    assert.deepEqual(
      t.ack(client, VS_URL, 'other-version').changes,
      [],
      'a different version completes nothing',
    );
    const outcome = t.ack(client, VS_URL, 'v2');
    assert.equal(outcome.changes[0]?.change, change);
    assert.equal(outcome.now - change.arrivedAt, 30);
    assert.deepEqual(t.ack(client, VS_URL, 'v2').changes, [], 'a change completes once per client');
  });

  it('carries only the changes since the last ACKed version in a later push', () => {
    const { t } = tracker();
    t.build(snapshot(1, { [VS]: 'v1' }));
    const client = { streamId: 1 };
    t.connect(client);
    const first = t.arrive('git', event([VS]));
    t.build(snapshot(2, { [VS]: 'v2' }));
    t.push(client, VS_URL, 'v2');
    assert.deepEqual(
      t.ack(client, VS_URL, 'v2').changes.map((c) => c.change),
      [first],
    );
    const second = t.arrive('git', event([VS], 'r2'));
    t.build(snapshot(3, { [VS]: 'v3' }));
    assert.deepEqual(
      t.push(client, VS_URL, 'v3').changes.map((c) => c.change),
      [second],
    );
  });

  it('credits no change to a client that connected after it was served', () => {
    const { t } = tracker();
    t.arrive('git', event([VS]));
    t.build(snapshot(1, { [VS]: 'v1' }));
    const late = { streamId: 7 };
    t.connect(late);
    const push = t.push(late, VS_URL, 'v1');
    assert.deepEqual(push.changes, []);
    assert.equal(push.sinceBuildMs, undefined, 'the first push is no push delay either');
  });

  it('attributes only the kinds whose served version changed, and drops changes that altered nothing', () => {
    const { t } = tracker();
    t.build(snapshot(1, { [VS]: 'v1', [DR]: 'd1' }));
    const everything = t.arrive('file', event());
    const drOnly = t.arrive('git', event([DR]));
    const { merged, changedKinds } = t.build(snapshot(2, { [VS]: 'v2', [DR]: 'd1' }));
    assert.deepEqual([...changedKinds], [VS]);
    assert.deepEqual(
      merged.map((m) => [m.change, [...m.kinds]]),
      [
        [everything, [VS]],
        [drOnly, []],
      ],
    );
    const noop = t.arrive('git', event([DR], 'r2'));
    assert.deepEqual(t.unchanged(), [noop]);
    assert.deepEqual(t.build(snapshot(3, { [VS]: 'v2', [DR]: 'd2' })).merged, [], 'nothing left waiting');
  });

  it('keeps a NACKed change pending and completes it with the next accepted version', () => {
    const { t } = tracker();
    t.build(snapshot(1, { [VS]: 'v1' }));
    const client = { streamId: 1 };
    t.connect(client);
    const first = t.arrive('git', event([VS]));
    t.build(snapshot(2, { [VS]: 'v2' }));
    t.push(client, VS_URL, 'v2');
    assert.equal(t.nack(client, VS_URL)[0]?.change, first);
    const second = t.arrive('git', event([VS], 'r2'));
    t.build(snapshot(3, { [VS]: 'v3' }));
    t.push(client, VS_URL, 'v3');
    assert.deepEqual(
      t.ack(client, VS_URL, 'v3').changes.map((c) => c.change),
      [first, second],
    );
  });

  it('credits each client separately and forgets a client that disconnects', () => {
    const { t } = tracker();
    t.build(snapshot(1, { [VS]: 'v1', [DR]: 'd1' }));
    const a = { streamId: 1 };
    const b = { streamId: 2 };
    t.connect(a);
    t.connect(b);
    const change = t.arrive('git', event());
    t.build(snapshot(2, { [VS]: 'v2', [DR]: 'd2' }));
    t.push(a, VS_URL, 'v2');
    t.push(a, DR_URL, 'd2');
    t.push(b, VS_URL, 'v2');
    assert.deepEqual(
      t.ack(a, DR_URL, 'd2').changes.map((c) => [c.change, c.kind]),
      [[change, DR]],
    );
    assert.equal(t.ack(b, VS_URL, 'v2').changes.length, 1);
    assert.equal(t.disconnect(a).length, 1, 'the VirtualService push of a was still unanswered');
    assert.deepEqual(t.ack(a, VS_URL, 'v2').changes, []);
  });

  it('credits a push exactly the changes built after what its client ACKed, among many', () => {
    const { t } = tracker();
    t.build(snapshot(1, { [VS]: 'v1' }));
    const early = { streamId: 1 };
    const late = { streamId: 2 };
    t.connect(early);
    t.connect(late);
    // 200 builds, each of two changes (a generation shared by two entries), then 40 of one.
    const changes: Array<ReturnType<ChangeTracker['arrive']>> = [];
    for (let g = 2; g <= 241; g++) {
      changes.push(t.arrive('git', event([VS], `a${g}`)));
      if (g <= 201) changes.push(t.arrive('zk', event([VS], `b${g}`)));
      t.build(snapshot(g, { [VS]: `v${g}` }));
      if (g === 101) {
        t.push(late, VS_URL, 'v101');
        t.ack(late, VS_URL, 'v101');
      }
    }
    // The tracker keeps the last 256 entries: generations 94 to 241.
    const carried = (client: { streamId: number }, version: string) =>
      t.push(client, VS_URL, version).changes.map((c) => c.change);
    assert.deepEqual(carried(early, 'v241'), changes.slice(-256));
    t.ack(early, VS_URL, 'v241');
    // Only what was built after generation 101: from generation 102's two changes on.
    assert.deepEqual(carried(late, 'v241'), changes.slice(2 * (102 - 2)));
    t.ack(late, VS_URL, 'v241');
    const next = t.arrive('git', event([VS], 'c'));
    t.build(snapshot(242, { [VS]: 'v242' }));
    assert.deepEqual(carried(early, 'v242'), [next]);
    assert.deepEqual(carried(late, 'v242'), [next]);
  });

  it('forgets changes past their age limit', () => {
    const clock = { now: 0 };
    const t = new ChangeTracker({ kindOf: (u) => TYPE_URL[u], now: () => clock.now, maxAgeMs: 1000 });
    t.build(snapshot(1, { [VS]: 'v1' }));
    const client = { streamId: 1 };
    t.connect(client);
    t.arrive('git', event([VS]));
    t.build(snapshot(2, { [VS]: 'v2' }));
    clock.now = 5000;
    t.arrive('git', event([VS], 'r2'));
    t.build(snapshot(3, { [VS]: 'v3' }));
    assert.equal(t.push(client, VS_URL, 'v3').changes.length, 1, 'only the recent change is remembered');
  });
});
