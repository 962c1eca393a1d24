import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RecordOrigin, SourceRecord } from '../../src/merge/source-record.js';
import { takenLater } from '../../src/state/open-record-store.js';

const HOUR = 3_600_000;

function taken(savedMs: number, origin?: RecordOrigin): SourceRecord {
  return {
    source: 'mesh',
    type: 'xds',
    revision: 'r',
    savedMs,
    complete: true,
    answeredKinds: [],
    resources: [],
    ...(origin === undefined ? {} : { origin }),
  };
}

const cluster = '4242';

describe("which of a replica's own record and etcd's was taken later", () => {
  it("goes by etcd's revisions across replicas, whatever their clocks say", () => {
    const mine = taken(Date.now() + HOUR, { replica: 'ahead', etcd: { cluster, revision: 10 } });
    const writtenSince = taken(Date.now(), { replica: 'writer', etcd: { cluster, revision: 14 } });
    const knownThen = taken(Date.now() + 2 * HOUR, { replica: 'writer', etcd: { cluster, revision: 10 } });
    assert.equal(takenLater(writtenSince, mine), true, 'written after the revision it knew');
    assert.equal(takenLater(knownThen, mine), false, 'the revision it knew: its own is later');
    const noneKnown = taken(Date.now() + HOUR, { replica: 'ahead', etcd: { cluster, revision: 0 } });
    assert.equal(takenLater(writtenSince, noneKnown), true, 'etcd held none of it then');
  });

  it("goes by the clock of one process, and by the clocks where etcd's order is not known", () => {
    const early = Date.now();
    const own = taken(early + 1_000, { replica: 'p', etcd: { cluster, revision: 3 } });
    const ownInEtcd = taken(early, { replica: 'p', etcd: { cluster, revision: 9 } });
    assert.equal(takenLater(ownInEtcd, own), false, "one process's clock: its folder record is later");
    const otherCluster = taken(early + 2_000, { replica: 'q', etcd: { cluster: 'rebuilt', revision: 1 } });
    assert.equal(takenLater(otherCluster, own), true, 'another cluster: the clocks');
    assert.equal(takenLater(taken(early + 2_000), taken(early)), true, 'records of earlier releases');
    assert.equal(
      takenLater(taken(early), taken(early + 2_000, { replica: 'q' })),
      false,
      'etcd never answered',
    );
  });
});
