import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ChunkedList } from '../../src/core/chunked-list.js';
import { MeshmuxError } from '../../src/core/errors.js';
import { rootLogger } from '../../src/core/logger.js';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent, SourceSnapshotEvent, SourceStatusEvent } from '../../src/core/source-event.js';
import { KINDS } from '../../src/schema/kinds.js';
import { ExponentialBackoff } from '../../src/upstream/streaming/exponential-backoff.js';
import { SubscriptionState, type ChannelUpdate } from '../../src/upstream/streaming/subscription-state.js';
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

/** A sync budget the test runs out by hand: virtual time. */
class ManualTimer {
  private pending: (() => void) | undefined;
  readonly start = (callback: () => void): (() => void) => {
    this.pending = callback;
    return () => {
      if (this.pending === callback) this.pending = undefined;
    };
  };
  /** Runs out the budget of the current stream (if still running). */
  expire(): void {
    const callback = this.pending;
    this.pending = undefined;
    callback?.();
  }
}

/** Both VirtualService spellings and ServiceEntry unless `channels` says otherwise. */
function setup(
  timer = new ManualTimer(),
  channels = [
    { id: VS_V1, kind: kind(VS) },
    { id: VS_OLD, kind: kind(VS) },
    { id: SE_V1, kind: kind(SE) },
  ],
): { state: SubscriptionState; events: SourceEvent[] } {
  const events: SourceEvent[] = [];
  const state = new SubscriptionState({
    startTimer: timer.start,
    source: 'test',
    upstream: 'xds://upstream.test:15010',
    channels,
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
      names = [...s.resources].filter((r) => r.kind === k).map((r) => `${r.name}:${r.version}`);
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
      [...(all[0]?.resources ?? [])].map((r) => r.name),
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

  it('serves a kind of 150,000 objects, with 150,000 rejected, in one snapshot', () => {
    // Each list as long as a large mesh's ServiceEntries: too long to be spread as arguments.
    const { state, events } = setup();
    state.streamOpened();
    const many = Array.from({ length: 150_000 }, (_, i) => se(`s${i}`));
    const bad = Object.fromEntries(
      Array.from({ length: 150_000 }, (_, i) => [`default/bad${i}`, 'bad body']),
    );
    state.apply(VS_V1, update([vs('a')]));
    state.apply(VS_OLD, update([]));
    state.apply(SE_V1, update(many, bad));
    const [first] = snapshots(events);
    assert.equal(first?.resources.length, 150_001);
    const held = new Set(first?.resources);
    assert.ok(
      many.every((r) => held.has(r)),
      'every object served',
    );
    assert.equal(first?.errors.length, 150_000);
    assert.equal((events.at(-1) as { state: string }).state, 'synced');
    state.stop();
  });

  it('serves a state sent again as it was as the same list', () => {
    const { state, events } = setup(new ManualTimer(), [{ id: SE_V1, kind: kind(SE) }]);
    state.streamOpened();
    state.apply(SE_V1, { ...update([se('a'), se('b')]), keyedByName: true });
    state.streamClosed(new MeshmuxError('UNAVAILABLE', 'gone'));
    state.streamOpened();
    assert.ok(state.applyPatch(SE_V1, { removed: [], upserted: new Map() }, 'v2'));
    const [first, again] = snapshots(events);
    assert.equal(again?.revision, 'v2');
    assert.equal(again?.resources, first?.resources, 'the same list instance');
    state.streamClosed(new MeshmuxError('UNAVAILABLE', 'gone'));
    state.streamOpened();
    const c = se('c');
    assert.ok(state.applyPatch(SE_V1, { removed: [], upserted: new Map([['default/c', c]]) }, 'v3'));
    const changed = snapshots(events).at(-1);
    assert.notEqual(changed?.resources, first?.resources);
    assert.deepEqual(
      [...(changed?.resources ?? [])].map((r) => r.name),
      ['a', 'b', 'c'],
    );
    state.stop();
  });

  it("serves a kind patched response after response in its state's order, each list sharing with the one before every chunk no patch fell in, and leaves the lists it served before as they were", () => {
    const objects = Array.from({ length: 2000 }, (_, i) => se(`se-${String(i).padStart(4, '0')}`));
    // A patch: objects replaced or removed (by place in the state) and new ones added.
    const patchArb = fc.array(
      fc.tuple(fc.constantFrom('replace' as const, 'remove' as const, 'add' as const), fc.nat()),
      { minLength: 1, maxLength: 3 },
    );
    fc.assert(
      fc.property(fc.array(patchArb, { minLength: 1, maxLength: 10 }), (patches) => {
        const { state, events } = setup(new ManualTimer(), [{ id: SE_V1, kind: kind(SE) }]);
        state.streamOpened();
        const reference = new Map(objects.map((r) => [`${r.namespace}/${r.name}`, r]));
        state.apply(SE_V1, { ...update(objects), keyedByName: true });
        const served: { list: ChunkedList<ConfigResource>; names: string[] }[] = [];
        const remember = (): void => {
          const last = snapshots(events).at(-1)?.resources;
          assert.ok(last instanceof ChunkedList, 'a streaming kind is served in chunks');
          const list = last as ChunkedList<ConfigResource>;
          served.push({ list, names: [...list].map((r) => `${r.name}@${r.version}`) });
        };
        remember();
        patches.forEach((edits, n) => {
          const removed: string[] = [];
          const upserted = new Map<string, ConfigResource>();
          edits.forEach(([what, at], k) => {
            const keys = [...reference.keys()].filter((key) => !upserted.has(key) && !removed.includes(key));
            const key = keys[at % Math.max(keys.length, 1)];
            if (what === 'add' || key === undefined) {
              const fresh = se(`new-${n}-${k}`);
              upserted.set(`${fresh.namespace}/${fresh.name}`, fresh);
            } else {
              removed.push(key);
              if (what === 'replace') {
                const old = reference.get(key) as ConfigResource;
                upserted.set(key, fakeResource(old.name, { kind: SE, body: `changed-${n}-${k}` }));
              }
            }
          });
          for (const key of removed) if (!upserted.has(key)) reference.delete(key);
          for (const [key, r] of upserted) reference.set(key, r);
          assert.ok(state.applyPatch(SE_V1, { removed, upserted }, `v${n}`));
          remember();
          const [before, after] = served.slice(-2) as [(typeof served)[0], (typeof served)[0]];
          assert.deepEqual(
            [...after.list].map((r) => r.name),
            [...reference.values()].map((r) => r.name),
            "the state's order: a replaced object in its place, a new one last",
          );
          const [was, now] = ChunkedList.unshared(before.list, after.list);
          assert.ok(
            was.length + now.length <= 4 * 1024,
            `a patch of ${edits.length} objects among ${after.list.length} left ${was.length} objects unshared`,
          );
        });
        for (const { list, names } of served)
          assert.deepEqual(
            [...list].map((r) => `${r.name}@${r.version}`),
            names,
            'a list served before is as it was',
          );
        state.stop();
      }),
      { numRuns: 40, endOnFailure: true },
    );
  });

  it("serves a patch of many objects in the state's order too, listing the kind anew", () => {
    const { state, events } = setup(new ManualTimer(), [{ id: SE_V1, kind: kind(SE) }]);
    state.streamOpened();
    const objects = Array.from({ length: 2000 }, (_, i) => se(`se-${String(i).padStart(4, '0')}`));
    const reference = new Map(objects.map((r) => [`${r.namespace}/${r.name}`, r]));
    state.apply(SE_V1, { ...update(objects), keyedByName: true });
    const removed: string[] = [];
    const upserted = new Map<string, ConfigResource>();
    for (let i = 0; i < 2000; i += 13) {
      const old = objects[i] as ConfigResource;
      const key = `${old.namespace}/${old.name}`;
      removed.push(key);
      if (i % 2 === 0) upserted.set(key, fakeResource(old.name, { kind: SE, body: `changed-${i}` }));
    }
    for (let n = 0; n < 10; n++) upserted.set(`default/late-${n}`, se(`late-${n}`));
    for (const key of removed) if (!upserted.has(key)) reference.delete(key);
    for (const [key, r] of upserted) reference.set(key, r);
    assert.ok(state.applyPatch(SE_V1, { removed, upserted }, 'v2'));
    assert.deepEqual(
      [...(snapshots(events).at(-1)?.resources ?? [])].map((r) => `${r.name}@${r.version}`),
      [...reference.values()].map((r) => `${r.name}@${r.version}`),
    );
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

function statuses(events: readonly SourceEvent[]): SourceStatusEvent[] {
  return events.filter((e): e is SourceStatusEvent => e.type === 'status');
}

describe('subscription state: no answer is not empty', () => {
  it('serves only the kinds that answered once the budget passes, reports failing naming the mute type URLs and the upstream, and syncs when they answer', () => {
    const timer = new ManualTimer();
    const { state, events } = setup(timer);
    state.streamOpened();
    state.apply(VS_V1, update([vs('a')]));
    state.apply(VS_OLD, update([]));
    assert.equal(snapshots(events).length, 0, 'nothing before the budget');
    timer.expire();
    const partial = snapshots(events);
    assert.equal(partial.length, 1);
    assert.deepEqual([...(partial[0]?.kinds ?? [])], [VS], 'only the kind that answered');
    const failing = statuses(events).at(-1);
    assert.equal(failing?.state, 'failing');
    assert.equal(failing?.error?.code, 'UNAVAILABLE');
    assert.match(
      failing?.error?.message ?? '',
      /xds:\/\/upstream\.test:15010 did not answer networking\.istio\.io\/v1\/ServiceEntry/,
    );
    assert.ok(!statuses(events).some((e) => e.state === 'synced'), 'never synced while a kind is mute');

    state.apply(SE_V1, update([se('s')]));
    const late = snapshots(events).at(-1);
    assert.deepEqual([...(late?.kinds ?? [])], [SE], 'the late kind alone');
    assert.deepEqual(served(events, SE), [`s:${se('s').version}`]);
    assert.equal(statuses(events).at(-1)?.state, 'synced');
    state.stop();
  });

  it('emits no snapshot at all for an upstream that accepts the stream and never answers', () => {
    const timer = new ManualTimer();
    const { state, events } = setup(timer);
    state.streamOpened();
    timer.expire();
    assert.equal(snapshots(events).length, 0);
    assert.deepEqual(
      statuses(events).map((e) => e.state),
      ['connecting', 'failing'],
    );
    assert.match(statuses(events).at(-1)?.error?.message ?? '', /VirtualService.*ServiceEntry/);
    state.stop();
  });

  it('counts a kind as answered when either spelling answered, naming the mute spelling as a warning', () => {
    const timer = new ManualTimer();
    const { state, events } = setup(timer);
    state.streamOpened();
    state.apply(VS_OLD, update([vs('old')]));
    state.apply(SE_V1, update([]));
    timer.expire();
    assert.equal(statuses(events).at(-1)?.state, 'synced');
    assert.deepEqual([...(snapshots(events)[0]?.kinds ?? [])].sort(), [SE, VS]);
    assert.match(
      snapshots(events)[0]?.warnings[0]?.message ?? '',
      /no answer within 60000 ms for: networking\.istio\.io\/v1\/VirtualService/,
    );
    state.stop();
  });

  it('after a sync, a resync mute for one kind reports stale and leaves that kind as it was', () => {
    const timer = new ManualTimer();
    const { state, events } = setup(timer);
    state.streamOpened();
    for (const id of [VS_V1, VS_OLD, SE_V1]) state.apply(id, update(id === SE_V1 ? [se('s')] : [vs('a')]));
    state.streamClosed(new MeshmuxError('UNAVAILABLE', 'gone'));
    const from = events.length;
    state.streamOpened();
    state.apply(VS_V1, update([vs('a'), vs('b')]));
    state.apply(VS_OLD, update([]));
    timer.expire();
    const after = snapshots(events.slice(from));
    assert.equal(after.length, 1);
    assert.deepEqual([...(after[0]?.kinds ?? [])], [VS], 'the mute kind is not in the snapshot');
    assert.deepEqual(served(events, SE), [`s:${se('s').version}`], 'its previous state stays');
    assert.equal(statuses(events).at(-1)?.state, 'stale');
    assert.match(
      statuses(events).at(-1)?.error?.message ?? '',
      /did not answer networking\.istio\.io\/v1\/ServiceEntry/,
    );
    state.stop();
  });

  it('changes nothing for a response refused whole, and counts it as no answer', () => {
    const timer = new ManualTimer();
    const { state, events } = setup(timer);
    state.streamOpened();
    for (const id of [VS_V1, VS_OLD, SE_V1]) state.apply(id, update(id === SE_V1 ? [se('s')] : [vs('a')]));
    const count = snapshots(events).length;
    const refused = new MeshmuxError('SCHEMA', 'resources[0] is not an MCP Resource');
    state.apply(SE_V1, { ...update([]), refused });
    assert.equal(snapshots(events).length, count, 'no snapshot: the kind keeps its state');
    assert.equal(statuses(events).at(-1)?.error, refused, 'reported');
    assert.deepEqual(served(events, SE), [`s:${se('s').version}`]);

    state.streamOpened();
    state.apply(VS_V1, update([vs('a')]));
    state.apply(VS_OLD, update([]));
    state.apply(SE_V1, { ...update([]), refused });
    timer.expire();
    assert.equal(statuses(events).at(-1)?.state, 'stale');
    assert.match(
      statuses(events).at(-1)?.error?.message ?? '',
      /ServiceEntry \(its answers were rejected: resources\[0\] is not an MCP Resource\)/,
    );
    assert.deepEqual(served(events, SE), [`s:${se('s').version}`]);
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
