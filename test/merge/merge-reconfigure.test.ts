/**
 * What the merge does around the sources' events: a configuration reload (sources added, removed,
 * re-ranked, given new rules, resubscribed only when the way to their upstream changed), an
 * operator's confirmation, a persisted record of another source type, its hooks, and stopping.
 * Built on `queueScheduler`, so every event is merged before `next()` returns.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { defer, queueScheduler, Subject, VirtualTimeScheduler } from 'rxjs';
import { MeshmuxError } from '../../src/core/errors.js';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot, HoldReason } from '../../src/merge/config-snapshot.js';
import { type MergeInput, MergeEngine } from '../../src/merge/merge-engine.js';
import type { SourceRecord } from '../../src/merge/source-record.js';
import type { SourcePolicy } from '../../src/merge/source-rules.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';

function snapshotOf(
  resources: readonly ConfigResource[],
  revision = 'r',
  errors: readonly MeshmuxError[] = [],
): SourceEvent {
  return { type: 'snapshot', resources, revision, errors, warnings: [] };
}

/** A source whose events the test sends, counting the subscriptions the merge makes to it. */
function source(name: string, policy: Partial<SourcePolicy> = {}, fingerprint = 'f1') {
  const events = new Subject<SourceEvent>();
  const counter = { subscriptions: 0 };
  const input = (p: Partial<SourcePolicy> = policy, f: string = fingerprint): MergeInput => ({
    descriptor: { name, type: 'test', defaultNamespace: 'default' },
    events$: defer(() => {
      counter.subscriptions++;
      return events;
    }),
    policy: { settleMs: 0, ...p },
    fingerprint: f,
  });
  return { events, counter, input };
}

/** Engines a test built; each is stopped after the test, whatever its outcome. */
const engines: MergeEngine[] = [];
afterEach(() => {
  for (const e of engines.splice(0)) e.stop();
});

function engineOf(inputs: readonly MergeInput[], options: ConstructorParameters<typeof MergeEngine>[1] = {}) {
  const hooks = { held: [] as string[], events: [] as string[], unchanged: 0, changed: [] as string[][] };
  const engine = new MergeEngine(
    inputs,
    { syncTimeoutMs: 3_600_000, scheduler: queueScheduler, ...options },
    {
      onHeld: (s: string, reason: HoldReason, deletions: number) =>
        hooks.held.push(`${s}:${reason}:${deletions}`),
      onSourceEvent: (s, e) => hooks.events.push(`${s}:${e.type}`),
      onUnchanged: () => hooks.unchanged++,
      onSnapshot: (_s: ConfigSnapshot, kinds) => hooks.changed.push([...kinds].sort()),
    },
  );
  engines.push(engine);
  return { engine, hooks };
}

/** `name@source` of every object served of a kind, sorted. */
function served(engine: MergeEngine, kind = VS): string[] {
  return (engine.current().kinds.get(kind)?.resources ?? [])
    .map((r) => `${r.name}@${r.annotations['meshmux.io/source'] ?? '?'}`)
    .sort();
}

