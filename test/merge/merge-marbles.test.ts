import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { map } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';

function state(...names: string[]): SourceEvent {
  return {
    type: 'snapshot',
    resources: names.map((n) => fakeResource(n)),
    revision: names.join(','),
    errors: [],
    warnings: [],
  };
}

/** `x,y` for served names, `!` when not ready, then each source's state initial. */
function describeSnapshot(s: ConfigSnapshot): string {
  const names = (s.kinds.get(VS)?.resources ?? []).map((r) => r.name).join(',');
  const initial = { connecting: 'C', restored: 'R', synced: 'S', stale: 'T', failing: 'F' } as const;
  return `${s.ready ? '' : '!'}${names}/${s.sources.map((x) => initial[x.state]).join('')}`;
}

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => assert.deepEqual(actual, expected));
}

describe('the merge pipeline in virtual time', () => {
  it('folds events of several sources arriving in one turn into one snapshot', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a--c', { a: state('x'), c: state('x2') });
      const b = hot<SourceEvent>('-b', { b: state('y') });
      const engine = new MergeEngine(
        [
          { descriptor: { name: 'a', type: 't', defaultNamespace: 'default' }, events$: a },
          { descriptor: { name: 'b', type: 't', defaultNamespace: 'default' }, events$: b },
        ],
        { syncTimeoutMs: 100 },
      );
      engine.start();
      expectObservable(engine.snapshots$.pipe(map(describeSnapshot)), '^ 10ms !').toBe('ab--c', {
        a: '!/CC',
        b: 'x,y/SS',
        c: 'x2,y/SS',
      });
    });
  });

  it('turns an erroring source into a stale status and keeps serving its objects', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a---', { a: state('x') });
      const b = hot<SourceEvent>('-b-#', { b: state('y') }, new Error('connection reset'));
      const engine = new MergeEngine(
        [
          { descriptor: { name: 'a', type: 't', defaultNamespace: 'default' }, events$: a },
          { descriptor: { name: 'b', type: 't', defaultNamespace: 'default' }, events$: b },
        ],
        { syncTimeoutMs: 100 },
      );
      engine.start();
      expectObservable(engine.snapshots$.pipe(map(describeSnapshot)), '^ 10ms !').toBe('ab-c', {
        a: '!/CC',
        b: 'x,y/SS',
        c: 'x,y/ST',
      });
    });
  });

  it('waits for a source marked required: false only until the startup budget passes', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a', { a: state('x') });
      const silent = hot<SourceEvent>('');
      const engine = new MergeEngine(
        [
          { descriptor: { name: 'a', type: 't', defaultNamespace: 'default' }, events$: a },
          {
            descriptor: { name: 'quiet', type: 't', defaultNamespace: 'default' },
            events$: silent,
            policy: { required: false },
          },
        ],
        { syncTimeoutMs: 5 },
      );
      engine.start();
      expectObservable(engine.snapshots$.pipe(map(describeSnapshot)), '^ 10ms !').toBe('ab---c', {
        a: '!/CC',
        b: '!x/SC',
        c: 'x/SC',
      });
    });
  });

  it('stays not ready past the startup budget while a required source never syncs', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a', { a: state('x') });
      const silent = hot<SourceEvent>('');
      const engine = new MergeEngine(
        [
          { descriptor: { name: 'a', type: 't', defaultNamespace: 'default' }, events$: a },
          { descriptor: { name: 'quiet', type: 't', defaultNamespace: 'default' }, events$: silent },
        ],
        { syncTimeoutMs: 5 },
      );
      engine.start();
      // The budget passing is published (for /ready) but serves nothing new.
      expectObservable(engine.snapshots$.pipe(map(describeSnapshot)), '^ 10ms !').toBe('ab---c', {
        a: '!/CC',
        b: '!x/SC',
        c: '!x/SC',
      });
    });
  });
});
