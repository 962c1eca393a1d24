/**
 * One source's ledger on its own: what it reports about the source, how a change of its rules
 * re-admits what it last sent, and what leaving the configuration withdraws.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChunkedList } from '../../src/core/chunked-list.js';
import { MeshmuxError } from '../../src/core/errors.js';
import { makeResource, type ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent, SourceSnapshotEvent } from '../../src/core/source-event.js';
import { SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION, SourceLedger } from '../../src/merge/source-ledger.js';
import { DEFAULT_SOURCE_POLICY, type SourcePolicy } from '../../src/merge/source-rules.js';
import { fakeResource } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';

function ledger(policy: Partial<SourcePolicy> = {}, kinds?: readonly string[]): SourceLedger {
  return new SourceLedger(
    {
      name: 'src',
      type: 'test',
      defaultNamespace: 'default',
      ...(kinds === undefined ? {} : { kinds: new Set(kinds) }),
    },
    // Updates judged as they arrive; the settle window is covered in durable-guards.test.ts.
    { ...DEFAULT_SOURCE_POLICY, settleMs: 0, ...policy },
    0,
  );
}

function state(...resources: ReturnType<typeof fakeResource>[]): SourceSnapshotEvent {
  return {
    type: 'snapshot',
    resources,
    revision: resources.map((r) => r.name).join(','),
    errors: [],
    warnings: [],
  };
}

const names = (l: SourceLedger, kind: string): string[] => [...l.kind(kind).keys()].sort();

describe('SourceLedger', () => {
  it('reports no sync, error or staleness before the first event, and an empty revision', () => {
    const r = ledger().report();
    assert.equal(r.state, 'connecting');
    assert.equal(r.everSynced, false);
    assert.equal(r.revision, '');
    assert.deepEqual(
      [r.lastSyncTime, r.lastError, r.staleSince, r.held],
      [undefined, undefined, undefined, undefined],
    );
    assert.deepEqual([r.errors, r.warnings, r.rejections], [[], [], []]);
  });

  it('keeps the last error across statuses without one, and reports when it synced and since when it is stale', () => {
    const l = ledger();
    l.apply(state(fakeResource('a')), new Date(1_000));
    const error = new MeshmuxError('UNAVAILABLE', 'connection refused', { file: 'upstream' });
    l.apply({ type: 'status', state: 'stale', error }, new Date(2_000));
    l.apply({ type: 'status', state: 'failing' }, new Date(3_000));
    const r = l.report();
    assert.equal(r.lastError, error, 'a status without an error keeps the last one');
    assert.equal(r.lastSyncTime?.getTime(), 1_000);
    assert.equal(r.staleSince?.getTime(), 2_000, 'stale since the first of the stale and failing statuses');
    assert.equal(r.state, 'failing');
    l.apply({ type: 'status', state: 'connecting' }, new Date(4_000));
    assert.equal(l.report().staleSince, undefined, 'no longer stale');
  });

  it('passes through an object another meshmux already annotated, keeping its provenance', () => {
    const l = ledger();
    const relayed = makeResource({
      kind: VS,
      namespace: 'default',
      name: 'far',
      labels: {},
      annotations: { [SOURCE_ANNOTATION]: 'origin', [SOURCE_VERSION_ANNOTATION]: 'v7' },
      createTime: { seconds: 1, nanos: 0 },
      body: new TextEncoder().encode('far'),
      origin: {},
    });
    l.apply(state(relayed, fakeResource('near')), new Date(0));
    assert.equal(l.kind(VS).get('default/far'), relayed, 'served as received');
    assert.equal(l.kind(VS).get('default/near')?.annotations[SOURCE_ANNOTATION], 'src');
  });

  it('names a new upstream version of an object as its source version', () => {
    const l = ledger();
    const base = {
      kind: VS,
      namespace: 'default',
      name: 'a',
      labels: {},
      annotations: {},
      createTime: { seconds: 1, nanos: 0 },
      body: new TextEncoder().encode('a'),
    };
    l.apply(state(makeResource({ ...base, origin: { upstreamVersion: 'u1' } })), new Date(0));
    assert.equal(l.kind(VS).get('default/a')?.annotations[SOURCE_VERSION_ANNOTATION], 'u1');
    l.apply(state(makeResource({ ...base, origin: { upstreamVersion: 'u2' } })), new Date(1));
    assert.equal(l.kind(VS).get('default/a')?.annotations[SOURCE_VERSION_ANNOTATION], 'u2');
    l.apply(
      state(
        makeResource({ ...base, createTime: { seconds: 2, nanos: 0 }, origin: { upstreamVersion: 'u2' } }),
      ),
      new Date(2),
    );
    assert.equal(l.kind(VS).get('default/a')?.createTime.seconds, 2, 'a new creation time is served');
  });

  it('re-admits what the source last sent when its rules change, without waiting for the source', () => {
    const l = ledger({ deny: { namespaces: ['secret'] } });
    l.apply(
      state(fakeResource('a'), fakeResource('s', { namespace: 'secret' }), fakeResource('d', { kind: DR })),
      new Date(0),
    );
    assert.deepEqual(names(l, VS), ['default/a']);
    const widened = l.setPolicy({ ...DEFAULT_SOURCE_POLICY }, new Date(0));
    assert.deepEqual(
      widened.map((c) => c.kind),
      [VS],
      'only the kind whose admitted objects changed',
    );
    assert.deepEqual(names(l, VS), ['default/a', 'secret/s']);
    const narrowed = l.setPolicy(
      { ...DEFAULT_SOURCE_POLICY, deny: { kinds: ['DestinationRule'] } },
      new Date(0),
    );
    assert.deepEqual(
      narrowed.map((c) => c.kind),
      [DR],
    );
    assert.deepEqual(names(l, DR), []);
    assert.equal(l.report().rejections.length, 1, 'the denied object is listed as rejected');
    assert.equal(l.lastRevision, 'a,s,d', 'the revision stays the source’s');
  });

  it('withdraws every object when the source leaves the configuration, and forgets what it sent', () => {
    const l = ledger({ keepOnEmpty: false });
    l.apply(state(fakeResource('a'), fakeResource('d', { kind: DR })), new Date(0));
    assert.deepEqual([...l.entries()].map(([k, s]) => [k, s.size]).sort(), [
      [DR, 1],
      [VS, 1],
    ]);
    const changes = l.retire(new Date(1));
    assert.equal(l.heldUpdate, undefined, 'two objects, and an empty state not kept: not held');
    assert.deepEqual(changes.map((c) => [c.kind, c.before.size, c.after.size]).sort(), [
      [DR, 1, 0],
      [VS, 1, 0],
    ]);
    assert.deepEqual([...l.entries()], []);
    assert.deepEqual(l.setPolicy({ ...DEFAULT_SOURCE_POLICY }, new Date(0)), [], 'nothing left to re-admit');
    // Not held as an empty state afterwards: the source has nothing.
    l.apply(state(), new Date(1));
    assert.equal(l.heldUpdate, undefined);
  });

  it('holds access rules that would withdraw more than its guards allow, applying the rest of the policy', () => {
    const team = (n: number, ns = 'team-a') =>
      Array.from({ length: n }, (_, i) => fakeResource(`v${i}`, { namespace: ns }));
    const l = ledger({ allow: { namespaces: ['team-a*'] } });
    l.apply(state(...team(20), fakeResource('other', { namespace: 'team-b' })), new Date(0));
    assert.equal(l.kind(VS).size, 20);
    // A typo: `tema-a*` admits none of them.
    const typo = { ...DEFAULT_SOURCE_POLICY, settleMs: 0, priority: 7, allow: { namespaces: ['tema-a*'] } };
    assert.deepEqual(l.setPolicy(typo, new Date(5)), []);
    assert.deepEqual(
      [l.heldUpdate?.reason, l.heldUpdate?.deletions, l.heldUpdate?.total, l.heldUpdate?.since],
      ['rules', 20, 20, new Date(5)],
    );
    assert.equal(l.kind(VS).size, 20, 'still served under the rules in force');
    assert.equal(l.policy.priority, 7, 'the rest of the policy applies');
    assert.deepEqual(l.policy.allow, { namespaces: ['team-a*'] });
    // The source goes on, under the rules in force.
    l.apply(state(...team(21)), new Date(6));
    assert.equal(l.kind(VS).size, 21);
    // The same edit again keeps its time; the old rules again drop the hold.
    l.setPolicy(typo, new Date(9));
    assert.deepEqual(l.heldUpdate?.since, new Date(5));
    l.setPolicy({ ...typo, allow: { namespaces: ['team-a*'] } }, new Date(10));
    assert.equal(l.heldUpdate, undefined);
    assert.equal(l.kind(VS).size, 21);
    // Held again, then released: applied.
    l.setPolicy(typo, new Date(11));
    const changes = l.release();
    assert.deepEqual(
      changes.map((c) => [c.kind, c.before.size, c.after.size]),
      [[VS, 21, 0]],
    );
    assert.deepEqual(l.policy.allow, { namespaces: ['tema-a*'] });
    assert.equal(l.heldUpdate, undefined);

    // Narrowing that withdraws no more than the guards allow applies at once.
    const small = ledger();
    small.apply(state(...team(20), ...team(5, 'team-b')), new Date(0));
    small.setPolicy({ ...DEFAULT_SOURCE_POLICY, deny: { namespaces: ['team-b'] } }, new Date(1));
    assert.equal(small.heldUpdate, undefined);
    assert.equal(small.kind(VS).size, 20);
  });

  it('holds leaving the configuration as its guards would hold an empty state, until released or configured again', () => {
    const kept = ledger();
    kept.apply(state(fakeResource('a'), fakeResource('d', { kind: DR })), new Date(0));
    assert.deepEqual(kept.retire(new Date(5)), [], 'nothing withdrawn');
    assert.equal(kept.retired, true);
    assert.deepEqual(
      { ...kept.heldUpdate, digest: undefined },
      { reason: 'removed', deletions: 2, total: 2, since: new Date(5), digest: undefined },
    );
    assert.deepEqual(names(kept, VS), ['default/a'], 'still served');
    const changes = kept.release();
    assert.deepEqual(changes.map((c) => [c.kind, c.before.size, c.after.size]).sort(), [
      [DR, 1, 0],
      [VS, 1, 0],
    ]);
    assert.equal(kept.heldUpdate, undefined);

    // A source deleting more than its ratio allows (11 of 11 > 10) is held even when empty states are not kept.
    const many = ledger({ keepOnEmpty: false });
    many.apply(state(...Array.from({ length: 11 }, (_, i) => fakeResource(`v${i}`))), new Date(0));
    many.retire(new Date(1));
    assert.equal(many.heldUpdate?.reason, 'removed');

    // Configured again: the removal is dropped, everything stays, and the next state is judged as usual.
    const back = ledger();
    back.apply(state(fakeResource('a'), fakeResource('b')), new Date(0));
    back.retire(new Date(1));
    back.reinstate();
    assert.equal(back.retired, false);
    assert.equal(back.heldUpdate, undefined);
    assert.deepEqual(names(back, VS), ['default/a', 'default/b']);
    back.apply(state(fakeResource('a')), new Date(2));
    assert.deepEqual(names(back, VS), ['default/a'], 'a small deletion applies at once');
  });

  describe('deletions judged over a window', () => {
    const many = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => fakeResource(`s${from + i}`));
    const minute = 60_000;

    it('holds a source worn down a few objects per update once it is past its ratio of the most it held', () => {
      const l = ledger();
      l.apply(state(...many(0, 100)), new Date(0));
      const left: number[] = [];
      for (let i = 1; i <= 10; i++) {
        l.apply(state(...many(9 * i, 100)), new Date(i * 1000));
        left.push(l.kind(VS).size);
      }
      assert.deepEqual(left, [91, 82, 73, 64, 55, 55, 55, 55, 55, 55]);
      assert.deepEqual(
        [l.heldUpdate?.reason, l.heldUpdate?.deletions, l.heldUpdate?.total],
        ['mass-delete', 90, 100],
      );
      l.release();
      assert.equal(l.kind(VS).size, 10);
      l.apply(state(...many(91, 100)), new Date(11_000));
      assert.equal(l.kind(VS).size, 9, 'judged from the confirmed state: one deletion applies at once');
    });

    it('judges each update alone with a window of 0, and a window anew once it has passed', () => {
      const alone = ledger({ deleteWindowMs: 0 });
      alone.apply(state(...many(0, 100)), new Date(0));
      for (let i = 1; i <= 10; i++) alone.apply(state(...many(9 * i, 100)), new Date(i));
      assert.equal(alone.kind(VS).size, 10);
      assert.equal(alone.heldUpdate, undefined);

      const slow = ledger();
      slow.apply(state(...many(0, 100)), new Date(0));
      for (let i = 1; i <= 10; i++) slow.apply(state(...many(9 * i, 100)), new Date(i * 11 * minute));
      assert.equal(slow.kind(VS).size, 10, 'nine every eleven minutes: each window sees one update');
      assert.equal(slow.heldUpdate, undefined);
    });

    it('never holds objects replaced by others, nor an update that deletes nothing', () => {
      const l = ledger();
      l.apply(state(...many(0, 100)), new Date(0));
      for (let i = 1; i <= 10; i++) l.apply(state(...many(9 * i, 100 + 9 * i)), new Date(i * 1000));
      assert.equal(l.kind(VS).size, 100);
      assert.equal(l.heldUpdate, undefined);

      const worn = ledger();
      worn.apply(state(...many(0, 100)), new Date(0));
      worn.apply(state(...many(9, 100)), new Date(1));
      worn.apply(state(...many(18, 100)), new Date(2));
      worn.apply(state(...many(18, 100), fakeResource('new')), new Date(3));
      assert.equal(worn.kind(VS).size, 83, 'an addition after a shrink applies at once');
    });
  });

  describe('a held wear-down', () => {
    const many = (from: number, to: number): ReturnType<typeof fakeResource>[] =>
      Array.from({ length: to - from }, (_, i) => fakeResource(`s${from + i}`));
    const minute = 60_000;
    /** A ledger worn down 9 objects per second from 100, held at the sixth update (55 served). */
    const wornDown = (policy: Partial<SourcePolicy> = {}): SourceLedger => {
      const l = ledger(policy);
      l.apply(state(...many(0, 100)), new Date(0));
      for (let i = 1; i <= 6; i++) l.apply(state(...many(9 * i, 100)), new Date(i * 1000));
      assert.deepEqual([l.heldUpdate?.deletions, l.heldUpdate?.total, l.kind(VS).size], [54, 100, 55]);
      return l;
    };
    const heldOf = (l: SourceLedger): unknown[] => [
      l.heldUpdate?.reason,
      l.heldUpdate?.deletions,
      l.heldUpdate?.total,
      l.kind(VS).size,
    ];

    it('stays held once the window has passed, later updates judged against what it held before', () => {
      const l = wornDown();
      l.apply(state(...many(54, 100)), new Date(20 * minute));
      assert.deepEqual(heldOf(l), ['mass-delete', 54, 100, 55], 'the same state, twenty minutes on');
      l.apply(state(...many(63, 100)), new Date(40 * minute));
      assert.deepEqual(heldOf(l), ['mass-delete', 63, 100, 55], 'nine more');
      // The upstream back to what is served ends the hold; the window runs again from there.
      l.apply(state(...many(45, 100)), new Date(41 * minute));
      assert.deepEqual(heldOf(l), [undefined, undefined, undefined, 55]);
      l.apply(state(...many(54, 100)), new Date(42 * minute));
      assert.deepEqual(heldOf(l), ['mass-delete', 54, 100, 55], 'worn down again within the window');
      l.apply(state(...many(45, 100)), new Date(43 * minute));
      l.apply(state(...many(54, 100)), new Date(54 * minute));
      assert.deepEqual(heldOf(l), [undefined, undefined, undefined, 46], 'a window later, nine go');
    });

    it('stays held under rules that admit the same objects, and forgets what edited rules withdraw', () => {
      const l = wornDown();
      l.setPolicy(
        { ...DEFAULT_SOURCE_POLICY, settleMs: 0, allow: { namespaces: ['default', 'billing'] } },
        new Date(7_000),
      );
      l.apply(state(...many(54, 100)), new Date(8_000));
      assert.deepEqual(heldOf(l), ['mass-delete', 54, 100, 55]);
      // Rules that withdraw 5 of the 55 served: the reference is 95, of which 48 left is 47 gone.
      const olds = Array.from({ length: 5 }, (_, i) => fakeResource(`o${i}`, { namespace: 'old' }));
      const edited = ledger();
      edited.apply(state(...many(0, 95), ...olds), new Date(0));
      for (let i = 1; i <= 6; i++) edited.apply(state(...many(9 * i, 95), ...olds), new Date(i * 1000));
      assert.deepEqual(heldOf(edited), ['mass-delete', 54, 100, 55]);
      edited.setPolicy(
        { ...DEFAULT_SOURCE_POLICY, settleMs: 0, deny: { namespaces: ['old'] } },
        new Date(7_000),
      );
      assert.equal(edited.kind(VS).size, 50);
      edited.apply(state(...many(47, 95), ...olds), new Date(8_000));
      assert.deepEqual(heldOf(edited), [undefined, undefined, undefined, 48]);
    });

    it('stays held over a record and a restore, and a wear-down across a restart is judged from its peak', () => {
      const first = wornDown();
      const restored = ledger();
      restored.restore(first.record(new Date(7_000)), new Date(8_000));
      restored.apply(state(...many(54, 100)), new Date(9_000));
      assert.deepEqual(heldOf(restored), ['mass-delete', 54, 100, 55]);
      restored.apply(state(...many(63, 100)), new Date(20 * minute));
      assert.deepEqual(heldOf(restored), ['mass-delete', 63, 100, 55]);

      const early = ledger();
      early.apply(state(...many(0, 100)), new Date(0));
      early.apply(state(...many(9, 100)), new Date(1_000));
      early.apply(state(...many(18, 100)), new Date(2_000));
      const record = early.record(new Date(3_000));
      assert.deepEqual(record.deletionWindow, { startMs: 1_000, peak: 100 });
      const later = ledger();
      later.restore(record, new Date(4_000));
      for (let i = 3; i <= 6; i++) later.apply(state(...many(9 * i, 100)), new Date(i * 1000 + 2_000));
      assert.deepEqual(heldOf(later), ['mass-delete', 54, 100, 55]);
      // A record of an earlier release keeps no window: its hold's total stands for it.
      const { deletionWindow: _window, ...earlier } = first.record(new Date(7_000));
      const old = ledger();
      old.restore(earlier, new Date(8_000));
      old.apply(state(...many(54, 100)), new Date(20 * minute));
      assert.deepEqual(heldOf(old), ['mass-delete', 54, 100, 55]);
    });
  });

  it('may contribute only the kinds it declares and its rules allow', () => {
    assert.equal(ledger({}, [VS]).mayContribute(VS), true);
    assert.equal(ledger({}, [VS]).mayContribute(DR), false, 'not a declared kind');
    assert.equal(ledger({ deny: { kinds: ['VirtualService'] } }).mayContribute(VS), false, 'denied');
    assert.equal(ledger().mayContribute(DR), true);
  });

  it('holds a listing taking every object of a kind it held several of, and lets edits and one last object go', () => {
    const vs = Array.from({ length: 12 }, (_, i) => fakeResource(`v${i}`));
    const drs = [fakeResource('d0', { kind: DR }), fakeResource('d1', { kind: DR })];
    const listing = (...resources: ReturnType<typeof fakeResource>[]): SourceEvent => ({
      ...state(...resources),
      listed: new Set([VS, DR]),
    });
    // Edits (files deleted, objects deleted on a watch) that delete a kind whole apply.
    const edited = ledger();
    edited.apply(state(...vs, ...drs), new Date(0));
    edited.apply(state(...vs), new Date(1));
    assert.equal(edited.heldUpdate, undefined);
    assert.deepEqual(names(edited, DR), []);
    const l = ledger();
    l.apply(state(...vs, ...drs), new Date(0));
    // A listing that lacks them: 2 of 14 deleted, under every count, yet every DestinationRule.
    l.apply(listing(...vs), new Date(1));
    assert.deepEqual(
      [l.heldUpdate?.reason, l.heldUpdate?.deletions, l.heldUpdate?.emptiedKinds],
      ['emptied-kind', 2, [DR]],
    );
    assert.deepEqual(names(l, DR), ['default/d0', 'default/d1'], 'still served');
    assert.deepEqual(
      l.release().map((c) => [c.kind, c.after.size]),
      [[DR, 0]],
    );
    // A kind of one object losing it is one deletion, as an edit makes.
    const one = ledger();
    one.apply(state(...vs, drs[0]!), new Date(0));
    one.apply(listing(...vs), new Date(1));
    assert.equal(one.heldUpdate, undefined);
    assert.deepEqual(names(one, DR), []);
    // `onEmpty: accept` lets it go.
    const accepting = ledger({ keepOnEmpty: false });
    accepting.apply(state(...vs, ...drs), new Date(0));
    accepting.apply(listing(...vs), new Date(1));
    assert.equal(accepting.heldUpdate, undefined);
  });

  it('holds only the kind a listing takes whole: the source’s other kinds follow their upstream meanwhile', () => {
    const vs = (body: string): ReturnType<typeof fakeResource>[] =>
      Array.from({ length: 12 }, (_, i) => fakeResource(`v${i}`, { body: i === 0 ? body : 'same' }));
    const drs = [fakeResource('d0', { kind: DR }), fakeResource('d1', { kind: DR })];
    const listing = (resources: ReturnType<typeof fakeResource>[], kinds?: string[]): SourceEvent => ({
      ...state(...resources),
      ...(kinds === undefined ? {} : { kinds: new Set(kinds) }),
      listed: new Set(kinds ?? [VS, DR]),
    });
    const body = (l: SourceLedger): string => new TextDecoder().decode(l.kind(VS).get('default/v0')?.body);
    const l = ledger();
    l.apply(state(...vs('one'), ...drs), new Date(0));
    // The whole state, its DestinationRules missing and one VirtualService edited: the edit applies.
    const changed = l.apply(listing(vs('two')), new Date(1));
    assert.deepEqual(
      changed.map((c) => c.kind),
      [VS],
    );
    assert.deepEqual([body(l), names(l, DR)], ['two', ['default/d0', 'default/d1']]);
    assert.deepEqual(
      [l.heldUpdate?.reason, l.heldUpdate?.deletions, l.heldUpdate?.total, l.heldUpdate?.since.getTime()],
      ['emptied-kind', 2, 14, 1],
    );
    const digest = l.heldUpdate?.digest;
    // Later answers for the other kind alone apply too; the hold stays as it was.
    l.apply(listing(vs('three'), [VS]), new Date(2));
    assert.deepEqual([body(l), names(l, DR).length], ['three', 2]);
    assert.deepEqual([l.heldUpdate?.since.getTime(), l.heldUpdate?.digest], [1, digest]);
    // Confirmed: only the held kind goes.
    assert.deepEqual(
      l.release().map((c) => [c.kind, c.after.size]),
      [[DR, 0]],
    );
    assert.deepEqual([body(l), names(l, VS).length], ['three', 12]);
    // Held again, then the kind answered again: the hold ends by itself.
    l.apply(state(...vs('three'), ...drs), new Date(3));
    l.apply(listing(vs('four')), new Date(4));
    assert.equal(l.heldUpdate?.reason, 'emptied-kind');
    l.apply(listing([drs[0]!], [DR]), new Date(5));
    assert.deepEqual([l.heldUpdate, body(l), names(l, DR)], [undefined, 'four', ['default/d0']]);
  });

  describe('a kind held alone', () => {
    const GW = 'networking.istio.io/Gateway';
    const PA = 'security.istio.io/PeerAuthentication';
    /** A ledger of a state-of-the-world source: every state is a listing. */
    const sotw = (kinds: string[], policy: Partial<SourcePolicy> = {}): SourceLedger =>
      new SourceLedger(
        { name: 'mesh', type: 'xds', defaultNamespace: 'default', kinds: new Set(kinds) },
        { ...DEFAULT_SOURCE_POLICY, settleMs: 0, ...policy },
        0,
      );
    const of = (kind: string, n: number, from = 0): ReturnType<typeof fakeResource>[] =>
      Array.from({ length: n }, (_, i) => fakeResource(`o${from + i}`, { kind }));
    const answer = (kind: string, resources: ReturnType<typeof fakeResource>[]): SourceEvent => ({
      ...state(...resources),
      kinds: new Set([kind]),
    });
    const sizes = (l: SourceLedger, kinds: string[]): number[] => kinds.map((k) => l.kind(k).size);

    it('holds the kinds an upstream then answers empty one by one with it, one object each or more', () => {
      const kinds = [DR, GW, PA];
      const l = sotw(kinds, { settleMs: 1_000 });
      l.apply(state(...of(DR, 3), ...of(GW, 1), ...of(PA, 1)), new Date(0));
      l.apply(answer(DR, []), new Date(10_000));
      l.settle(new Date(11_000));
      assert.deepEqual(l.heldUpdate?.emptiedKinds, [DR]);
      // The upstream restarts and answers every kind with nothing, a response per kind.
      l.apply(answer(GW, []), new Date(20_000));
      assert.deepEqual([l.heldUpdate?.reason, l.heldUpdate?.emptiedKinds], ['emptied-kind', [DR, GW]]);
      l.apply(answer(PA, []), new Date(20_010));
      assert.equal(l.heldUpdate?.reason, 'empty');
      assert.deepEqual(sizes(l, kinds), [3, 1, 1], 'nothing lost');
    });

    it('judges the rest of the source alone: a few deletions there apply, too many hold it all', () => {
      const l = sotw([VS, DR]);
      l.apply(state(...of(VS, 60), ...of(DR, 40)), new Date(0));
      l.apply(answer(DR, []), new Date(1_000));
      assert.deepEqual([l.heldUpdate?.reason, l.heldUpdate?.deletions], ['emptied-kind', 40]);
      const since = l.heldUpdate?.since.getTime();
      // 11 of 100: under the share one update may delete, though 51 with the held kind.
      l.apply(answer(VS, of(VS, 49)), new Date(2_000));
      assert.deepEqual([l.heldUpdate?.reason, l.heldUpdate?.since.getTime()], ['emptied-kind', since]);
      assert.deepEqual(sizes(l, [VS, DR]), [49, 40]);
      // 40 more of them: held, the whole of it, and from now (confirmAfter counts anew).
      l.apply(answer(VS, of(VS, 9)), new Date(3_000));
      assert.deepEqual([l.heldUpdate?.reason, l.heldUpdate?.since.getTime()], ['mass-delete', 3_000]);
      assert.deepEqual(sizes(l, [VS, DR]), [49, 40]);
    });

    it('applies an update beside the held kinds as any other, compared by identity', () => {
      const l = sotw([VS, DR]);
      const vs = of(VS, 50);
      l.apply(state(...vs, ...of(DR, 3)), new Date(0));
      l.apply(answer(DR, []), new Date(1_000));
      const digest = l.heldUpdate?.digest;
      // One VirtualService edited: the change names the one key, as the identity path finds it.
      const edited = [...vs];
      edited[7] = fakeResource('o7', { kind: VS, body: 'edited' });
      const changes = l.apply(answer(VS, edited), new Date(2_000));
      assert.deepEqual(
        changes.map((c) => [c.kind, [...(c.changed ?? ['(the whole kind)'])]]),
        [[VS, ['default/o7']]],
      );
      // Both kinds answered, the held one empty again (as a Kubernetes source sends them).
      const both: SourceEvent = {
        ...state(...edited, fakeResource('o50', { kind: VS })),
        kinds: new Set([VS, DR]),
      };
      assert.deepEqual(
        l.apply(both, new Date(3_000)).map((c) => [c.kind, [...(c.changed ?? ['(the whole kind)'])]]),
        [[VS, ['default/o50']]],
      );
      assert.deepEqual([l.heldUpdate?.digest, sizes(l, [VS, DR])], [digest, [51, 3]]);
    });

    it('lets a held kind the configuration no longer names go, as its guards allow', () => {
      const l = sotw([VS, DR]);
      l.apply(state(...of(VS, 20), ...of(DR, 5)), new Date(0));
      l.apply(answer(DR, []), new Date(1_000));
      assert.equal(l.heldUpdate?.reason, 'emptied-kind');
      l.descriptor = { ...l.descriptor, kinds: new Set([VS]) };
      assert.deepEqual(
        l.dropKinds(l.kindsLeftOut(), new Date(2_000)).map((c) => [c.kind, c.after.size]),
        [[DR, 0]],
      );
      assert.equal(l.heldUpdate, undefined);
    });

    it('forgets on confirmation only the held kinds’ deletions: the rest worn down meanwhile still counts', () => {
      const l = sotw([VS, DR]);
      l.apply(state(...of(VS, 96), ...of(DR, 4)), new Date(0));
      l.apply(answer(DR, []), new Date(1_000));
      let left = 96;
      for (let step = 1; step <= 5; step++) {
        left -= 8;
        l.apply(answer(VS, of(VS, left)), new Date(1_000 + step * 1_000));
      }
      assert.deepEqual([l.heldUpdate?.reason, sizes(l, [VS, DR])], ['emptied-kind', [56, 4]]);
      l.release();
      assert.deepEqual(sizes(l, [VS, DR]), [56, 0]);
      // 27 more within the window: 67 of the 96 it held, past half of them.
      l.apply(answer(VS, of(VS, 29)), new Date(8_000));
      assert.equal(l.heldUpdate?.reason, 'mass-delete');
      assert.equal(l.kind(VS).size, 56);
    });

    it('drops, with the rest of a whole state, what it sent of a kind its rules refuse', () => {
      const SE = 'networking.istio.io/ServiceEntry';
      const l = sotw([VS, DR, SE], { deny: { kinds: ['ServiceEntry'] } });
      l.apply(state(...of(VS, 12), ...of(DR, 2), ...of(SE, 3)), new Date(0));
      // The whole state: no DestinationRule (held) and no ServiceEntry any more.
      l.apply(state(...of(VS, 12)), new Date(1_000));
      assert.equal(l.heldUpdate?.reason, 'emptied-kind');
      l.apply(answer(DR, of(DR, 2)), new Date(2_000));
      assert.equal(l.heldUpdate, undefined);
      const recorded = l.record(new Date(3_000)).resources;
      assert.equal(
        Array.from({ length: recorded.length }, (_, i) => recorded.at(i)).filter((r) => r?.kind === SE)
          .length,
        0,
        'the ServiceEntries the upstream deleted are not recorded',
      );
    });
  });

  it('applies access rules that withdraw a kind whole, an operator’s edit', () => {
    const vs = Array.from({ length: 12 }, (_, i) => fakeResource(`v${i}`));
    const l = ledger();
    l.apply(state(...vs, fakeResource('d0', { kind: DR }), fakeResource('d1', { kind: DR })), new Date(0));
    l.setPolicy({ ...DEFAULT_SOURCE_POLICY, settleMs: 0, deny: { kinds: ['DestinationRule'] } }, new Date(1));
    assert.equal(l.report().held, undefined);
    assert.deepEqual(names(l, DR), []);
  });

  it('lets a kind the configuration no longer names go whole', () => {
    const vs = Array.from({ length: 12 }, (_, i) => fakeResource(`v${i}`));
    const drs = [fakeResource('d0', { kind: DR }), fakeResource('d1', { kind: DR })];
    const l = ledger({}, [VS, DR]);
    l.apply(state(...vs, ...drs), new Date(0));
    l.descriptor = { ...l.descriptor, kinds: new Set([VS]) };
    assert.deepEqual(
      l.dropKinds(l.kindsLeftOut(), new Date(1)).map((c) => [c.kind, c.after.size]),
      [[DR, 0]],
    );
    assert.equal(l.heldUpdate, undefined);
  });

  it('releases nothing when nothing is held, and everything held in order when confirmed', () => {
    const l = ledger();
    assert.deepEqual(l.release(), []);
    const many = Array.from({ length: 12 }, (_, i) => fakeResource(`o${i}`));
    l.apply(state(...many), new Date(0));
    l.apply(state(fakeResource('o0')), new Date(1));
    l.apply(state(fakeResource('o0'), fakeResource('n1')), new Date(2));
    assert.equal(l.heldUpdate?.reason, 'mass-delete');
    assert.equal(l.heldUpdate?.since.getTime(), 1, 'held since the first held update');
    const changes = l.release();
    assert.deepEqual(
      changes.map((c) => [c.kind, c.before.size, c.after.size]),
      [[VS, 12, 2]],
    );
    assert.deepEqual(names(l, VS), ['default/n1', 'default/o0']);
  });
  it('serves the same instances again when a rule change re-admits what it serves while an update is held', () => {
    // A source that versions its objects (git's commit) and one that does not: the object served
    // is the one a held update's objects were built beside, and a rule change must hand it back.
    for (const versioned of [true, false]) {
      const l = ledger();
      const object = (name: string, body: string, commit: string): ReturnType<typeof fakeResource> =>
        makeResource({
          ...fakeResource(name, { body }),
          origin: versioned ? { upstreamVersion: commit } : {},
        });
      l.apply(state(...Array.from({ length: 14 }, (_, i) => object(`o${i}`, 'one', 'c1'))), new Date(0));
      const served = [...l.kind(VS).values()];
      // A new commit edits o0 and deletes most objects: held, o0 still served as it was.
      l.apply(state(object('o0', 'two', 'c2'), object('o1', 'one', 'c1')), new Date(1));
      assert.equal(l.heldUpdate?.reason, 'mass-delete');
      assert.deepEqual(
        l.setPolicy({ ...DEFAULT_SOURCE_POLICY, settleMs: 0 }, new Date(0)),
        [],
        `versioned ${versioned}`,
      );
      const again = [...l.kind(VS).values()];
      assert.equal(again.length, 14);
      again.forEach((r, i) => assert.equal(r, served[i], `${r.name}, versioned ${versioned}`));
    }
  });

  it('hands out a kind as a view that fails loudly once the ledger altered that state in place', () => {
    const l = ledger();
    const [a, b, c] = [fakeResource('a'), fakeResource('b'), fakeResource('c')];
    const one = (...resources: ReturnType<typeof fakeResource>[]): SourceEvent => ({
      type: 'snapshot',
      kinds: new Set([VS]),
      resources,
      revision: resources.map((r) => r.name).join(','),
      errors: [],
      warnings: [],
    });
    const first = l.apply(one(a, b), new Date(0));
    const held = l.kind(VS);
    const [[, listed] = ['', new Map()]] = [...l.entries()];
    assert.deepEqual([...held.keys()].sort(), ['default/a', 'default/b'], 'readable before the next change');
    // The same instances and one more: found by identity and applied in place.
    const second = l.apply(one(a, b, c), new Date(1));
    assert.deepEqual([...(second[0]?.changed ?? [])], ['default/c'], 'applied in place');
    for (const [what, view] of [
      ['kind()', held],
      ['entries()', listed],
      ['the first change', first[0]?.after ?? new Map()],
    ] as const) {
      assert.throws(
        () => view.get('default/a'),
        (e: unknown) => e instanceof MeshmuxError && e.code === 'INTERNAL',
        `${what}: a read after the state was altered`,
      );
      assert.throws(() => view.size, MeshmuxError, what);
      assert.throws(() => [...view], MeshmuxError, what);
    }
    const after = second[0]?.after;
    assert.equal(after?.size, 3, 'the latest change reads the state it made');
    assert.equal(after.has('default/c'), true);
    assert.deepEqual([...after.keys()].sort(), ['default/a', 'default/b', 'default/c']);
    assert.deepEqual([...after.values()].map((r) => r.name).sort(), ['a', 'b', 'c']);
    const seen: string[] = [];
    after.forEach((r, key, map) => seen.push(`${key}=${r.name}:${map === after}`));
    assert.deepEqual(seen.sort(), ['default/a=a:true', 'default/b=b:true', 'default/c=c:true']);
    // A list the fast path leaves alone (an object defined twice) replaces the state: the
    // replaced one is never altered again, so its views still read it.
    const current = l.kind(VS);
    const third = l.apply(one(fakeResource('a'), fakeResource('a')), new Date(2));
    assert.equal(third[0]?.changed, undefined, 'replaced, not applied in place');
    assert.deepEqual([...current.keys()].sort(), ['default/a', 'default/b', 'default/c']);
    assert.deepEqual([...(third[0]?.before.keys() ?? [])].sort(), ['default/a', 'default/b', 'default/c']);
  });

  it('takes kinds sent again as the same lists, in one event, for unchanged without reading their objects', () => {
    const l = ledger();
    let reads = 0;
    // Objects that count every read of their kind: what telling two lists apart by objects does.
    const counted = (kind: string, n: number): ChunkedList<ConfigResource> =>
      ChunkedList.filtered(
        Array.from({ length: n }, (_, i) => {
          const r = fakeResource(`${kind.slice(-2)}-${String(i).padStart(4, '0')}`, { kind });
          return new Proxy(r, {
            get: (target, key) => {
              if (key === 'kind') reads++;
              return target[key as keyof ConfigResource];
            },
          });
        }),
      );
    const vs = counted(VS, 1500);
    const dr = counted(DR, 1200);
    const event = (kinds: readonly string[], resources: ChunkedList<ConfigResource>): SourceEvent => ({
      type: 'snapshot',
      kinds: new Set(kinds),
      resources,
      revision: `r${reads}`,
      errors: [],
      warnings: [],
    });
    l.apply(event([VS, DR], ChunkedList.joined([vs, dr])), new Date(0));
    reads = 0;
    assert.deepEqual(l.apply(event([VS, DR], ChunkedList.joined([vs, dr])), new Date(0)), []);
    assert.equal(reads, 0, 'the kinds admitted together kept as lists of the chunks they came in');
    // Each kind sent on its own (as a stream's changes come), then both again as they were.
    l.apply(event([VS], vs), new Date(1));
    l.apply(event([DR], dr), new Date(2));
    reads = 0;
    assert.deepEqual(l.apply(event([VS, DR], ChunkedList.joined([vs, dr])), new Date(3)), []);
    assert.equal(reads, 0, 'the lists compared by their chunks');
    // The same objects cut into other chunks: compared object by object, and unchanged too.
    assert.deepEqual(
      l.apply(event([VS, DR], ChunkedList.filtered(ChunkedList.joined([vs, dr]))), new Date(4)),
      [],
    );
    assert.ok(reads >= 2700, `${reads} reads: each object read once it is not a chunk of the lists`);
    // One object changed among the same chunks: the change is found and applied.
    const changed = vs.replaced(700, fakeResource('VS-changed', { kind: VS }));
    const [change] = l.apply(event([VS, DR], ChunkedList.joined([changed, dr])), new Date(5));
    assert.equal(change?.kind, VS);
    assert.equal(change.after.has('default/VS-changed'), true);
    assert.equal(change.after.size, 1500);
    assert.equal(l.kind(DR).size, 1200);
    // Kinds interleaved in the event's chunks: each kind's objects taken out of them, in order.
    const mixed = ChunkedList.filtered(
      [...vs].flatMap((r, i) => (i < 1200 ? [r, dr.at(i) as ConfigResource] : [r])),
    );
    const undone = l.apply(event([VS, DR], mixed), new Date(6));
    assert.deepEqual(
      undone.map((c) => c.kind),
      [VS],
      'the same DestinationRules; the changed VirtualService as it was',
    );
    assert.deepEqual([l.kind(VS).size, l.kind(DR).size], [1500, 1200]);
    assert.equal(l.kind(VS).has('default/VS-changed'), false);
    assert.deepEqual(l.apply(event([VS, DR], mixed), new Date(7)), [], 'and sent again as it was');
  });
});
