import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { distinctUntilChanged, filter, firstValueFrom, map, type Observable, Subject } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import type { SourceRecord, SourceRecordStore } from '../../src/merge/source-record.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';
const SE = 'networking.istio.io/ServiceEntry';
const KINDS = [VS, DR, SE];

function objects(kind: string, count: number, prefix = kind.slice(kind.indexOf('/') + 1).toLowerCase()) {
  return Array.from({ length: count }, (_, i) => fakeResource(`${prefix}-${i}`, { kind }));
}

/** One upstream response per kind, as xDS upstreams answer. */
function kindState(kind: string, resources: readonly ConfigResource[], revision = 'r'): SourceEvent {
  return { type: 'snapshot', kinds: new Set([kind]), resources, revision, errors: [], warnings: [] };
}

/** Served object count per kind, then each source's state initial and `H` when it holds an update. */
function describeSnapshot(s: ConfigSnapshot): string {
  const counts = KINDS.map((k) => s.kinds.get(k)?.resources.length ?? 0).join(',');
  const initial = { connecting: 'C', restored: 'R', synced: 'S', stale: 'T', failing: 'F' } as const;
  return `${s.ready ? '' : '!'}${counts}/${s.sources.map((x) => `${initial[x.state]}${x.held ? 'H' : ''}`).join('')}`;
}

/** What istiods and operators would see change: repeated descriptions are one. */
function seen(snapshots$: Observable<ConfigSnapshot>): Observable<string> {
  return snapshots$.pipe(map(describeSnapshot), distinctUntilChanged());
}

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => assert.deepEqual(actual, expected));
}

const descriptor = { name: 'mesh', type: 'xds', defaultNamespace: 'default', kinds: new Set(KINDS) };

