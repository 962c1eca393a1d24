/**
 * How a ledger admits what its source sends, kind by kind: rejections kept per kind and named in
 * full, what is remembered for a later change of rules, emptied kinds forgotten, updates that
 * empty a kind waiting for the rest of the source's update, creation times kept while an object
 * lives, and `maxStale`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConfigResource } from '../../src/core/resource.js';
import { SourceLedger } from '../../src/merge/source-ledger.js';
import { DEFAULT_SOURCE_POLICY, type SourcePolicy } from '../../src/merge/source-rules.js';
import { fakeResource, snapshotEvent, stampedObject } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';

function ledger(policy: Partial<SourcePolicy> = {}): SourceLedger {
  return new SourceLedger(
    { name: 'mesh', type: 'test', defaultNamespace: 'default', kinds: new Set([VS, DR]) },
    { ...DEFAULT_SOURCE_POLICY, settleMs: 0, ...policy },
    0,
  );
}

const snapshot = snapshotEvent;

const vs = (name: string, namespace = 'default'): ConfigResource => fakeResource(name, { namespace });
const dr = (name: string, namespace = 'default'): ConfigResource =>
  fakeResource(name, { kind: DR, namespace });
const keys = (l: SourceLedger, kind: string): string[] => [...l.kind(kind).keys()].sort();
const at = (ms: number): Date => new Date(ms);

describe('SourceLedger admission', () => {
  it('names every rejection in full, keeps those of kinds an update does not cover, and replaces the rest', () => {
    const l = ledger({ allow: { namespaces: ['shop'] } });
    l.apply(snapshot([vs('a', 'shop'), vs('b', 'other'), dr('c', 'other')]), at(1_000));
    assert.deepEqual(
      [...l.report().rejections].sort((x, y) => x.kind.localeCompare(y.kind)),
      [
        { source: 'mesh', kind: DR, namespace: 'other', name: 'c', reason: 'namespace-not-allowed' },
        { source: 'mesh', kind: VS, namespace: 'other', name: 'b', reason: 'namespace-not-allowed' },
      ],
    );
    l.apply(snapshot([dr('d', 'shop')], [DR]), at(2_000));
    assert.deepEqual(
      l.report().rejections.map((r) => `${r.kind} ${r.name}`),
      [`${VS} b`],
      "the VirtualService's rejection stays; the DestinationRule's went with the object",
    );
    l.apply(snapshot([vs('a', 'shop')]), at(3_000));
    assert.deepEqual(l.report().rejections, [], 'a full state replaces every rejection');
  });

  it('names a duplicate inside one update, and serves the later definition', () => {
    const l = ledger();
    const later = fakeResource('a', { body: 'later' });
    l.apply(snapshot([vs('a'), later]), at(1_000));
    assert.deepEqual(l.report().rejections, [
      { source: 'mesh', kind: VS, namespace: 'default', name: 'a', reason: 'duplicate-in-source' },
    ]);
    assert.deepEqual(l.kind(VS).get('default/a')?.body, later.body);
  });

  it('ignores an object of a kind the update does not cover', () => {
    const l = ledger();
    l.apply(snapshot([vs('a'), dr('stray')], [VS]), at(1_000));
    assert.deepEqual(keys(l, VS), ['default/a']);
    assert.deepEqual(keys(l, DR), []);
  });

  it('re-admits under new rules what the source last sent of every kind, and nothing a full state withdrew', () => {
    const withdrawn = ledger({ deny: { kinds: ['DestinationRule'] } });
    withdrawn.apply(snapshot([vs('a'), dr('old')]), at(1_000));
    withdrawn.apply(snapshot([vs('a')]), at(2_000));
    withdrawn.setPolicy({ ...DEFAULT_SOURCE_POLICY, settleMs: 0 }, new Date(0));
    assert.deepEqual(keys(withdrawn, DR), [], 'the DestinationRule a full state withdrew stays withdrawn');

    const partial = ledger({ deny: { kinds: ['DestinationRule'] } });
    partial.apply(snapshot([vs('a'), dr('old')]), at(1_000));
    partial.apply(snapshot([vs('b')], [VS]), at(3_000));
    partial.apply(snapshot([dr('new')], [DR]), at(4_000));
    partial.setPolicy({ ...DEFAULT_SOURCE_POLICY, settleMs: 0 }, new Date(0));
    assert.deepEqual(keys(partial, VS), ['default/b']);
    assert.deepEqual(keys(partial, DR), ['default/new']);
  });

  it('judges nothing when nothing waits, and misses no kind once a full state arrived', () => {
    const l = new SourceLedger(
      { name: 'mesh', type: 'test', defaultNamespace: 'default' },
      { ...DEFAULT_SOURCE_POLICY, settleMs: 0 },
      0,
    );
    assert.deepEqual(l.settle(at(1_000)), []);
    assert.deepEqual(l.missingKinds(), ['*'], 'any kind may come before the first state');
    l.apply(snapshot([vs('a')]), at(1_000));
    assert.deepEqual(l.missingKinds(), []);
  });

  it('forgets a kind it no longer holds, on either path', () => {
    const l = ledger();
    // A kind of one object, whose last deletion is an edit the guards let through.
    l.apply(snapshot([vs('a'), dr('c')]), at(1_000));
    l.apply(snapshot([vs('a')], [VS]), at(2_000));
    // The same instances again, then without them: the identity path applies it.
    l.apply(snapshot([], [VS]), at(3_000));
    assert.deepEqual(Object.keys(l.report().counts), [DR]);
    l.apply(snapshot([], [DR]), at(4_000));
    assert.equal(l.report().held?.reason, 'empty', 'the last object of the source is held back');
    l.release();
    assert.deepEqual(l.report().counts, {});
    assert.equal(l.holdsObjects, false);
  });

  it('hands out as "before" only objects that existed, and counts objects added on the identity path', () => {
    const l = ledger();
    const a = vs('a');
    l.apply(snapshot([a], [VS]), at(1_000));
    const changes = l.apply(snapshot([a, vs('b')], [VS]), at(2_000));
    assert.equal(changes.length, 1);
    assert.deepEqual([...(changes[0]?.before.keys() ?? [])], []);
    assert.deepEqual([...(changes[0]?.after.keys() ?? [])].sort(), ['default/a', 'default/b']);
    assert.equal(l.holdsObjects, true);
    l.apply(snapshot([vs('c')], [VS]), at(3_000));
    assert.equal(l.holdsObjects, true);
  });

  it('lets an update that empties a kind wait for the rest of the update, and applies other updates at once', () => {
    const l = ledger({ settleMs: 1_000 });
    const a = vs('a');
    l.apply(snapshot([a, vs('b'), dr('c')]), at(1_000));
    assert.equal(l.apply(snapshot([a], [VS]), at(2_000)).length, 1, 'one deletion: at once');
    assert.equal(l.settleDue, undefined);
    assert.deepEqual(l.apply(snapshot([], [DR, 'networking.istio.io/Gateway']), at(3_000)), []);
    assert.equal(l.settleDue, 4_000, 'emptying the DestinationRules waits');
    l.settle(at(4_000));
    // A full state deleting one object, and one adding an object on the identity path: at once too.
    // Restricted rules: the full admission path, not the identity one.
    const full = ledger({ settleMs: 1_000, allow: { namespaces: ['default'] } });
    const [fa, fc] = [vs('a'), dr('c')];
    full.apply(snapshot([fa, vs('b'), fc]), at(1_000));
    assert.equal(full.apply(snapshot([fa, fc]), at(2_000)).length, 1);
    assert.equal(full.settleDue, undefined);
    const growing = ledger({ settleMs: 1_000 });
    const x = vs('x');
    growing.apply(snapshot([x], [VS]), at(1_000));
    const y = vs('y');
    assert.equal(growing.apply(snapshot([x, y], [VS]), at(2_000)).length, 1);
    assert.equal(growing.apply(snapshot([x, vs('z')], [VS]), at(2_500)).length, 1, 'one out, one in');
    assert.equal(growing.settleDue, undefined);
    const m = ledger({ settleMs: 1_000 });
    m.apply(snapshot([vs('x')], [VS]), at(1_000));
    assert.equal(
      m.apply(snapshot([], [DR]), at(2_000)).length,
      0,
      'a kind empty before and after changes nothing',
    );
    assert.equal(m.settleDue, undefined, 'and does not wait');
  });

  for (const rules of ['open', 'restricted'] as const) {
    it(`keeps the creation time it stamped while the object lives, and stamps anew once it was deleted (${rules} rules)`, () => {
      // Restricted rules take the full admission path every time; open rules the identity path.
      const l = ledger(rules === 'open' ? {} : { allow: { namespaces: ['shop'] } });
      const keep = stampedObject('keep', 50);
      l.apply(snapshot([keep, stampedObject('a', 100)], [VS]), at(1_000));
      l.apply(snapshot([keep, stampedObject('a', 200, true, 'changed')], [VS]), at(2_000));
      assert.equal(l.kind(VS).get('shop/a')?.createTime.seconds, 100, 'the first time stays');
      l.apply(snapshot([keep, stampedObject('a', 250, true, 'changed again')], [VS]), at(2_500));
      assert.equal(l.kind(VS).get('shop/a')?.createTime.seconds, 100, 'and stays');
      l.apply(snapshot([keep], [VS]), at(3_000));
      l.apply(snapshot([keep, stampedObject('a', 300)], [VS]), at(4_000));
      assert.equal(l.kind(VS).get('shop/a')?.createTime.seconds, 300, 'a new object after a deletion');
    });
  }

  it('drops a stale source past maxStale, not before, and never without maxStale', () => {
    const bounded = ledger({ maxStaleMs: 5_000 });
    const unbounded = ledger();
    for (const l of [bounded, unbounded]) {
      l.apply(snapshot([vs('a')]), at(1_000));
      l.apply({ type: 'status', state: 'stale' }, at(2_000));
    }
    assert.deepEqual(bounded.expire(at(6_999)), []);
    assert.equal(bounded.holdsObjects, true);
    assert.equal(bounded.expire(at(7_000)).length, 1);
    assert.equal(bounded.holdsObjects, false);
    assert.deepEqual(unbounded.expire(at(1_000_000_000)), []);
    assert.equal(unbounded.holdsObjects, true);
  });

  it('hands out views of a kind that read like a map until the source changes, then refuse to be read', () => {
    const l = ledger();
    l.apply(snapshot([vs('a'), vs('b')], [VS]), at(1_000));
    const view = l.kind(VS);
    assert.deepEqual(
      [...view.entries()].map(([key, r]) => `${key}=${r.name}`),
      ['default/a=a', 'default/b=b'],
    );
    assert.deepEqual([...view.keys()], ['default/a', 'default/b']);
    l.apply(snapshot([vs('a'), vs('c')], [VS]), at(2_000));
    assert.throws(() => [...view.entries()], /read after the source changed it/);
  });
});
