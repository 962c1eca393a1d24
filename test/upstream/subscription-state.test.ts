import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { rootLogger } from '../../src/core/logger.js';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent, SourceSnapshotEvent } from '../../src/core/source-event.js';
import { KINDS } from '../../src/schema/kinds.js';
import { ExponentialBackoff } from '../../src/upstream/exponential-backoff.js';
import { SubscriptionState, type ChannelUpdate } from '../../src/upstream/subscription-state.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const SE = 'networking.istio.io/ServiceEntry';
const VS_V1 = 'networking.istio.io/v1/VirtualService';
const VS_OLD = 'networking.istio.io/v1alpha3/VirtualService';
const SE_V1 = 'networking.istio.io/v1/ServiceEntry';

function kind(key: string) {
  const k = KINDS.get(key);
  assert.ok(k);
  return k;
}

function setup(): { state: SubscriptionState; events: SourceEvent[] } {
  const events: SourceEvent[] = [];
  const state = new SubscriptionState({
    source: 'test',
    channels: [
      { id: VS_V1, kind: kind(VS) },
      { id: VS_OLD, kind: kind(VS) },
      { id: SE_V1, kind: kind(SE) },
    ],
    emit: (e) => events.push(e),
    log: rootLogger.child({ test: true }),
    syncTimeoutMs: 60_000,
  });
  state.start();
  return { state, events };
}

function update(
  resources: readonly ConfigResource[],
  rejected: Record<string, string> = {},
  version = 'v',
): ChannelUpdate {
  return {
    resources: new Map(resources.map((r) => [`${r.namespace}/${r.name}`, r])),
    rejected: new Map(Object.entries(rejected).map(([k, m]) => [k, new MeshmuxError('DECODE', m)])),
    unnamed: [],
    warnings: [],
    version,
  };
}

const vs = (name: string, body = name): ConfigResource => fakeResource(name, { kind: VS, body });
const se = (name: string): ConfigResource => fakeResource(name, { kind: SE });

function snapshots(events: readonly SourceEvent[]): SourceSnapshotEvent[] {
  return events.filter((e): e is SourceSnapshotEvent => e.type === 'snapshot');
}

function served(events: readonly SourceEvent[], k: string): string[] {
  let names: string[] = [];
  for (const s of snapshots(events)) {
    if (s.kinds?.has(k) ?? true)
      names = s.resources.filter((r) => r.kind === k).map((r) => `${r.name}:${r.version}`);
  }
  return names;
}

