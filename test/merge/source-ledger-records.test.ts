/**
 * A ledger's record and its restoration: what a restarted (or another) replica starts from. The
 * record carries when the source last synced, what it held and the update a guard holds, kinds
 * and all; the restored ledger serves it as `restored`, stale since that sync, until its upstream
 * answers in full, and applies the held update exactly as the first ledger would have.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent } from '../../src/core/source-event.js';
import { SourceLedger } from '../../src/merge/source-ledger.js';
import type { SourceRecord } from '../../src/merge/source-record.js';
import { DEFAULT_SOURCE_POLICY } from '../../src/merge/source-rules.js';
import { fakeResource, snapshotEvent } from '../support/resources.js';

const VS = 'networking.istio.io/VirtualService';
const DR = 'networking.istio.io/DestinationRule';

function ledger(): SourceLedger {
  return new SourceLedger(
    { name: 'mesh', type: 'test', defaultNamespace: 'default', kinds: new Set([VS, DR]) },
    { ...DEFAULT_SOURCE_POLICY, settleMs: 0 },
    0,
  );
}

function snapshot(resources: ConfigResource[], revision: string, kinds?: readonly string[]): SourceEvent {
  return snapshotEvent(resources, kinds, revision);
}

const objects = (kind: string, n: number): ConfigResource[] =>
  Array.from({ length: n }, (_, i) =>
    fakeResource(`${kind.slice(kind.lastIndexOf('/') + 1)}-${i}`, { kind }),
  );

const held = (l: SourceLedger, kind: string): string[] => [...l.kind(kind).keys()].sort();

describe('SourceLedger records', () => {
  it('holds objects only while it has some', () => {
    const l = ledger();
    assert.equal(l.holdsObjects, false, 'a new ledger');
    l.apply(snapshot(objects(VS, 2), 'r1', [VS]), new Date(1_000));
    assert.equal(l.holdsObjects, true);
    l.apply(snapshot(objects(DR, 1), 'r2', [DR]), new Date(1_100));
    l.retire(new Date(1_200));
    assert.equal(l.holdsObjects, true, 'while leaving the configuration is held');
    l.release();
    assert.equal(l.holdsObjects, false, 'after leaving the configuration');
  });

  it('records when it last synced and restores as restored, stale since the restart, with the same objects', () => {
    const first = ledger();
    first.apply(snapshot([...objects(VS, 2), ...objects(DR, 1)], 'r1'), new Date(1_000));
    first.apply(
      { type: 'status', state: 'stale', error: new MeshmuxError('UNAVAILABLE', 'gone') },
      new Date(2_000),
    );
    const record = first.record(new Date(3_000));
    assert.equal(record.lastSyncMs, 1_000);
    assert.equal(record.savedMs, 3_000);
    assert.equal(record.revision, 'r1');

    const second = ledger();
    second.restore(record, new Date(4_000));
    const report = second.report();
    assert.equal(report.state, 'restored');
    assert.equal(report.revision, 'r1');
    assert.equal(report.lastSyncTime?.getTime(), 1_000);
    assert.equal(
      report.staleSince?.getTime(),
      4_000,
      'stale since the restart: the record says when its objects last changed, not when the upstream was last heard',
    );
    assert.equal(report.restoredFrom?.getTime(), 3_000);
    assert.equal(second.holdsObjects, true);
    assert.deepEqual(held(second, VS), held(first, VS));
    assert.deepEqual(held(second, DR), held(first, DR));
  });

  it('counts a never-synced record as stale since it was saved', () => {
    const first = ledger();
    first.apply(snapshot(objects(VS, 1), 'partial', [VS]), new Date(1_000));
    const record = first.record(new Date(4_000));
    assert.equal(record.lastSyncMs, undefined);
    const second = ledger();
    second.restore(record, new Date(4_000));
    assert.equal(second.report().lastSyncTime, undefined);
    assert.equal(second.report().staleSince?.getTime(), 4_000);
  });

  it('stays restored while its upstream connects, and takes the upstream’s word once it is stale or synced', () => {
    const record = (() => {
      const l = ledger();
      l.apply(snapshot(objects(VS, 1), 'r1'), new Date(1_000));
      return l.record(new Date(2_000));
    })();
    const connecting = ledger();
    connecting.restore(record, new Date(4_000));
    connecting.apply({ type: 'status', state: 'connecting' }, new Date(3_000));
    assert.equal(connecting.report().state, 'restored');
    assert.equal(connecting.report().staleSince?.getTime(), 4_000, 'still stale since the restart');

    const stale = ledger();
    stale.restore(record, new Date(4_000));
    stale.apply({ type: 'status', state: 'stale' }, new Date(3_000));
    assert.equal(stale.report().state, 'stale');

    const synced = ledger();
    synced.restore(record, new Date(4_000));
    synced.apply({ type: 'status', state: 'synced' }, new Date(3_000));
    assert.equal(synced.report().state, 'synced');
    assert.equal(synced.report().staleSince, undefined);
  });

  it('records a held update that replaces some kinds, and the restored ledger applies just those kinds', () => {
    const first = ledger();
    first.apply(snapshot([...objects(VS, 30), ...objects(DR, 10)], 'r1'), new Date(1_000));
    // VirtualServices emptied by an update that says nothing of DestinationRules: held.
    first.apply(snapshot([], 'r2', [VS]), new Date(2_000));
    const heldBefore = first.report().held;
    assert.ok(heldBefore !== undefined, 'the guard held it');
    const record: SourceRecord = first.record(new Date(3_000));
    assert.deepEqual(record.held?.kinds, [VS]);
    assert.equal(record.held?.revision, 'r2');
    assert.equal(record.held?.sinceMs, 2_000);

    const second = ledger();
    second.restore(record, new Date(4_000));
    const heldAfter = second.report().held;
    assert.deepEqual(
      [
        heldAfter?.reason,
        heldAfter?.deletions,
        heldAfter?.total,
        heldAfter?.since.getTime(),
        heldAfter?.digest,
      ],
      [heldBefore.reason, heldBefore.deletions, heldBefore.total, 2_000, heldBefore.digest],
      'the same held update, named by the same digest on every replica',
    );
    second.release();
    assert.deepEqual(held(second, VS), []);
    assert.equal(held(second, DR).length, 10, 'the kinds the update did not name stay');
  });

  it('restores a kind held as taken whole, which the upstream’s next answer for another kind does not let go', () => {
    const first = ledger();
    first.apply(snapshot([...objects(VS, 20), ...objects(DR, 3)], 'r1'), new Date(1_000));
    // A Kubernetes-like list of DestinationRules that comes back empty.
    first.apply({ ...snapshotEvent([], [DR], 'r2'), listed: new Set([DR]) }, new Date(2_000));
    assert.equal(first.report().held?.reason, 'emptied-kind');
    const record = first.record(new Date(3_000));
    const recorded = record.held;
    assert.ok(recorded !== undefined);
    assert.deepEqual(recorded.kinds, [DR]);
    assert.deepEqual([recorded.reason, recorded.emptiedKinds], ['emptied-kind', [DR]]);
    const listsVirtualServices = (n: number, at: number): SourceEvent => ({
      ...snapshotEvent(objects(VS, n), [VS], `r${at}`),
      listed: new Set([VS]),
    });
    // Restored, the restarted source lists its VirtualServices first: the kind stays held, and
    // its hold keeps its start (confirmAfter counts from it).
    const second = ledger();
    second.restore(record, new Date(4_000));
    second.apply(listsVirtualServices(20, 5_000), new Date(5_000));
    assert.equal(held(second, DR).length, 3, 'the held kind still served');
    assert.deepEqual(
      [
        second.report().held?.reason,
        second.report().held?.emptiedKinds,
        second.report().held?.since.getTime(),
      ],
      ['emptied-kind', [DR], 2_000],
    );
    // Its VirtualServices mostly gone in the first list: a hold of the whole source, from now.
    const third = ledger();
    third.restore(record, new Date(4_000));
    third.apply(listsVirtualServices(3, 5_000), new Date(5_000));
    assert.deepEqual(
      [third.report().held?.reason, third.report().held?.since.getTime()],
      ['mass-delete', 5_000],
    );
    assert.deepEqual([held(third, VS).length, held(third, DR).length], [20, 3]);
    // A record of an earlier release: a hold named `mass-delete`, no kinds; the kind stays held.
    const older = ledger();
    const { emptiedKinds: _kinds, ...earlier } = recorded;
    older.restore({ ...record, held: { ...earlier, reason: 'mass-delete' } }, new Date(4_000));
    older.apply(listsVirtualServices(20, 5_000), new Date(5_000));
    assert.equal(held(older, DR).length, 3, 'the held kind still served');
    assert.deepEqual(
      [older.report().held?.reason, older.report().held?.emptiedKinds, older.report().held?.since.getTime()],
      ['emptied-kind', [DR], 2_000],
    );
    // Its VirtualServices mostly gone in the first list: a hold of the whole source, from now.
    const olderAgain = ledger();
    olderAgain.restore({ ...record, held: { ...earlier, reason: 'mass-delete' } }, new Date(4_000));
    olderAgain.apply(listsVirtualServices(3, 5_000), new Date(5_000));
    assert.deepEqual(
      [olderAgain.report().held?.reason, olderAgain.report().held?.since.getTime()],
      ['mass-delete', 5_000],
    );
  });

  it('records a held update of the whole state without kinds, and restoring it empties every kind on release', () => {
    const first = ledger();
    first.apply(snapshot([...objects(VS, 20), ...objects(DR, 20)], 'r1'), new Date(1_000));
    first.apply(snapshot(objects(VS, 1), 'r2'), new Date(2_000));
    const record = first.record(new Date(3_000));
    assert.ok(record.held !== undefined);
    assert.equal(record.held.kinds, undefined);
    assert.equal(record.held.resources.length, 1);
    const second = ledger();
    second.restore(record, new Date(4_000));
    second.release();
    assert.deepEqual(held(second, VS), ['default/VirtualService-0']);
    assert.deepEqual(held(second, DR), []);
  });

  it('changes its record when a held update goes away because the source took it back', () => {
    const l = ledger();
    const all = [...objects(VS, 30), ...objects(DR, 10)];
    l.apply(snapshot(all, 'r1'), new Date(1_000));
    l.apply(snapshot(objects(DR, 10), 'r2'), new Date(2_000));
    assert.ok(l.report().held !== undefined);
    const whileHeld = l.recordVersion;
    // The upstream sends its old state again: nothing changes, but the held update is gone.
    assert.deepEqual(l.apply(snapshot(all, 'r1'), new Date(3_000)), []);
    assert.equal(l.report().held, undefined);
    assert.notEqual(l.recordVersion, whileHeld, 'the record to persist no longer holds the update');
    assert.equal(l.record(new Date(4_000)).held, undefined);
  });
});
