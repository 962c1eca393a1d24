/**
 * The guards between a source and what istiods receive, on virtual time: an empty state is held
 * (`onEmpty`), so is an update deleting too much at once (`maxDeleteRatio`, `minDeletes`); a held
 * update is applied after `confirmAfter` or by an operator's confirmation; a source stale past
 * `maxStale` is dropped. Every timer runs on the TestScheduler, so each boundary is exact.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { map, type Observable, queueScheduler, Subject } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import type { SourceEvent } from '../../src/core/source-event.js';
import type { ConfigSnapshot } from '../../src/merge/config-snapshot.js';
import { MergeEngine } from '../../src/merge/merge-engine.js';
import type { SourcePolicy } from '../../src/merge/source-rules.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';

/** A full state of `count` VirtualServices named `<prefix>0…`. */
function objects(count: number, prefix = 'o'): SourceEvent {
  return {
    type: 'snapshot',
    resources: Array.from({ length: count }, (_, i) => fakeResource(`${prefix}${i}`)),
    revision: `${prefix}${count}`,
    errors: [],
    warnings: [],
  };
}

const STALE: SourceEvent = { type: 'status', state: 'stale' };
const FAILING: SourceEvent = { type: 'status', state: 'failing' };

/** `<objects served>` and, when the source's update is held, `/<reason>`. */
function describeSnapshot(s: ConfigSnapshot): string {
  const served = s.kinds.get(VS)?.resources.length ?? 0;
  const held = s.sources[0]?.held;
  return `${served}${held === undefined ? '' : `/${held.reason}`}`;
}

function scheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => assert.deepEqual(actual, expected));
}

/**
 * One source `a` with `policy`, its served count as a marble; snapshots only where it changes.
 * Each update is judged as it arrives (`settleMs: 0`): the settle window has tests of its own.
 */
function served(events$: Observable<SourceEvent>, policy: Partial<SourcePolicy>): Observable<string> {
  const engine = new MergeEngine(
    [
      {
        descriptor: { name: 'a', type: 't', defaultNamespace: 'default' },
        events$,
        policy: { settleMs: 0, ...policy },
      },
    ],
    // Past every test's window: the startup budget passing publishes a snapshot of its own.
    { syncTimeoutMs: 1_000_000 },
  );
  engine.start();
  return engine.snapshots$.pipe(map(describeSnapshot));
}

describe('the onEmpty guard', () => {
  it('holds a full state that empties a source that had objects, and keeps serving them', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-e', { a: objects(3), e: objects(0) });
      expectObservable(served(a, {}), '^ 10ms !').toBe('0a-e', { 0: '0', a: '3', e: '3/empty' });
    });
  });

  it('applies the empty state with onEmpty: accept', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-e', { a: objects(3), e: objects(0) });
      expectObservable(served(a, { keepOnEmpty: false }), '^ 10ms !').toBe('0a-e', {
        0: '0',
        a: '3',
        e: '0',
      });
    });
  });

  it('does not hold an empty first state, nor an empty state of a source that had nothing', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-e-f', { e: objects(0), f: objects(0, 'p') });
      expectObservable(served(a, {}), '^ 10ms !').toBe('0e-f', { 0: '0', e: '0', f: '0' });
    });
  });

  it('lets the source recover: a non-empty state after a held empty one is applied and ends the hold', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-e-b', { a: objects(3), e: objects(0), b: objects(2, 'n') });
      expectObservable(served(a, {}), '^ 10ms !').toBe('0a-e-b', { 0: '0', a: '3', e: '3/empty', b: '2' });
    });
  });
});

describe('the mass-deletion guard (maxDeleteRatio, minDeletes)', () => {
  const cases: Array<{
    from: number;
    to: number;
    policy: Partial<SourcePolicy>;
    held: boolean;
    why: string;
  }> = [
    { from: 30, to: 14, policy: {}, held: true, why: '16 deletions > 10 and > half of 30' },
    { from: 30, to: 15, policy: {}, held: false, why: '15 deletions are not more than half of 30' },
    { from: 12, to: 2, policy: {}, held: false, why: '10 deletions are not more than minDeletes 10' },
    { from: 12, to: 1, policy: {}, held: true, why: '11 deletions > 10 and > half of 12' },
    { from: 30, to: 14, policy: { maxDeleteRatio: 0.9 }, held: false, why: '16 deletions ≤ 0.9 × 30' },
    { from: 30, to: 2, policy: { maxDeleteRatio: 0.9 }, held: true, why: '28 deletions > 0.9 × 30' },
    { from: 6, to: 2, policy: { minDeletes: 3 }, held: true, why: '4 deletions > minDeletes 3 and > 3' },
    {
      from: 6,
      to: 3,
      policy: { minDeletes: 2 },
      held: false,
      why: '3 deletions are not more than half of 6',
    },
  ];
  for (const c of cases) {
    it(`${c.held ? 'holds' : 'applies'} ${c.from} → ${c.to} objects with ${JSON.stringify(c.policy)}: ${c.why}`, () => {
      scheduler().run(({ hot, expectObservable }) => {
        const a = hot<SourceEvent>('-a-b', { a: objects(c.from), b: objects(c.to) });
        expectObservable(served(a, c.policy), '^ 10ms !').toBe('0a-b', {
          0: '0',
          a: String(c.from),
          b: c.held ? `${c.from}/mass-delete` : String(c.to),
        });
      });
    });
  }

  it('counts only deletions: replacing many objects by as many new ones is held, adding is not', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-b-c', { a: objects(12), b: objects(40), c: objects(12, 'n') });
      expectObservable(served(a, {}), '^ 10ms !').toBe('0a-b-c', {
        0: '0',
        a: '12',
        b: '40',
        c: '40/mass-delete',
      });
    });
  });
});