describe('subscription state', () => {
  it('serves nothing until every channel answered on the stream, then one snapshot covering every kind', () => {
    const { state, events } = setup();
    state.streamOpened();
    state.apply(VS_V1, update([vs('a')]));
    state.apply(SE_V1, update([se('s')]));
    assert.equal(snapshots(events).length, 0);
    state.apply(VS_OLD, update([]));
    const all = snapshots(events);
    assert.equal(all.length, 1);
    assert.deepEqual([...(all[0]?.kinds ?? [])].sort(), [SE, VS]);
    assert.deepEqual(
      all[0]?.resources.map((r) => r.name),
      ['a', 's'],
    );
    assert.deepEqual(
      events.filter((e) => e.type === 'status').map((e) => (e.type === 'status' ? e.state : '')),
      ['connecting', 'synced'],
    );
    state.stop();
  });

  it('never deletes what one spelling holds because the other spelling answers empty', () => {
    const { state, events } = setup();
    state.streamOpened();
    state.apply(VS_V1, update([vs('a')]));
    state.apply(VS_OLD, update([]));
    state.apply(SE_V1, update([]));
    state.apply(VS_OLD, update([]));
    state.apply(VS_OLD, update([]));
    assert.deepEqual(served(events, VS), [`a:${vs('a').version}`]);
    state.apply(VS_V1, update([]));
    assert.deepEqual(served(events, VS), [], 'empty once every spelling is empty');
    state.stop();
  });

  it('keeps serving the spelling it served while both hold objects, and moves when that one empties', () => {
    const { state, events } = setup();
    state.streamOpened();
    state.apply(VS_V1, update([]));
    state.apply(VS_OLD, update([vs('old')]));
    state.apply(SE_V1, update([]));
    assert.deepEqual(served(events, VS), [`old:${vs('old').version}`]);
    state.apply(VS_V1, update([vs('new')]));
    assert.deepEqual(
      served(events, VS),
      [`old:${vs('old').version}`],
      'sticky: no flapping between spellings',
    );
    state.apply(VS_OLD, update([]));
    assert.deepEqual(served(events, VS), [`new:${vs('new').version}`]);
    state.stop();
  });

  it('reports a disconnect as stale (failing before any sync) and never as a snapshot; a resync is one snapshot', () => {
    const { state, events } = setup();
    state.streamOpened();
    state.streamClosed(new MeshmuxError('UNAVAILABLE', 'refused'));
    assert.deepEqual(events.at(-1), {
      type: 'status',
      state: 'failing',
      error: new MeshmuxError('UNAVAILABLE', 'refused'),
    });
    state.streamOpened();
    for (const id of [VS_V1, VS_OLD, SE_V1]) state.apply(id, update(id === VS_V1 ? [vs('a')] : []));
    const synced = events.length;
    state.streamClosed(new MeshmuxError('UNAVAILABLE', 'gone'));
    assert.equal(events.length, synced + 1);
    assert.equal((events.at(-1) as { state: string }).state, 'stale');
    state.streamOpened();
    state.apply(VS_V1, update([vs('a')]));
    state.apply(SE_V1, update([]));
    assert.equal(events.length, synced + 1, 'nothing before every channel answered again');
    state.apply(VS_OLD, update([]));
    assert.equal(snapshots(events.slice(synced)).length, 1);
    assert.equal((events.at(-1) as { state: string }).state, 'synced');
    state.stop();
  });

  it('keeps the previous good version of a rejected object and reports every channel’s errors together', () => {
    const { state, events } = setup();
    state.streamOpened();
    state.apply(VS_V1, update([vs('a'), vs('b')]));
    state.apply(VS_OLD, update([]));
    state.apply(SE_V1, update([], { 'default/bad-se': 'broken SE' }));
    const kept = state.apply(
      VS_V1,
      update([vs('a', 'a2')], { 'default/b': 'broken b', 'default/never': 'broken new' }),
    );
    assert.deepEqual(kept, ['default/b']);
    assert.deepEqual(served(events, VS), [`a:${vs('a', 'a2').version}`, `b:${vs('b').version}`]);
    const last = snapshots(events).at(-1);
    assert.deepEqual(last?.errors.map((e) => e.message).sort(), ['broken SE', 'broken b', 'broken new']);
    state.stop();
  });

  it('emits nothing for a response that changes nothing', () => {
    const { state, events } = setup();
    state.streamOpened();
    state.apply(VS_V1, update([vs('a')]));
    state.apply(VS_OLD, update([]));
    state.apply(SE_V1, update([]));
    const count = events.length;
    state.apply(VS_V1, update([vs('a')], {}, 'v2'));
    state.apply(VS_OLD, update([], {}, 'v2'));
    assert.equal(events.length, count);
    state.stop();
  });
});

describe('exponential backoff', () => {
  it('grows ×1.5 from 500 ms to a 60 s cap with ±50 % jitter, and starts over after a reset', () => {
    const low = new ExponentialBackoff(undefined, () => 0);
    const high = new ExponentialBackoff(undefined, () => 0.999999);
    const lows = Array.from({ length: 14 }, () => low.nextDelayMs());
    const highs = Array.from({ length: 14 }, () => high.nextDelayMs());
    assert.deepEqual(lows.slice(0, 3), [250, 375, 562.5]);
    assert.ok(Math.abs((highs[0] ?? 0) - 750) < 0.01);
    assert.equal(lows.at(-1), 30_000, 'capped at 60 s before jitter');
    assert.ok(Math.abs((highs.at(-1) ?? 0) - 90_000) < 0.1);
    low.reset();
    assert.equal(low.nextDelayMs(), 250);
  });
});
