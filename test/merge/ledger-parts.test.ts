/**
 * The parts a source's ledger is built from, each on its own: the guards' verdict on an update,
 * what a source can answer for, the identity diff of two lists, and the fold of updates that
 * have not been applied yet.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceSnapshotEvent } from '../../src/core/source-event.js';
import { diffByIdentity } from '../../src/merge/identity-diff.js';
import { SourceReadiness } from '../../src/merge/source-readiness.js';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { foldDigest, foldEvent, foldIn } from '../../src/merge/update-fold.js';
import { appliesAtOnce, type GuardRules, guardVerdict } from '../../src/merge/update-guards.js';
import { fakeResource, snapshotEvent } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';
const RULES: GuardRules = { keepOnEmpty: true, minDeletes: 2, maxDeleteRatio: 0.5, settleMs: 0 };

describe('the guards’ verdict', () => {
  const effect = (deletions: number, after: number, emptiesKind = false, emptiedKinds: string[] = []) => ({
    deletions,
    after,
    emptiesKind,
    emptiedKinds,
  });

  it('never holds an update to a source holding nothing', () => {
    assert.equal(guardVerdict(effect(0, 0), 0, RULES), undefined);
    assert.equal(appliesAtOnce(effect(5, 0, true), 0, RULES), true);
  });

  it('holds a state leaving the source empty while keepOnEmpty, naming what it would delete', () => {
    assert.deepEqual(guardVerdict(effect(1, 0), 1, RULES), { reason: 'empty', deletions: 1, total: 1 });
    assert.equal(guardVerdict(effect(1, 0), 1, { ...RULES, keepOnEmpty: false }), undefined);
  });

  it('holds an update deleting more than minDeletes and more than maxDeleteRatio of the source, and nothing less', () => {
    assert.deepEqual(guardVerdict(effect(6, 4), 10, RULES), {
      reason: 'mass-delete',
      deletions: 6,
      total: 10,
    });
    assert.equal(guardVerdict(effect(5, 5), 10, RULES), undefined, 'exactly half is not more than half');
    assert.equal(guardVerdict(effect(2, 1), 3, RULES), undefined, 'exactly minDeletes is not more');
    assert.deepEqual(guardVerdict(effect(3, 1), 4, RULES), { reason: 'mass-delete', deletions: 3, total: 4 });
  });

  it('holds an update taking a kind whole while keepOnEmpty, however few objects, naming the kinds', () => {
    assert.deepEqual(guardVerdict(effect(2, 8, true, [DR]), 10, RULES), {
      reason: 'emptied-kind',
      deletions: 2,
      total: 10,
      emptiedKinds: [DR],
    });
    assert.equal(guardVerdict(effect(2, 8, true, [DR]), 10, { ...RULES, keepOnEmpty: false }), undefined);
    assert.equal(guardVerdict(effect(1, 9, true), 10, RULES), undefined, 'a kind of one object deleted');
    assert.equal(
      guardVerdict(effect(6, 4, true, [DR]), 10, RULES)?.reason,
      'mass-delete',
      'too many deletions says so first',
    );
  });

  it('holds a listing cutting one kind by more than minDeletes and maxDeleteRatio of it, whatever share of the source', () => {
    const cut = (deletions: number, before: number) => ({
      ...effect(deletions, 100 - deletions),
      listedLosses: [{ kind: DR, deletions, before }],
    });
    assert.deepEqual(guardVerdict(cut(3, 4), 100, RULES), {
      reason: 'emptied-kind',
      deletions: 3,
      total: 100,
      emptiedKinds: [DR],
    });
    assert.deepEqual(
      guardVerdict(cut(3, 4), 100, { ...RULES, keepOnEmpty: false })?.emptiedKinds,
      [DR],
      'a cut is held whatever keepOnEmpty says, as a mass deletion is',
    );
    assert.equal(guardVerdict(cut(2, 3), 100, RULES), undefined, 'exactly minDeletes is not more');
    assert.equal(guardVerdict(cut(3, 6), 100, RULES), undefined, 'exactly half of the kind is not more');
    assert.deepEqual(
      guardVerdict({ ...cut(3, 4), emptiedKinds: [VS], listedEmpty: [VS] }, 100, RULES)?.emptiedKinds,
      [VS, DR],
      'held with the kinds taken whole',
    );
  });

  it('applies at once what deletes nothing, or no more than minDeletes without emptying a kind', () => {
    assert.equal(appliesAtOnce(effect(0, 10, true), 10, RULES), true, 'deletes nothing');
    assert.equal(appliesAtOnce(effect(2, 8), 10, RULES), true, 'minDeletes exactly');
    assert.equal(appliesAtOnce(effect(3, 7), 10, RULES), false, 'more than minDeletes');
    assert.equal(appliesAtOnce(effect(1, 9, true), 10, RULES), false, 'empties a kind');
  });
});

describe('what a source can answer for', () => {
  const record = (complete: boolean, answeredKinds: string[]): SourceRecord => ({
    source: 's',
    type: 't',
    revision: 'r',
    savedMs: 5,
    complete,
    answeredKinds,
    resources: [],
  });

  it('knows nothing at first, and misses every kind it may deliver', () => {
    const r = new SourceReadiness();
    assert.equal(r.knows(VS), false);
    assert.equal(r.complete(new Set([VS])), false);
    assert.equal(r.complete(undefined), false);
    assert.equal(r.servesAll(new Set([VS])), false);
    assert.equal(r.servesAll(undefined), false);
    assert.equal(r.restoredAt, undefined);
    assert.deepEqual(r.coverage(new Set([VS])), { complete: false, answeredKinds: [] });
  });

  it('is complete once every declared kind was answered, and says which answers were news', () => {
    const r = new SourceReadiness();
    const kinds = new Set([VS, DR]);
    assert.equal(r.answer(new Set([VS])), true);
    assert.equal(r.answer(new Set([VS])), false, 'answered before');
    assert.equal(r.knows(VS), true);
    assert.equal(r.knows(DR), false);
    assert.equal(r.complete(kinds), false);
    assert.equal(r.answer(new Set([DR])), true);
    assert.equal(r.complete(kinds), true);
    assert.equal(r.servesAll(kinds), true);
    assert.equal(r.complete(undefined), false, 'a source of any kind needs a state of every kind');
    assert.deepEqual(r.coverage(kinds), { complete: true, answeredKinds: [DR, VS] });
  });

  it('answers for every kind after a state covering all of them, once', () => {
    const r = new SourceReadiness();
    assert.equal(r.answer(undefined), true);
    assert.equal(r.answer(undefined), false);
    assert.equal(r.knows('any/Kind'), true);
    assert.equal(r.complete(undefined), true);
    assert.equal(r.servesAll(undefined), true);
  });

  it('serves what a persisted record covered until the upstream answers', () => {
    const partial = new SourceReadiness();
    partial.restoreFrom(record(false, [VS]));
    assert.equal(partial.restoredAt?.getTime(), 5);
    assert.equal(partial.knows(VS), true);
    assert.equal(partial.knows(DR), false);
    assert.equal(partial.complete(new Set([VS])), false, 'restored is not answered');
    assert.equal(partial.servesAll(new Set([VS])), true, 'but serves every declared kind');
    assert.equal(partial.servesAll(new Set([VS, DR])), false);
    assert.equal(partial.servesAll(undefined), false);
    partial.answer(new Set([DR]));
    assert.deepEqual(partial.coverage(new Set([VS, DR])), { complete: false, answeredKinds: [DR, VS] });
    const full = new SourceReadiness();
    full.restoreFrom(record(true, []));
    assert.equal(full.knows(DR), true);
    assert.equal(full.servesAll(undefined), true);
    assert.deepEqual(full.coverage(undefined), { complete: true, answeredKinds: [] });
  });
});

describe('the identity diff of two lists', () => {
  const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map((n) => fakeResource(n)) as [
    ConfigResource,
    ConfigResource,
    ConfigResource,
    ConfigResource,
    ConfigResource,
  ];
  const names = (l: readonly ConfigResource[]) => l.map((r) => r.name);
  const diff = (before: ConfigResource[], after: ConfigResource[]) => {
    const { added, vanished } = diffByIdentity(before, after);
    return { added: names(added), vanished: names(vanished) };
  };

  it('finds nothing between a list and itself, and everything against an empty list', () => {
    assert.deepEqual(diff([a, b], [a, b]), { added: [], vanished: [] });
    assert.deepEqual(diff([], [a, b]), { added: ['a', 'b'], vanished: [] });
    assert.deepEqual(diff([a, b], []), { added: [], vanished: ['a', 'b'] });
  });

  it('finds an insertion, a removal and a replacement in the middle, and at either end', () => {
    assert.deepEqual(diff([a, c], [a, b, c]), { added: ['b'], vanished: [] });
    assert.deepEqual(diff([a, b, c], [a, c]), { added: [], vanished: ['b'] });
    assert.deepEqual(diff([a, b, c], [a, d, c]), { added: ['d'], vanished: ['b'] });
    assert.deepEqual(diff([a, b], [a, b, c]), { added: ['c'], vanished: [] });
    assert.deepEqual(diff([a, b, c], [b, c]), { added: [], vanished: ['a'] });
  });

  it('compares instances, not content: an equal object re-made is a change', () => {
    assert.deepEqual(diff([a, b], [a, fakeResource('b')]), { added: ['b'], vanished: ['b'] });
  });

  it('reports a moved object as vanished and added, and finds a gap wider than its window', () => {
    // A moved object counts as vanished and added again: the ledger re-puts it under its key.
    assert.deepEqual(diff([a, b, c, d], [d, c, b, a, e]), {
      added: ['c', 'b', 'a', 'e'],
      vanished: ['a', 'b', 'c'],
    });
    const many = Array.from({ length: 40 }, (_, i) => fakeResource(`m${i}`));
    const fresh = Array.from({ length: 20 }, (_, i) => fakeResource(`n${i}`));
    const r = diffByIdentity([a, ...many, b], [a, ...fresh, ...many, b]);
    assert.deepEqual(names(r.added), names(fresh));
    assert.deepEqual(r.vanished, []);
    const s = diffByIdentity([a, ...fresh, ...many, b], [a, ...many, b]);
    assert.deepEqual(names(s.vanished), names(fresh));
    assert.deepEqual(s.added, []);
  });
});

describe('the identity diff, over generated lists', () => {
  const pool = Array.from({ length: 60 }, (_, i) => fakeResource(`p${i}`));
  /** Distinct pool indexes: a source never sends one instance twice in a list. */
  const list = fc.uniqueArray(fc.integer({ min: 0, max: pool.length - 1 }), { maxLength: 45 });
  const only = (xs: readonly ConfigResource[], not: readonly ConfigResource[]) => {
    const other = new Set(not);
    return xs.filter((x) => !other.has(x));
  };

  it('finds exactly the instances only in either list, each in its list’s order, when the common ones keep their order', () => {
    fc.assert(
      fc.property(list, fc.array(fc.boolean(), { maxLength: 60 }), list, (beforeIdx, keep, extraIdx) => {
        const before = beforeIdx.map((i) => pool[i] as ConfigResource);
        // The common instances in their order, with removals and with new instances put in between.
        const kept = before.filter((_, k) => keep[k] ?? true);
        const fresh = extraIdx.filter((i) => !beforeIdx.includes(i)).map((i) => pool[i] as ConfigResource);
        const after: ConfigResource[] = [];
        kept.forEach((r, k) => {
          if (fresh[k] !== undefined) after.push(fresh[k]);
          after.push(r);
        });
        after.push(...fresh.slice(kept.length));
        const { added, vanished } = diffByIdentity(before, after);
        assert.deepEqual(added, only(after, before));
        assert.deepEqual(vanished, only(before, after));
      }),
      { numRuns: 300 },
    );
  });

  it('accounts for every instance of both lists in any order: the earlier list, less what vanished, plus what was added, is the later one', () => {
    fc.assert(
      fc.property(list, list, (beforeIdx, afterIdx) => {
        const before = beforeIdx.map((i) => pool[i] as ConfigResource);
        const after = afterIdx.map((i) => pool[i] as ConfigResource);
        const { added, vanished } = diffByIdentity(before, after);
        for (const r of only(after, before)) assert.ok(added.includes(r), `${r.name} added`);
        for (const r of only(before, after)) assert.ok(vanished.includes(r), `${r.name} vanished`);
        assert.ok(
          added.every((r) => after.includes(r)),
          'added from the later list only',
        );
        assert.ok(
          vanished.every((r) => before.includes(r)),
          'vanished from the earlier list only',
        );
        const rebuilt = new Set([...only(before, vanished), ...added]);
        assert.deepEqual(
          [...rebuilt].sort((x, y) => x.name.localeCompare(y.name)),
          [...after].sort((x, y) => x.name.localeCompare(y.name)),
        );
      }),
      { numRuns: 300 },
    );
  });
});