describe('guards over the whole source, in virtual time', () => {
  it('holds an upstream emptied one kind at a time as one update, deleting nothing', () => {
    scheduler().run(({ hot, expectObservable }) => {
      // Synced with 5 + 5 + 5 objects, then one empty response per kind, 100 ms apart.
      const events = hot<SourceEvent>('-a 99ms b 99ms c 99ms d', {
        a: {
          type: 'snapshot',
          kinds: new Set(KINDS),
          resources: [...objects(VS, 5), ...objects(DR, 5), ...objects(SE, 5)],
          revision: 'r1',
          errors: [],
          warnings: [],
        },
        b: kindState(VS, []),
        c: kindState(DR, []),
        d: kindState(SE, []),
      });
      const engine = new MergeEngine([{ descriptor, events$: events, policy: { settleMs: 1000 } }], {
        syncTimeoutMs: 10_000,
      });
      engine.start();
      // Nothing changes while the update settles; 1 s after the first empty kind it is held whole.
      expectObservable(seen(engine.snapshots$), '^ 3000ms !').toBe('ab 1099ms c', {
        a: '!0,0,0/C',
        b: '5,5,5/S',
        c: '5,5,5/SH',
      });
    });
  });

  for (const [count, after, verdict] of [
    [1, '0,10,10/S', 'applies the deletion of a kind’s last object'],
    [2, '2,10,10/SH', 'holds a kind taken whole'],
  ] as const) {
    it(`${verdict} once it has settled`, () => {
      scheduler().run(({ hot, expectObservable }) => {
        const events = hot<SourceEvent>('-a 99ms b', {
          a: {
            type: 'snapshot',
            kinds: new Set(KINDS),
            resources: [...objects(VS, count), ...objects(DR, 10), ...objects(SE, 10)],
            revision: 'r1',
            errors: [],
            warnings: [],
          },
          b: kindState(VS, []),
        });
        const engine = new MergeEngine([{ descriptor, events$: events, policy: { settleMs: 500 } }]);
        engine.start();
        expectObservable(seen(engine.snapshots$), '^ 2000ms !').toBe('ab 599ms c', {
          a: '!0,0,0/C',
          b: `${count},10,10/S`,
          c: after,
        });
      });
    });
  }

  it('applies a deletion of a few objects at once, with no settling', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const events = hot<SourceEvent>('-a 9ms b', {
        a: kindState(VS, objects(VS, 20)),
        b: kindState(VS, objects(VS, 18)),
      });
      const engine = new MergeEngine([
        { descriptor: { ...descriptor, kinds: new Set([VS]) }, events$: events, policy: { settleMs: 500 } },
      ]);
      engine.start();
      expectObservable(seen(engine.snapshots$), '^ 1000ms !').toBe('ab 9ms c', {
        a: '!0,0,0/C',
        b: '20,0,0/S',
        c: '18,0,0/S',
      });
    });
  });

  it('applies a held update after confirmAfter, counted from when it was first held', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const events = hot<SourceEvent>('-a 9ms b 99ms c', {
        a: kindState(VS, objects(VS, 30)),
        b: kindState(VS, []),
        c: kindState(VS, objects(VS, 2)),
      });
      const engine = new MergeEngine([
        {
          descriptor: { ...descriptor, kinds: new Set([VS]) },
          events$: events,
          policy: { settleMs: 0, confirmAfterMs: 1000 },
        },
      ]);
      engine.start();
      // Held at 11 ms (empty), still held at 111 ms (mass delete), applied at 1011 ms: 2 objects.
      expectObservable(seen(engine.snapshots$), '^ 2000ms !').toBe('ab 9ms c 999ms d', {
        a: '!0,0,0/C',
        b: '30,0,0/S',
        c: '30,0,0/SH',
        d: '2,0,0/S',
      });
    });
  });

  it('counts confirmAfter anew when kinds held alone give way to a hold of the whole source', () => {
    scheduler().run(({ hot, expectObservable }) => {
      // 30 VirtualServices and 3 DestinationRules; the DestinationRules answered empty at 10 ms
      // (held alone), then at 990 ms 27 of the VirtualServices deleted (held whole).
      const events = hot<SourceEvent>('a 9ms b 979ms c', {
        a: {
          type: 'snapshot',
          kinds: new Set(KINDS),
          resources: [...objects(VS, 30), ...objects(DR, 3)],
          revision: 'r1',
          errors: [],
          warnings: [],
        },
        b: kindState(DR, []),
        c: kindState(VS, objects(VS, 3)),
      });
      const engine = new MergeEngine([
        { descriptor, events$: events, policy: { settleMs: 0, confirmAfterMs: 1000 } },
      ]);
      engine.start();
      // Applied a second after the whole source was held (1990 ms), not 1 s after the kind was.
      expectObservable(seen(engine.snapshots$), '^ 2500ms !').toBe('(za) 6ms b 1979ms c', {
        z: '!0,0,0/C',
        a: '30,3,0/S',
        b: '30,3,0/SH',
        c: '3,0,0/S',
      });
    });
  });

  it('drops a stale source past maxStale, and never before', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const events = hot<SourceEvent>('-a 9ms b', {
        a: kindState(VS, objects(VS, 3)),
        b: { type: 'status', state: 'stale' },
      });
      const engine = new MergeEngine([
        { descriptor: { ...descriptor, kinds: new Set([VS]) }, events$: events, policy: { maxStaleMs: 500 } },
      ]);
      engine.start();
      expectObservable(seen(engine.snapshots$), '^ 1000ms !').toBe('ab 9ms c 499ms d', {
        a: '!0,0,0/C',
        b: '3,0,0/S',
        c: '3,0,0/T',
        d: '0,0,0/T',
      });
    });
  });
});

/** A store that keeps the latest record of each source in memory. */
class MemoryStore implements SourceRecordStore {
  readonly latest = new Map<string, () => SourceRecord>();
  changed(source: string, read: () => SourceRecord): void {
    this.latest.set(source, read);
  }
  removed(source: string): void {
    this.latest.delete(source);
  }
}