describe('a configuration reload', () => {
  it('withdraws the objects of a source removed from the configuration, when its guards let them go, and tells the store it is gone', () => {
    const a = source('a');
    const b = source('b', { keepOnEmpty: false });
    const removed: string[] = [];
    const { engine } = engineOf([a.input(), b.input()], {
      store: { changed: () => undefined, removed: (s) => removed.push(s) },
    });
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    b.events.next(snapshotOf([fakeResource('y')]));
    assert.deepEqual(served(engine), ['x@a', 'y@b']);
    assert.equal(engine.has('a'), true);
    engine.reconfigure([a.input()]);
    assert.deepEqual(served(engine), ['x@a']);
    assert.deepEqual(removed, ['b']);
    assert.equal(engine.has('b'), false);
    assert.equal(engine.has('a'), true);
    assert.deepEqual(
      engine.current().sources.map((s) => s.name),
      ['a'],
    );
    b.events.next(snapshotOf([fakeResource('z')]));
    assert.deepEqual(served(engine), ['x@a'], 'a removed source is no longer listened to');
    assert.equal(b.events.observed, false);
    engine.stop();
  });

  it('holds the removal of a source holding objects: served behind the configured sources, unheard, until confirmed', () => {
    const a = source('a');
    const b = source('b', { priority: 5 });
    const removed: string[] = [];
    const { engine, hooks } = engineOf([a.input(), b.input()], {
      store: { changed: () => undefined, removed: (s) => removed.push(s) },
    });
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    b.events.next(snapshotOf([fakeResource('x'), fakeResource('y')]));
    assert.deepEqual(served(engine), ['x@b', 'y@b']);
    // Renamed by mistake: `b` is gone, `c` (its upstream not answering yet) is new.
    const c = source('c', { priority: 5 });
    engine.reconfigure([a.input(), c.input()]);
    assert.deepEqual(served(engine), ['x@b', 'y@b'], 'nothing withdrawn');
    assert.deepEqual(hooks.held, ['b:removed:2']);
    assert.deepEqual(removed, [], 'its record is kept');
    const report = engine.current().sources.find((s) => s.name === 'b');
    assert.deepEqual([report?.held?.reason, report?.held?.deletions, report?.held?.total], ['removed', 2, 2]);
    assert.deepEqual(
      engine.current().waitingFor,
      [],
      'neither the removed source nor the added one is waited for',
    );
    assert.equal(b.events.observed, false, 'no longer heard');
    // The new source sends the same objects: it wins them, the removed one being behind it.
    c.events.next(snapshotOf([fakeResource('x'), fakeResource('y')]));
    assert.deepEqual(served(engine), ['x@c', 'y@c']);
    assert.equal(engine.confirm('b'), true);
    assert.deepEqual(served(engine), ['x@c', 'y@c'], 'confirmed: nothing goes that another source serves');
    assert.deepEqual(removed, ['b']);
    assert.equal(engine.has('b'), false);
    assert.deepEqual(
      engine.current().sources.map((s) => s.name),
      ['a', 'c'],
    );
    engine.stop();
  });

  it('holds edited access rules that would withdraw too much until confirmed, on a reload and across a restart', () => {
    const objects = Array.from({ length: 12 }, (_, i) => fakeResource(`o${i}`, { namespace: 'team-a' }));
    const good = { allow: { namespaces: ['team-a'] } };
    const typo = { allow: { namespaces: ['tema-a'] } };
    const a = source('a', good);
    const reads: Array<() => SourceRecord> = [];
    const store = {
      changed: (_s: string, read: () => SourceRecord) => void reads.push(read),
      removed: () => undefined,
    };
    const { engine, hooks } = engineOf([a.input()], { store });
    engine.start();
    a.events.next(snapshotOf(objects));
    engine.reconfigure([a.input(typo)]);
    assert.equal(served(engine).length, 12, 'nothing withdrawn');
    assert.deepEqual(hooks.held, ['a:rules:12']);
    const record = reads.at(-1)?.();
    assert.ok(record !== undefined);
    assert.deepEqual(record.rules?.allow, good.allow, 'the record keeps the rules in force');
    engine.stop();

    // Restarted with the typo in the file: served under the recorded rules, the edit held again.
    const b = source('a', typo);
    const restarted = engineOf([b.input()], { restored: new Map([['a', record]]) });
    assert.equal(served(restarted.engine).length, 12);
    assert.deepEqual(restarted.hooks.held, ['a:rules:12']);
    restarted.engine.start();
    assert.equal(restarted.engine.confirm('a'), true);
    assert.deepEqual(served(restarted.engine), []);
    assert.equal(restarted.engine.current().sources[0]?.held, undefined);
  });

  it("lets go of the objects of kinds an edit takes out of a source's kinds, through its guards, on a reload and across a restart", () => {
    const events = new Subject<SourceEvent>();
    const input = (kinds: readonly string[], fingerprint: string): MergeInput => ({
      descriptor: { name: 'a', type: 'test', defaultNamespace: 'default', kinds: new Set(kinds) },
      events$: events,
      policy: { settleMs: 0 },
      fingerprint,
    });
    const reads: Array<() => SourceRecord> = [];
    const store = {
      changed: (_s: string, read: () => SourceRecord) => void reads.push(read),
      removed: () => undefined,
    };
    const { engine, hooks } = engineOf([input([VS, DR], 'f1')], { store });
    engine.start();
    const vs = Array.from({ length: 30 }, (_, i) => fakeResource(`v${i}`));
    const dr = (n: number) => Array.from({ length: n }, (_, i) => fakeResource(`d${i}`, { kind: DR }));
    events.next(snapshotOf([...vs, ...dr(4)]));
    assert.equal(served(engine, DR).length, 4);
    // A few: they go at once, and the source's other kinds stay.
    engine.reconfigure([input([VS], 'f2')]);
    assert.deepEqual(served(engine, DR), []);
    assert.equal(served(engine).length, 30);
    assert.deepEqual(hooks.held, []);
    // More than the guards let one update delete: held, served until confirmed.
    engine.reconfigure([input([VS, DR], 'f3')]);
    events.next(snapshotOf([...vs, ...dr(40)]));
    assert.equal(served(engine, DR).length, 40);
    const record = reads.at(-1)?.();
    assert.ok(record !== undefined);
    engine.reconfigure([input([VS], 'f4')]);
    assert.equal(served(engine, DR).length, 40, 'nothing withdrawn');
    assert.deepEqual(hooks.held, ['a:mass-delete:40']);
    engine.stop();

    // The same edit made while meshmux was down: the record's objects of the dropped kind are held.
    const restarted = engineOf([input([VS], 'f5')], { restored: new Map([['a', record]]) });
    assert.equal(served(restarted.engine, DR).length, 40);
    assert.deepEqual(
      restarted.engine.current().sources[0]?.held?.deletions,
      40,
      'held again after the restart',
    );
    restarted.engine.start();
    assert.equal(restarted.engine.confirm('a'), true);
    assert.deepEqual(served(restarted.engine, DR), []);
    assert.equal(served(restarted.engine).length, 30);
  });

  it('drops a held removal when the source is configured again: nothing withdrawn, heard again', () => {
    const a = source('a');
    const b = source('b');
    const removed: string[] = [];
    const { engine } = engineOf([a.input(), b.input()], {
      store: { changed: () => undefined, removed: (s) => removed.push(s) },
    });
    engine.start();
    b.events.next(snapshotOf([fakeResource('x'), fakeResource('y')]));
    const snapshots: string[][] = [];
    engine.snapshots$.subscribe((snap) =>
      snapshots.push((snap.kinds.get(VS)?.resources ?? []).map((r) => r.name).sort()),
    );
    engine.reconfigure([a.input()]);
    engine.reconfigure([a.input(), b.input()]);
    assert.equal(engine.current().sources.find((s) => s.name === 'b')?.held, undefined);
    assert.equal(b.counter.subscriptions, 2, 'subscribed again');
    b.events.next(snapshotOf([fakeResource('y'), fakeResource('z')]));
    assert.deepEqual(served(engine), ['y@b', 'z@b']);
    assert.ok(
      snapshots.every((names) => names.includes('y')),
      `y served throughout: ${JSON.stringify(snapshots)}`,
    );
    assert.deepEqual(removed, []);
    assert.equal(engine.confirm('b'), false, 'nothing left to confirm');
    engine.stop();
  });

  it('applies a held removal once confirmAfter passes', () => {
    const clock = new VirtualTimeScheduler();
    const b = source('b', { confirmAfterMs: 60_000 });
    const a = source('a');
    const { engine } = engineOf([a.input(), b.input()], { scheduler: clock, syncTimeoutMs: 1_000 });
    engine.start();
    b.events.next(snapshotOf([fakeResource('x')]));
    a.events.next(snapshotOf([fakeResource('w')]));
    clock.flush();
    engine.reconfigure([a.input()]);
    clock.maxFrames = clock.now() + 59_000;
    clock.flush();
    assert.deepEqual(served(engine), ['w@a', 'x@b'], 'a minute not yet passed');
    clock.maxFrames = Number.POSITIVE_INFINITY;
    clock.flush();
    assert.deepEqual(served(engine), ['w@a']);
    assert.equal(engine.has('b'), false);
    engine.stop();
  });

  it('serves the kinds a source added by a reload may hold without waiting for it, once the merge was ready', () => {
    const a = source('a');
    const b = source('b');
    const c = source('c');
    const { engine, hooks } = engineOf([a.input()]);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    engine.reconfigure([a.input(), b.input()]);
    assert.equal(engine.current().ready, true, 'istiods hold nothing of it: nothing to wait for');
    assert.deepEqual(engine.current().waitingFor, []);
    const published = hooks.changed.length;
    a.events.next(snapshotOf([fakeResource('x'), fakeResource('w')]));
    assert.equal(hooks.changed.length, published + 1, "the other source's change is published");
    assert.deepEqual(engine.current().kinds.get(VS)?.resources.length, 2);
    b.events.next(snapshotOf([fakeResource('y')]));
    assert.deepEqual(served(engine), ['w@a', 'x@a', 'y@b']);
    // A source made required by a reload while it has not synced is not waited for either.
    const lazy = source('lazy', { required: false });
    const { engine: other } = engineOf([a.input(), lazy.input()], { syncTimeoutMs: 0 });
    other.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    assert.equal(other.current().ready, true);
    other.reconfigure([a.input(), lazy.input({ required: true })]);
    assert.equal(other.current().ready, true);
    // Before the merge was ever ready, a reload's source is waited for as at start.
    const { engine: early } = engineOf([c.input()]);
    early.start();
    early.reconfigure([c.input(), b.input()]);
    c.events.next(snapshotOf([fakeResource('z')]));
    assert.deepEqual(early.current().waitingFor, ['b']);
    engine.stop();
    other.stop();
    early.stop();
  });

  it('does not subscribe to a source added before the merge started until it starts', () => {
    const a = source('a');
    const b = source('b');
    const { engine } = engineOf([a.input()]);
    engine.reconfigure([a.input(), b.input()]);
    assert.equal(b.counter.subscriptions, 0);
    engine.start();
    assert.equal(b.counter.subscriptions, 1);
    engine.stop();
  });

  it('keeps the running subscription of a source whose fingerprint is unchanged, and resubscribes one whose fingerprint changed', () => {
    const a = source('a');
    const { engine } = engineOf([a.input()]);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    engine.reconfigure([a.input({ priority: 5 })]);
    assert.equal(a.counter.subscriptions, 1, 'same fingerprint: same subscription');
    engine.reconfigure([a.input({}, 'f2')]);
    assert.equal(a.counter.subscriptions, 2, 'new fingerprint: subscribed again');
    assert.deepEqual(served(engine), ['x@a'], 'its last state stays served meanwhile');
    a.events.next(snapshotOf([fakeResource('y')]));
    assert.deepEqual(served(engine), ['y@a']);
    engine.stop();
  });

  it('lets a kept source whose priority rose win the keys it shares, at once', () => {
    const a = source('a');
    const b = source('b');
    const { engine, hooks } = engineOf([a.input(), b.input()]);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x', { body: 'from a' })]));
    b.events.next(snapshotOf([fakeResource('x', { body: 'from b' }), fakeResource('y')]));
    assert.deepEqual(served(engine), ['x@a', 'y@b'], 'earlier in the configuration wins a tie');
    hooks.changed.length = 0;
    engine.reconfigure([a.input(), b.input({ priority: 10 })]);
    assert.deepEqual(served(engine), ['x@b', 'y@b']);
    assert.deepEqual(hooks.changed, [[VS]], 'one snapshot naming the re-ranked kind');
    engine.reconfigure([a.input({ priority: 20 }), b.input({ priority: 10 })]);
    assert.deepEqual(served(engine), ['x@a', 'y@b']);
    engine.stop();
  });

  it('re-ranks by position too: reordering two sources of equal priority changes who wins', () => {
    const a = source('a');
    const b = source('b');
    const { engine } = engineOf([a.input(), b.input()]);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    b.events.next(snapshotOf([fakeResource('x'), fakeResource('y', { kind: DR })]));
    assert.deepEqual(served(engine), ['x@a']);
    engine.reconfigure([b.input(), a.input()]);
    assert.deepEqual(served(engine), ['x@b']);
    assert.deepEqual(served(engine, DR), ['y@b'], 'its other kinds stay served');
    assert.deepEqual(
      engine.current().sources.map((s) => s.name),
      ['b', 'a'],
    );
    engine.stop();
  });

  it('applies the new rules of a kept source at once: a kind it may no longer send is withdrawn', () => {
    const a = source('a');
    const { engine } = engineOf([a.input()]);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x'), fakeResource('y', { kind: DR })]));
    engine.reconfigure([a.input({ deny: { kinds: ['DestinationRule'] } })]);
    assert.deepEqual(served(engine, DR), []);
    assert.deepEqual(served(engine), ['x@a']);
    engine.reconfigure([a.input({ deny: { kinds: ['DestinationRule'] }, priority: 3 })]);
    assert.deepEqual(served(engine, DR), [], 'a re-ranked source keeps its rules');
    assert.deepEqual(served(engine), ['x@a']);
    engine.stop();
  });
});