describe('confirmAfter', () => {
  it('applies a held update once it has persisted confirmAfter, not a moment earlier', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-b', { a: objects(12), b: objects(1) });
      expectObservable(served(a, { confirmAfterMs: 50 }), '^ 100ms !').toBe('0a-b 49ms c', {
        0: '0',
        a: '12',
        b: '12/mass-delete',
        c: '1',
      });
    });
  });

  it('counts from the first held update: a later one joins the hold without restarting the clock', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-b 16ms e', { a: objects(12), b: objects(1), e: objects(0) });
      expectObservable(served(a, { confirmAfterMs: 50 }), '^ 100ms !').toBe('0a-b 16ms e 32ms c', {
        0: '0',
        a: '12',
        b: '12/mass-delete',
        e: '12/empty',
        c: '0',
      });
    });
  });

  it('never applies a held update by itself when confirmAfter is not set', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-b', { a: objects(12), b: objects(1) });
      expectObservable(served(a, {}), '^ 10000ms !').toBe('0a-b', { 0: '0', a: '12', b: '12/mass-delete' });
    });
  });

  it('does not apply a hold that ended before the timer: the source recovered in time', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-b-r', { a: objects(12), b: objects(1), r: objects(11) });
      expectObservable(served(a, { confirmAfterMs: 50 }), '^ 100ms !').toBe('0a-b-r', {
        0: '0',
        a: '12',
        b: '12/mass-delete',
        r: '11',
      });
    });
  });
});

describe('maxStale', () => {
  it('drops the objects of a source stale for maxStale, exactly then', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-s', { a: objects(3), s: STALE });
      expectObservable(served(a, { maxStaleMs: 30 }), '^ 100ms !').toBe('0a-s 29ms d', {
        0: '0',
        a: '3',
        s: '3',
        d: '0',
      });
    });
  });

  it('counts a failing source as stale too', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-f', { a: objects(3), f: FAILING });
      expectObservable(served(a, { maxStaleMs: 30 }), '^ 100ms !').toBe('0a-f 29ms d', {
        0: '0',
        a: '3',
        f: '3',
        d: '0',
      });
    });
  });

  it('keeps a source that delivered a state again before maxStale passed', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-s 9ms b', { a: objects(3), s: STALE, b: objects(2) });
      expectObservable(served(a, { maxStaleMs: 30 }), '^ 100ms !').toBe('0a-s 9ms b', {
        0: '0',
        a: '3',
        s: '3',
        b: '2',
      });
    });
  });

  it('measures from the latest turn to stale, not from an earlier one', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-s 9ms b 9ms t', { a: objects(3), s: STALE, b: objects(2), t: STALE });
      // Stale at 3 (dropped at 33 were it not for b at 13), stale again at 23: dropped at 53.
      expectObservable(served(a, { maxStaleMs: 30 }), '^ 100ms !').toBe('0a-s 9ms b 9ms t 29ms d', {
        0: '0',
        a: '3',
        s: '3',
        b: '2',
        t: '2',
        d: '0',
      });
    });
  });

  it('never drops a stale source when maxStale is not set', () => {
    scheduler().run(({ hot, expectObservable }) => {
      const a = hot<SourceEvent>('-a-s', { a: objects(3), s: STALE });
      expectObservable(served(a, {}), '^ 100000ms !').toBe('0a-s', { 0: '0', a: '3', s: '3' });
    });
  });
});

describe('confirmation by an operator', () => {
  it('applies exactly the held update of the named source, once', () => {
    const a = new Subject<SourceEvent>();
    const b = new Subject<SourceEvent>();
    const engine = new MergeEngine(
      [
        {
          descriptor: { name: 'a', type: 't', defaultNamespace: 'default' },
          events$: a,
          policy: { settleMs: 0 },
        },
        {
          descriptor: { name: 'b', type: 't', defaultNamespace: 'default' },
          events$: b,
          policy: { settleMs: 0 },
        },
      ],
      { scheduler: queueScheduler, syncTimeoutMs: 0 },
    );
    engine.start();
    a.next(objects(12, 'a'));
    b.next(objects(12, 'b'));
    a.next(objects(1, 'a'));
    const count = (): number => engine.current().kinds.get(VS)?.resources.length ?? 0;
    assert.equal(count(), 24);
    assert.equal(engine.current().sources[0]?.held?.reason, 'mass-delete');
    assert.equal(engine.confirm('b'), false, 'b holds nothing');
    assert.equal(engine.confirm('nobody'), false, 'no such source');
    assert.equal(count(), 24);
    assert.equal(engine.confirm('a'), true);
    assert.equal(count(), 13);
    assert.equal(engine.current().sources[0]?.held, undefined);
    assert.equal(engine.confirm('a'), false, 'nothing left to confirm');
    engine.stop();
  });
});