describe('a restart from persisted records', () => {
  function firstRun(): SourceRecord {
    const store = new MemoryStore();
    scheduler().run(({ hot }) => {
      const events = hot<SourceEvent>('-a', {
        a: {
          type: 'snapshot',
          kinds: new Set(KINDS),
          resources: [...objects(VS, 4), ...objects(DR, 3), ...objects(SE, 2)],
          revision: 'v1',
          errors: [],
          warnings: [],
        },
      });
      new MergeEngine([{ descriptor, events$: events }], { store }).start();
    });
    const read = store.latest.get('mesh');
    assert.ok(read !== undefined, 'the first run recorded the source');
    return read();
  }

  it('serves the persisted objects before the upstream says anything, as restored and ready', () => {
    const record = firstRun();
    assert.equal(record.complete, true);
    scheduler().run(({ hot, expectObservable }) => {
      const silent = hot<SourceEvent>('-a', { a: { type: 'status', state: 'failing' } });
      const engine = new MergeEngine([{ descriptor, events$: silent }], {
        restored: new Map([['mesh', record]]),
        syncTimeoutMs: 100,
      });
      engine.start();
      // A failing upstream and the startup budget leave the restored state as it is.
      expectObservable(seen(engine.snapshots$), '^ 1000ms !').toBe('a', { a: '4,3,2/R' });
    });
  });

  it('holds an upstream that comes back empty after the restart, and applies one that comes back changed', () => {
    const record = firstRun();
    scheduler().run(({ hot, expectObservable }) => {
      const empty = hot<SourceEvent>('-a', {
        a: {
          type: 'snapshot',
          kinds: new Set(KINDS),
          resources: [],
          revision: 'v0',
          errors: [],
          warnings: [],
        },
      });
      const changed = hot<SourceEvent>('-a', {
        a: {
          type: 'snapshot',
          kinds: new Set(KINDS),
          resources: [...objects(VS, 5), ...objects(DR, 3), ...objects(SE, 2)],
          revision: 'v2',
          errors: [],
          warnings: [],
        },
      });
      const one = new MergeEngine([{ descriptor, events$: empty }], {
        restored: new Map([['mesh', record]]),
      });
      const two = new MergeEngine([{ descriptor, events$: changed }], {
        restored: new Map([['mesh', record]]),
      });
      one.start();
      two.start();
      // Synced with an empty upstream at 1 ms, held whole once the update settled.
      expectObservable(seen(one.snapshots$), '^ 3000ms !').toBe('ab 999ms c', {
        a: '4,3,2/R',
        b: '4,3,2/S',
        c: '4,3,2/SH',
      });
      expectObservable(seen(two.snapshots$), '^ 3000ms !').toBe('ab', {
        a: '4,3,2/R',
        b: '5,3,2/S',
      });
    });
  });

  it('does not bring back after a restart what maxStale dropped', () => {
    const store = new MemoryStore();
    scheduler().run(({ hot }) => {
      const events = hot<SourceEvent>('-a 9ms b', {
        a: kindState(VS, objects(VS, 3)),
        b: { type: 'status', state: 'stale' },
      });
      new MergeEngine(
        [
          {
            descriptor: { ...descriptor, kinds: new Set([VS]) },
            events$: events,
            policy: { maxStaleMs: 100 },
          },
        ],
        { store },
      ).start();
    });
    const record = store.latest.get('mesh')?.();
    assert.ok(record !== undefined, 'the drop was recorded');
    assert.deepEqual([...record.resources], []);
  });

  it('keeps a held update across a restart, with the time it was first held', () => {
    const store = new MemoryStore();
    scheduler().run(({ hot }) => {
      const events = hot<SourceEvent>('-a 9ms b', {
        a: kindState(VS, objects(VS, 30)),
        b: kindState(VS, []),
      });
      const engine = new MergeEngine(
        [{ descriptor: { ...descriptor, kinds: new Set([VS]) }, events$: events, policy: { settleMs: 0 } }],
        { store },
      );
      engine.start();
    });
    const record = store.latest.get('mesh')?.();
    assert.equal(record?.held?.reason, 'empty');
    assert.equal(record?.held?.sinceMs, 11);
    scheduler().run(({ hot, expectObservable }) => {
      const engine = new MergeEngine(
        [
          {
            descriptor: { ...descriptor, kinds: new Set([VS]) },
            events$: hot<SourceEvent>(''),
            policy: { confirmAfterMs: 1000 },
          },
        ],
        { restored: new Map([['mesh', record]]) },
      );
      engine.start();
      // Held since 11 ms of the first run: 1000 ms later the held (empty) state applies.
      expectObservable(seen(engine.snapshots$), '^ 2000ms !').toBe('a 1010ms b', {
        a: '30,0,0/RH',
        b: '0,0,0/R',
      });
    });
  });
});