describe('the fold of updates not applied yet', () => {
  const event = snapshotEvent;
  const view = (e: SourceSnapshotEvent) => ({
    kinds: e.kinds === undefined ? undefined : [...e.kinds].sort(),
    names: [...e.resources].map((r) => r.name),
    revision: e.revision,
  });

  it('keeps, per kind, the last list sent, and the latest revision and problems', () => {
    const first = foldIn(
      undefined,
      event([fakeResource('v1'), fakeResource('d1', { kind: DR })], [VS, DR], 'r1'),
    );
    const second = foldIn(first, event([fakeResource('v2')], [VS], 'r2'));
    assert.deepEqual(view(foldEvent(second)), { kinds: [DR, VS], names: ['v2', 'd1'], revision: 'r2' });
    assert.deepEqual(
      view(foldEvent(first)),
      { kinds: [DR, VS], names: ['v1', 'd1'], revision: 'r1' },
      'not altered',
    );
    assert.equal(second.full, false);
  });

  it('drops objects of kinds an event does not cover, and an emptied kind stays covered', () => {
    const f = foldIn(undefined, event([fakeResource('v1'), fakeResource('d1', { kind: DR })], [VS]));
    assert.deepEqual(view(foldEvent(f)), { kinds: [VS], names: ['v1'], revision: 'r' });
    const emptied = foldIn(f, event([], [VS]));
    assert.deepEqual(view(foldEvent(emptied)), { kinds: [VS], names: [], revision: 'r' });
  });

  it('replaces everything with a full state, and stays full after a later partial one', () => {
    const partial = foldIn(undefined, event([fakeResource('d1', { kind: DR })], [DR]));
    const full = foldIn(partial, event([fakeResource('v1')]));
    assert.equal(full.full, true);
    assert.deepEqual(view(foldEvent(full)), { kinds: undefined, names: ['v1'], revision: 'r' });
    const later = foldIn(full, event([fakeResource('d2', { kind: DR })], [DR]));
    assert.equal(later.full, true);
    assert.deepEqual(view(foldEvent(later)), { kinds: undefined, names: ['v1', 'd2'], revision: 'r' });
  });
});

describe('the digest of a held update', () => {
  const event = snapshotEvent;
  const digest = (...events: SourceSnapshotEvent[]): string =>
    foldDigest(events.reduce<ReturnType<typeof foldIn> | undefined>((f, e) => foldIn(f, e), undefined)!);
  const [a, b] = [fakeResource('a'), fakeResource('b')];

  it('is the same for the same update, whatever its order, revision or instances', () => {
    assert.equal(
      digest(event([a, b], [VS], 'r1')),
      digest(event([fakeResource('b'), fakeResource('a')], [VS], 'r2')),
    );
    assert.match(digest(event([a], [VS])), /^\S{8,}$/);
  });

  it('differs when an object, its content, a kind replaced or the whole state differ', () => {
    const base = digest(event([a, b], [VS]));
    const others = [
      digest(event([a], [VS])),
      digest(event([a, fakeResource('b', { body: 'changed' })], [VS])),
      digest(event([a, fakeResource('b', { namespace: 'other' })], [VS])),
      digest(event([a, b], [VS, DR])),
      digest(event([a, b])),
      digest(event([], [VS])),
      digest(event([], [DR])),
    ];
    assert.equal(new Set([base, ...others]).size, others.length + 1, 'every one differs');
  });
});
