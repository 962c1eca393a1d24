import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Subject, throwError } from 'rxjs';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import { fakeResource } from '../support/resources.js';
import { firstMatch } from '../support/deadline.js';

const VS = 'networking.istio.io/VirtualService';

function source(name: string) {
  const events = new Subject<SourceEvent>();
  return {
    input: { descriptor: { name, type: 'test', defaultNamespace: 'default' }, events$: events },
    events,
  };
}

function snapshotOf(names: string[], revision = names.join(',')): SourceEvent {
  return {
    type: 'snapshot',
    resources: names.map((n) => fakeResource(n)),
    revision,
    errors: [],
    warnings: [],
  };
}

function next(engine: MergeEngine, predicate: (s: ConfigSnapshot) => boolean): Promise<ConfigSnapshot> {
  return firstMatch(engine.snapshots$, predicate, 5_000, 'a snapshot matching the test’s predicate');
}

function names(snapshot: ConfigSnapshot): string[] {
  return (snapshot.kinds.get(VS)?.resources ?? []).map((r) => r.name);
}

describe('MergeEngine', () => {
  it('is not ready until every source has delivered its first state', async () => {
    const a = source('a');
    const b = source('b');
    const engine = new MergeEngine([a.input, b.input], { syncTimeoutMs: 60_000 });
    engine.start();
    a.events.next(snapshotOf(['one']));
    const partial = await next(engine, (s) => s.kinds.has(VS));
    assert.equal(partial.ready, false);
    assert.deepEqual(partial.waitingFor, ['b']);
    b.events.next(snapshotOf(['two']));
    const full = await next(engine, (s) => s.ready);
    assert.deepEqual(names(full), ['one', 'two']);
    engine.stop();
  });

  it('serves without a source marked required: false once the startup budget has passed', async () => {
    const a = source('a');
    const b = source('b');
    const engine = new MergeEngine([a.input, { ...b.input, policy: { required: false } }], {
      syncTimeoutMs: 20,
    });
    engine.start();
    a.events.next(snapshotOf(['one']));
    const waiting = await next(engine, (s) => s.kinds.has(VS));
    assert.equal(waiting.readyFor(VS), false, 'b is waited for until the budget passes');
    const served = await next(engine, (s) => s.ready);
    assert.equal(served.budgetPassed, true);
    assert.deepEqual(served.waitingFor, []);
    assert.equal(served.readyFor(VS), true);
    assert.deepEqual(names(served), ['one']);
    engine.stop();
  });

  it('never answers a kind a required source may hold while it has neither synced nor been restored', async () => {
    const a = source('a');
    const b = source('b');
    const engine = new MergeEngine([a.input, b.input], { syncTimeoutMs: 20 });
    engine.start();
    a.events.next(snapshotOf(['one']));
    const after = await next(engine, (s) => s.budgetPassed);
    assert.equal(after.ready, false);
    assert.deepEqual(after.waitingFor, ['b']);
    assert.equal(after.readyFor(VS), false);
    assert.deepEqual(after.sources.find((x) => x.name === 'b')?.missingKinds, ['*']);
    b.events.next(snapshotOf(['two']));
    const full = await next(engine, (s) => s.ready);
    assert.equal(full.readyFor(VS), true);
    assert.deepEqual(names(full), ['one', 'two']);
    engine.stop();
  });

  it('derives identical versions in two independent engines fed the same states', async () => {
    const build = async (order: string[]) => {
      const a = source('a');
      const engine = new MergeEngine([a.input]);
      engine.start();
      a.events.next(snapshotOf(order));
      const s = await next(engine, (x) => x.ready);
      engine.stop();
      return s;
    };
    const first = await build(['x', 'y', 'z']);
    const second = await build(['z', 'x', 'y']);
    assert.equal(first.kinds.get(VS)?.version, second.kinds.get(VS)?.version);
    assert.equal(first.version, second.version);
  });

  it('keeps the version of a kind when a source re-sends identical content', async () => {
    const a = source('a');
    const engine = new MergeEngine([a.input]);
    engine.start();
    a.events.next(snapshotOf(['x', 'y'], 'r1'));
    const first = await next(engine, (s) => s.ready);
    a.events.next(snapshotOf(['x', 'y'], 'r2'));
    const second = await next(engine, (s) => s.sources[0]?.revision === 'r2');
    assert.equal(second.kinds.get(VS), first.kinds.get(VS), 'the kind snapshot object is reused');
    engine.stop();
  });

  it('keeps serving a source that goes stale, and one whose stream errors', async () => {
    const a = source('a');
    const b = source('b');
    const engine = new MergeEngine([a.input, b.input]);
    engine.start();
    a.events.next(snapshotOf(['from-a']));
    b.events.next(snapshotOf(['from-b']));
    await next(engine, (s) => s.ready && names(s).length === 2);
    a.events.next({ type: 'status', state: 'stale' });
    b.events.error(new Error('transport broke'));
    const after = await next(engine, (s) => s.sources.every((x) => x.state !== 'synced'));
    assert.deepEqual(names(after), ['from-a', 'from-b']);
    assert.equal(after.sources[1]?.state, 'stale');
    assert.match(after.sources[1]?.lastError?.message ?? '', /transport broke/);
    engine.stop();
  });

  it('reports a source that fails before its first state as failing without erroring the merge', async () => {
    const engine = new MergeEngine(
      [
        {
          descriptor: { name: 'broken', type: 'test', defaultNamespace: 'default' },
          events$: throwError(() => new Error('no route')),
        },
      ],
      { syncTimeoutMs: 10 },
    );
    engine.start();
    const s = await next(engine, (x) => x.sources[0]?.state === 'failing' && x.budgetPassed);
    assert.equal(s.ready, false, 'a required source that never synced keeps the merge not ready');
    assert.deepEqual(s.waitingFor, ['broken']);
    engine.stop();
  });

  it('folds a burst of events into one snapshot', async () => {
    const a = source('a');
    const engine = new MergeEngine([a.input]);
    engine.start();
    a.events.next(snapshotOf(['warm']));
    await next(engine, (s) => s.ready);
    const seen: ConfigSnapshot[] = [];
    const sub = engine.snapshots$.subscribe((s) => seen.push(s));
    seen.length = 0;
    for (let i = 0; i < 50; i++) a.events.next(snapshotOf([`burst-${i}`]));
    await next(engine, (s) => names(s)[0] === 'burst-49');
    sub.unsubscribe();
    assert.equal(seen.length, 1, `one snapshot for 50 events, saw ${seen.length}`);
    engine.stop();
  });

  it('lets the first source in configuration order win a key held by two sources', async () => {
    const a = source('a');
    const b = source('b');
    const engine = new MergeEngine([a.input, b.input]);
    engine.start();
    a.events.next({
      type: 'snapshot',
      resources: [fakeResource('same', { body: 'A' })],
      revision: '1',
      errors: [],
      warnings: [],
    });
    b.events.next({
      type: 'snapshot',
      resources: [fakeResource('same', { body: 'B' })],
      revision: '1',
      errors: [],
      warnings: [],
    });
    const s = await next(engine, (x) => x.ready);
    const served = s.kinds.get(VS)?.resources[0];
    assert.equal(new TextDecoder().decode(served?.body), 'A');
    engine.stop();
  });
});