describe('the merge around its sources', () => {
  it('refuses to start twice', () => {
    const { engine } = engineOf([source('a').input()]);
    engine.start();
    assert.throws(
      () => engine.start(),
      (e: unknown) => e instanceof MeshmuxError && e.code === 'INTERNAL',
    );
    engine.stop();
  });

  it('confirms nothing for an unknown source or one holding nothing, and applies a held update once', () => {
    const a = source('a');
    const { engine, hooks } = engineOf([a.input()]);
    engine.start();
    const many = Array.from({ length: 12 }, (_, i) => fakeResource(`o${i}`));
    a.events.next(snapshotOf(many));
    assert.equal(engine.confirm('a'), false, 'nothing held');
    assert.equal(engine.confirm('nobody'), false, 'no such source');
    a.events.next(snapshotOf([fakeResource('o0')]));
    assert.deepEqual(hooks.held, ['a:mass-delete:11']);
    assert.equal(engine.current().sources[0]?.held?.reason, 'mass-delete');
    assert.equal(served(engine).length, 12, 'held: still serving every object');
    assert.equal(engine.confirm('nobody'), false, 'another source’s hold is not confirmed by a wrong name');
    assert.equal(engine.confirm('a'), true);
    assert.deepEqual(served(engine), ['o0@a']);
    assert.equal(engine.current().sources[0]?.held, undefined);
    assert.equal(engine.confirm('a'), false, 'applied once');
    engine.stop();
  });

  it('calls its hooks: every source event, a snapshot per change, and an unchanged build for a repeated status', () => {
    const a = source('a');
    const { engine, hooks } = engineOf([a.input()]);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    const snapshots = hooks.changed.length;
    assert.deepEqual(hooks.changed.at(-1), [VS], 'the first state names its kind');
    a.events.next({ type: 'status', state: 'stale' });
    assert.equal(hooks.changed.length, snapshots + 1, 'a change of state is published');
    assert.deepEqual(hooks.changed.at(-1), [], 'with no kind changed');
    assert.equal(engine.current().sources[0]?.state, 'stale');
    const unchanged = hooks.unchanged;
    a.events.next({ type: 'status', state: 'stale' });
    assert.equal(hooks.unchanged, unchanged + 1, 'the same status again builds nothing new');
    assert.equal(hooks.changed.length, snapshots + 1);
    assert.deepEqual(hooks.events, ['a:snapshot', 'a:status', 'a:status']);
    engine.stop();
  });

  it('publishes a source whose revision alone changed, and one whose errors changed', () => {
    const a = source('a');
    const { engine } = engineOf([a.input()]);
    engine.start();
    const x = fakeResource('x');
    a.events.next(snapshotOf([x], 'r1'));
    a.events.next(snapshotOf([x], 'r2'));
    assert.equal(engine.current().sources[0]?.revision, 'r2');
    const problem = new MeshmuxError('SCHEMA', 'broken', { file: 'f.yaml' });
    a.events.next(snapshotOf([x], 'r2', [problem]));
    assert.deepEqual(engine.current().sources[0]?.errors, [problem]);
    a.events.next({ type: 'status', state: 'stale', error: problem });
    assert.equal(engine.current().sources[0]?.lastError, problem);
    engine.stop();
  });

  it('starts a source from a persisted record of another source type, and judges its first state against it', () => {
    const record: SourceRecord = {
      source: 'a',
      type: 'git',
      revision: 'old',
      savedMs: 0,
      complete: true,
      answeredKinds: [],
      resources: [fakeResource('persisted')],
    };
    const a = source('a', { keepOnEmpty: true });
    const { engine, hooks } = engineOf([a.input()], { restored: new Map([['a', record]]) });
    assert.deepEqual(served(engine), ['persisted@a'], 'what istiods hold stays served');
    assert.equal(engine.current().sources[0]?.state, 'restored');
    engine.start();
    a.events.next(snapshotOf([]));
    assert.deepEqual(served(engine), ['persisted@a'], 'an empty first state is held');
    assert.deepEqual(hooks.held, ['a:empty:1']);
  });

  it('serves the record of a source no longer configured under the rules it recorded, its removal held', () => {
    const record: SourceRecord = {
      source: 'gone',
      type: 'git',
      revision: 'old',
      savedMs: 0,
      complete: true,
      answeredKinds: [],
      resources: [
        fakeResource('mine', { namespace: 'team-a' }),
        fakeResource('denied', { namespace: 'team-b' }),
      ],
      rules: {
        priority: 0,
        allow: { namespaces: ['team-a'] },
        keepOnEmpty: true,
        maxDeleteRatio: 0.5,
        minDeletes: 10,
        defaultNamespace: 'team-a',
      },
    };
    const removed: string[] = [];
    const store = { changed: () => undefined, removed: (s: string) => removed.push(s) };
    const a = source('a');
    const { engine, hooks } = engineOf([a.input()], { restored: new Map([['gone', record]]), store });
    assert.deepEqual(served(engine), ['mine@gone'], 'what its rules admitted, and only that');
    assert.deepEqual(hooks.held, ['gone:removed:1']);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    assert.equal(engine.current().ready, true, 'a removed source is not waited for');
    assert.deepEqual(removed, []);
    assert.equal(engine.confirm('gone'), true);
    assert.deepEqual(served(engine), ['x@a']);
    assert.deepEqual(removed, ['gone']);

    // Rules that let its objects go at once: dropped, and its record forgotten.
    removed.length = 0;
    const loose = { ...record, rules: { ...record.rules, keepOnEmpty: false } } as SourceRecord;
    const dropped = engineOf([a.input()], { restored: new Map([['gone', loose]]), store }).engine;
    assert.deepEqual(served(dropped), []);
    assert.deepEqual(removed, ['gone']);
    assert.deepEqual(
      dropped.current().sources.map((s) => s.name),
      ['a'],
    );

    // A record of a release that recorded no rules: what it admitted is unknown, so nothing is served.
    const { rules: _rules, ...unruled } = record;
    const unknown = engineOf([a.input()], { restored: new Map([['gone', unruled]]), store }).engine;
    assert.deepEqual(served(unknown), []);
    assert.deepEqual(
      unknown.current().sources.map((s) => s.name),
      ['a'],
    );
  });

  it('records the rules a source runs under, and records them again when a reload changes them', () => {
    const records: SourceRecord[] = [];
    const reads: Array<() => SourceRecord> = [];
    const store = {
      changed: (_s: string, read: () => SourceRecord) => void reads.push(read),
      removed: () => undefined,
    };
    const a = source('a', { priority: 3, deny: { namespaces: ['kube-system'] } });
    const { engine } = engineOf([a.input()], { store });
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    records.push(...reads.splice(0).map((read) => read()));
    assert.deepEqual(records.at(-1)?.rules, {
      priority: 3,
      deny: { namespaces: ['kube-system'] },
      keepOnEmpty: true,
      maxDeleteRatio: 0.5,
      minDeletes: 10,
      defaultNamespace: 'default',
    });
    engine.reconfigure([
      a.input({ priority: 3, deny: { namespaces: ['kube-system'] }, confirmAfterMs: 5_000 }),
    ]);
    assert.equal(reads.length, 1, 'rewritten for the new rules alone');
    assert.equal(reads[0]?.().rules?.confirmAfterMs, 5_000);
    engine.stop();
  });

  it('listens to no source once stopped, and keeps its last snapshot readable', () => {
    const a = source('a');
    const { engine } = engineOf([a.input()]);
    engine.start();
    a.events.next(snapshotOf([fakeResource('x')]));
    engine.stop();
    assert.equal(a.events.observed, false);
    a.events.next(snapshotOf([fakeResource('y')]));
    assert.deepEqual(served(engine), ['x@a']);
  });
});