describe('what the merge hands to its store', () => {
  it('hands over a change, and nothing for a source re-sending what it holds', () => {
    const calls: string[] = [];
    const store: SourceRecordStore = {
      changed: (source, read) => void calls.push(`${source}:${read().resources.length}`),
      removed: () => undefined,
    };
    // Sources re-send unchanged objects as the same instances (their readers cache them).
    const three = objects(VS, 3);
    const four = objects(VS, 4);
    scheduler().run(({ hot }) => {
      const events = hot<SourceEvent>('-a-b-c-d', {
        a: kindState(VS, three, 'r1'),
        b: kindState(VS, three, 'r2'),
        c: kindState(VS, four, 'r3'),
        d: kindState(VS, four, 'r4'),
      });
      new MergeEngine([{ descriptor: { ...descriptor, kinds: new Set([VS]) }, events$: events }], {
        store,
      }).start();
    });
    assert.deepEqual(calls, ['mesh:3', 'mesh:4']);
  });

  it('serves a change once the store has kept it', async () => {
    let keep = (): void => undefined;
    const store: SourceRecordStore = {
      changed: () => new Promise<void>((resolve) => (keep = resolve)),
      removed: () => undefined,
    };
    const events = new Subject<SourceEvent>();
    const engine = new MergeEngine(
      [{ descriptor: { ...descriptor, kinds: new Set([VS]) }, events$: events }],
      // A bound no run of this test reaches.
      { store, keepWaitMs: 600_000 },
    );
    const served: string[] = [];
    const subscription = engine.snapshots$.pipe(map(describeSnapshot)).subscribe((d) => served.push(d));
    try {
      engine.start();
      events.next(kindState(VS, objects(VS, 3), 'r1'));
      // Turns of the event loop after the change: published then, it would be seen by now.
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      assert.ok(!served.includes('3,0,0/S'), served.join(' '));
      keep();
      await firstValueFrom(
        engine.snapshots$.pipe(filter((snapshot) => describeSnapshot(snapshot) === '3,0,0/S')),
      );
    } finally {
      subscription.unsubscribe();
    }
  });

  it('serves a change the store has not kept after keepWaitMs, and counts it', () => {
    let unkept = 0;
    scheduler().run(({ hot, expectObservable }) => {
      const events = hot<SourceEvent>('-a', { a: kindState(VS, objects(VS, 3), 'r1') });
      const engine = new MergeEngine(
        [{ descriptor: { ...descriptor, kinds: new Set([VS]) }, events$: events }],
        {
          store: { changed: () => new Promise<void>(() => undefined), removed: () => undefined },
          keepWaitMs: 100,
        },
        { onServedUnkept: () => unkept++ },
      );
      engine.start();
      expectObservable(seen(engine.snapshots$)).toBe('a 100ms b', { a: '!0,0,0/C', b: '3,0,0/S' });
    });
    // The change, and the snapshot the startup budget's end publishes: both before the store kept it.
    assert.equal(unkept, 2);
  });
});
