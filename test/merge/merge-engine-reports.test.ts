/**
 * What the merge engine tells operators and the layers after it: the startup budget's verdicts,
 * holds and confirmations in the log, snapshots that are new only when something a reader can see
 * changed, and versions that do not depend on the order kinds first arrived in.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Subject } from 'rxjs';
import type { ConfigResource } from '../../src/core/resource.js';
import { MeshmuxError } from '../../src/core/errors.js';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine, type MergeInput } from '../../src/merge/merge-engine.js';
import { firstMatch } from '../support/deadline.js';
import { fakeResource, snapshotEvent } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';
const GW = 'networking.istio.io/Gateway';

/** A logger whose lines the test reads. */
function capturingLog(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino(
    { level: 'debug' },
    { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { log, lines };
}

function source(name: string, policy: MergeInput['policy'] = {}, kinds?: ReadonlySet<string>) {
  const events = new Subject<SourceEvent>();
  const input: MergeInput = {
    descriptor: {
      name,
      type: 'test',
      defaultNamespace: 'default',
      ...(kinds === undefined ? {} : { kinds }),
    },
    events$: events,
    policy,
  };
  return { input, events };
}

function state(resources: ConfigResource[], revision = 'r', kinds?: ReadonlySet<string>): SourceEvent {
  return snapshotEvent(resources, kinds, revision);
}

const next = (
  engine: MergeEngine,
  what: string,
  predicate: (s: ConfigSnapshot) => boolean,
): Promise<ConfigSnapshot> => firstMatch(engine.snapshots$, predicate, 5_000, what);

const many = (n: number, prefix = 'svc'): ConfigResource[] =>
  Array.from({ length: n }, (_, i) => fakeResource(`${prefix}-${i}`));

describe('MergeEngine reports', () => {
  it('names the optional sources it serves without, and the required ones still missing, when the startup budget passes', async () => {
    const { log, lines } = capturingLog();
    const a = source('a');
    const optional = source('optional', { required: false });
    const required = source('required');
    const done = source('done', { required: false });
    const engine = new MergeEngine([a.input, optional.input, required.input, done.input], {
      syncTimeoutMs: 20,
      log,
    });
    engine.start();
    a.events.next(state([fakeResource('one')]));
    done.events.next(state([fakeResource('two')]));
    await next(engine, 'the snapshot after the budget', (s) => s.budgetPassed);
    const warn = lines.find(
      (l) => l['msg'] === 'startup budget passed: serving without these sources (required: false)',
    );
    assert.deepEqual(warn?.['sources'], ['optional'], 'a synced optional source is not named');
    const error = lines.find((l) =>
      String(l['msg']).startsWith('startup budget passed: these sources have neither synced'),
    );
    assert.deepEqual(Object.keys(error?.['missing'] ?? {}), ['required']);
    engine.stop();
  });

  it('logs nothing about the budget when every source synced in time', async () => {
    const { log, lines } = capturingLog();
    const a = source('a', { required: false });
    const engine = new MergeEngine([a.input], { syncTimeoutMs: 20, log });
    engine.start();
    a.events.next(state([fakeResource('one')]));
    await next(engine, 'the snapshot after the budget', (s) => s.budgetPassed);
    assert.deepEqual(
      lines.filter((l) => String(l['msg']).startsWith('startup budget passed')),
      [],
    );
    engine.stop();
  });

  it('refuses to start twice', () => {
    const engine = new MergeEngine([source('a').input], { syncTimeoutMs: 20 });
    engine.start();
    assert.throws(() => engine.start(), /MergeEngine.start\(\) called twice/);
    engine.stop();
  });

  it('gives equal content the same snapshot version whatever order its kinds first arrived in', async () => {
    const versions: string[] = [];
    for (const order of [
      [VS, DR, GW],
      [DR, VS, GW],
      [GW, VS, DR],
      [VS, GW, DR],
    ]) {
      const a = source('a');
      const engine = new MergeEngine([a.input], { syncTimeoutMs: 60_000 });
      engine.start();
      for (const kind of order) a.events.next(state([fakeResource('x', { kind })], 'r', new Set([kind])));
      const s = await next(engine, 'every kind', (x) => order.every((k) => x.kinds.has(k)));
      assert.deepEqual([...s.kinds.keys()], [DR, GW, VS], 'kinds in name order');
      versions.push(s.version);
      engine.stop();
    }
    assert.equal(new Set(versions).size, 1, versions.join(' '));
  });

  it("names the revision of the source state each kind carries, also after the source's priority changes", async () => {
    const a = source('a', { priority: 1 });
    const engine = new MergeEngine([a.input], { syncTimeoutMs: 60_000 });
    engine.start();
    a.events.next(state([fakeResource('one')], 'commit-1'));
    await next(engine, 'the first state', (s) => s.ready);
    a.events.next(state([fakeResource('one'), fakeResource('two')], 'commit-2'));
    const changed = await next(engine, 'the second state', (s) => s.kinds.get(VS)?.resources.length === 2);
    assert.deepEqual(changed.kinds.get(VS)?.sourceRevisions, ['commit-2']);
    engine.reconfigure([{ ...a.input, policy: { priority: 5 } }]);
    const reRanked = await next(engine, 'the new priority', (s) => s.sources[0]?.priority === 5);
    assert.deepEqual(reRanked.kinds.get(VS)?.sourceRevisions, ['commit-2']);
    engine.stop();
  });

  it('publishes a new snapshot when only what it reports of a source changes, with a larger generation', async () => {
    const a = source('a');
    const engine = new MergeEngine([a.input], { syncTimeoutMs: 60_000 });
    engine.start();
    a.events.next(state([fakeResource('one')], 'r1'));
    const first = await next(engine, 'the first state', (s) => s.ready);
    a.events.next(state([fakeResource('one')], 'r2'));
    const revised = await next(engine, 'the new revision reported', (s) => s.sources[0]?.revision === 'r2');
    assert.equal(revised.version, first.version, 'same content');
    assert.ok(revised.generation > first.generation);
    const error = new MeshmuxError('UNAVAILABLE', 'connection refused', { file: 'upstream' });
    a.events.next({ type: 'status', state: 'stale', error });
    const stale = await next(engine, 'the error reported', (s) => s.sources[0]?.lastError !== undefined);
    assert.equal(stale.sources[0]?.state, 'stale');
    assert.ok(stale.generation > revised.generation);
    engine.stop();
  });

  it('answers a kind only once every source that may hold it has answered that kind', async () => {
    const a = source('a');
    const b = source('b', {}, new Set([VS, DR]));
    const engine = new MergeEngine([a.input, b.input], { syncTimeoutMs: 60_000 });
    engine.start();
    a.events.next(state([fakeResource('one')]));
    b.events.next(state([fakeResource('dr', { kind: DR })], 'r', new Set([DR])));
    const s = await next(engine, 'both sources heard from', (x) => x.kinds.has(DR) && x.kinds.has(VS));
    assert.equal(s.readyFor(DR), true, 'a answered every kind, b answered DestinationRule');
    assert.equal(s.readyFor(VS), false, 'b may hold VirtualServices and has not answered them');
    engine.stop();
  });

  it('says in the log why it holds an update and who confirmed it', async () => {
    const { log, lines } = capturingLog();
    const empty = source('empty');
    const mass = source('mass');
    const engine = new MergeEngine([empty.input, mass.input], { syncTimeoutMs: 60_000, log });
    engine.start();
    empty.events.next(state([fakeResource('one')]));
    mass.events.next(state(many(40, 'm')));
    await next(engine, 'both served', (s) => s.ready);
    empty.events.next(state([]));
    mass.events.next(state(many(5, 'm')));
    await next(engine, 'both held', (s) => s.sources.every((x) => x.held !== undefined));
    const held = (reason: string) => lines.find((l) => l['reason'] === reason);
    assert.equal(
      held('empty')?.['msg'],
      'a source sent an empty state: holding it, its last objects stay served (confirm to apply)',
    );
    assert.equal(held('empty')?.['source'], 'empty');
    assert.equal(
      held('mass-delete')?.['msg'],
      'a source update would delete too much at once: holding it (confirm to apply)',
    );
    assert.equal(held('mass-delete')?.['source'], 'mass');
    assert.equal(engine.confirm('empty'), true);
    const confirmed = lines.find((l) => l['msg'] === 'operator confirmed a held update');
    assert.equal(confirmed?.['source'], 'empty');
    assert.equal((confirmed?.['held'] as { reason?: string } | undefined)?.reason, 'empty');
    engine.stop();
  });

  it('reports how long a build took, as a duration', async () => {
    const a = source('a');
    const durations: number[] = [];
    const engine = new MergeEngine(
      [a.input],
      { syncTimeoutMs: 60_000 },
      { onSnapshot: (_s, _k, ms) => durations.push(ms) },
    );
    const since = performance.now();
    engine.start();
    a.events.next(state(many(10)));
    await next(engine, 'the first state', (s) => s.ready);
    const elapsed = performance.now() - since;
    assert.ok(durations.length > 0);
    // Elapsed time, not a timestamp: never negative, never longer than the test itself took.
    for (const ms of durations) assert.ok(ms >= 0 && ms <= elapsed, `${ms} of ${elapsed}`);
    engine.stop();
  });

  it('tells its hooks of a snapshot before the subscribers get it, and that they got it after', async () => {
    const a = source('a');
    const order: string[] = [];
    const engine = new MergeEngine(
      [a.input],
      { syncTimeoutMs: 60_000 },
      {
        onSnapshot: (s) => order.push(`built ${s.generation}`),
        onPublished: (s) => order.push(`published ${s.generation}`),
      },
    );
    engine.snapshots$.subscribe((s) => order.push(`received ${s.generation}`));
    engine.start();
    a.events.next(state(many(3)));
    const ready = await next(engine, 'the first state', (s) => s.ready);
    const g = ready.generation;
    assert.deepEqual(order.slice(-3), [`built ${g}`, `received ${g}`, `published ${g}`]);
    engine.stop();
  });

  it("turns a source stream's error into that source's failure, naming the source and keeping the cause", async () => {
    const a = source('a');
    const engine = new MergeEngine([a.input], { syncTimeoutMs: 60_000 });
    engine.start();
    a.events.error(new Error('socket hang up'));
    const failed = await next(engine, 'the failure reported', (s) => s.sources[0]?.lastError !== undefined);
    assert.equal(failed.sources[0]?.state, 'failing');
    assert.equal(failed.sources[0]?.lastError?.code, 'UNAVAILABLE');
    assert.equal(failed.sources[0]?.lastError?.location.file, 'a');
    assert.match(failed.sources[0]?.lastError?.message ?? '', /socket hang up/);
    engine.stop();
  });

  it('moves a kind’s generation when its content changes, and only then', async () => {
    const a = source('a');
    const engine = new MergeEngine([a.input], { syncTimeoutMs: 60_000 });
    engine.start();
    a.events.next(state([fakeResource('one')], 'r1'));
    const first = await next(engine, 'the first state', (s) => s.ready);
    const g1 = first.kinds.get(VS)?.generation;
    assert.equal(typeof g1, 'number');
    a.events.next(state([fakeResource('one')], 'r2'));
    const same = await next(engine, 'the same content again', (s) => s.sources[0]?.revision === 'r2');
    assert.equal(same.kinds.get(VS)?.generation, g1);
    a.events.next(state([fakeResource('one'), fakeResource('two')], 'r3'));
    const changed = await next(engine, 'new content', (s) => s.kinds.get(VS)?.resources.length === 2);
    assert.ok((changed.kinds.get(VS)?.generation ?? 0) > (g1 ?? 0));
    engine.stop();
  });

  it('confirms the held update of the source named, among several holding one', async () => {
    const a = source('a');
    const b = source('b');
    const engine = new MergeEngine([a.input, b.input], { syncTimeoutMs: 60_000 });
    engine.start();
    a.events.next(state(many(20, 'a')));
    b.events.next(state(many(20, 'b')));
    await next(engine, 'both served', (s) => s.ready);
    a.events.next(state([]));
    b.events.next(state(many(2, 'b')));
    const held = await next(engine, 'both held', (s) => s.sources.every((x) => x.held !== undefined));
    const digestB = held.sources[1]?.held?.digest ?? '';
    assert.notEqual(digestB, held.sources[0]?.held?.digest);
    assert.equal(engine.confirmHeld('b', digestB), 'applied');
    const applied = await next(engine, "b's update applied", (s) => s.sources[1]?.held === undefined);
    assert.notEqual(applied.sources[0]?.held, undefined, "a's update stays held");
    engine.stop();
  });
});
