import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { MeshmuxError } from '../../src/core/errors.js';
import {
  makeResource,
  withProvenance,
  type ConfigResource,
  type ResourceOrigin,
} from '../../src/core/resource.js';
import { Provenance, SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION } from '../../src/merge/provenance.js';
import type { HeldRecord, SourceRecord } from '../../src/merge/source-record.js';
import {
  decodeRecordChange,
  decodeStateFile,
  encodeRecordChange,
  encodeStateFile,
  STATE_HEADER_BYTES,
} from '../../src/state/state-file.js';
import { messageType } from '../../src/schema/proto-root.js';
import { fakeResource } from '../support/resources.js';

function record(count: number): SourceRecord {
  const resources = Array.from({ length: count }, (_, i) =>
    fakeResource(`r${i}`, { namespace: `ns${i % 3}`, labels: { app: `a${i}` } }),
  );
  resources.push(
    makeResource({
      kind: 'networking.istio.io/DestinationRule',
      namespace: 'shop',
      name: 'with-origin',
      labels: {},
      annotations: { 'a.example.com/x': 'y' },
      createTime: { seconds: 1_700_000_123, nanos: 456 },
      body: new Uint8Array([8, 1, 0, 255]),
      origin: { file: 'mesh/dr.yaml', doc: 0, line: 12, upstreamVersion: 'abc123' },
    }),
  );
  return {
    source: 'gitops',
    type: 'git',
    revision: 'abc123',
    lastSyncMs: 1_700_000_500_000,
    savedMs: 1_700_000_600_000,
    complete: true,
    answeredKinds: ['networking.istio.io/VirtualService'],
    resources,
    held: {
      reason: 'mass-delete',
      sinceMs: 1_700_000_550_000,
      deletions: 40,
      total: 50,
      kinds: ['networking.istio.io/VirtualService'],
      resources: [fakeResource('kept')],
      revision: 'def456',
    },
  };
}

async function fileOf(r: SourceRecord): Promise<Buffer> {
  return Buffer.concat(await encodeStateFile(r));
}

function rejects(bytes: Uint8Array, pattern: RegExp): void {
  assert.throws(
    () => decodeStateFile(bytes, 'gitops.state'),
    (err: unknown) => err instanceof MeshmuxError && err.code === 'STATE' && pattern.test(err.message),
  );
}

describe('state files', () => {
  it('read back every object with the same version, origin and creation time, and the held update', async () => {
    const original = record(5000);
    const back = decodeStateFile(await fileOf(original), 'gitops.state');
    assert.equal(back.resources.length, original.resources.length);
    [...original.resources].forEach((r, i) => {
      const b = back.resources.at(i);
      assert.ok(b !== undefined);
      assert.equal(b.version, r.version, `${r.name} keeps its content version`);
      assert.deepEqual(b.createTime, r.createTime);
      assert.deepEqual(b.origin, r.origin);
      assert.deepEqual(b.labels, r.labels);
      assert.deepEqual(b.annotations, r.annotations);
      assert.deepEqual([...b.body], [...r.body]);
    });
    assert.deepEqual(
      {
        ...back,
        resources: undefined,
        held: { ...back.held, resources: back.held?.resources.map((r) => r.version) },
      },
      {
        ...original,
        resources: undefined,
        held: { ...original.held, resources: original.held?.resources.map((r) => r.version) },
      },
    );
  });

  it('read back the rules a source ran under, each selector list present or absent as recorded', async () => {
    const rules = [
      {
        priority: -3,
        allow: { namespaces: ['team-a', 'team-a-*'] },
        deny: { kinds: [], namespaces: ['kube-system'] },
        keepOnEmpty: false,
        maxDeleteRatio: 0.25,
        minDeletes: 10,
        confirmAfterMs: 600_000,
        defaultNamespace: 'team-a',
      },
      { priority: 200, keepOnEmpty: true, maxDeleteRatio: 1, minDeletes: 10, defaultNamespace: 'default' },
    ];
    for (const r of rules) {
      const back = decodeStateFile(await fileOf({ ...record(2), rules: r }), 'gitops.state');
      assert.deepEqual(back.rules, r);
    }
    const unruled = decodeStateFile(await fileOf(record(2)), 'gitops.state');
    assert.equal(unruled.rules, undefined, 'a record of a release that recorded none');
  });

  it('read back who took the record and the revision of etcd’s record it knew, none known included', async () => {
    const origins = [
      { replica: 'meshmux-0-1', etcd: { cluster: '14841639068965178418', revision: 9_007_199_254 } },
      { replica: 'meshmux-1-1', etcd: { cluster: '14841639068965178418', revision: 0 } },
      { replica: 'meshmux-2-1' },
    ];
    for (const origin of origins) {
      const back = decodeStateFile(await fileOf({ ...record(2), origin }), 'gitops.state');
      assert.deepEqual(back.origin, origin);
    }
    const earlier = decodeStateFile(await fileOf(record(2)), 'gitops.state');
    assert.equal(earlier.origin, undefined, 'a record of a release that noted none');
  });

  it('keep objects read with their source’s provenance as the source sent them, byte for byte', async () => {
    // As the upstream sent them: one plain, one relayed by another meshmux, one naming a version.
    const sent = [
      makeResource({ ...fakeResource('plain', { namespace: 'shop' }), annotations: { note: 'x' } }),
      makeResource({
        ...fakeResource('relayed', { namespace: 'shop' }),
        annotations: { [SOURCE_ANNOTATION]: 'far-away', [SOURCE_VERSION_ANNOTATION]: 'v7' },
      }),
      makeResource({
        ...fakeResource('own-version', { namespace: 'shop' }),
        annotations: { [SOURCE_VERSION_ANNOTATION]: 'mine' },
      }),
    ];
    const asRead = sent.map((r) =>
      r.annotations[SOURCE_ANNOTATION] === undefined ? withProvenance(r, 'mesh') : r,
    );
    assert.notEqual(asRead[0]?.version, sent[0]?.version);
    const recordOf = (resources: ConfigResource[], held: ConfigResource[]): SourceRecord => ({
      ...record(0),
      source: 'mesh',
      resources,
      held: { ...(record(0).held as HeldRecord), resources: held },
    });
    // The object whose own source version the provenance replaced is kept with it: the one
    // that cannot be told apart from its provenance (the merge would not add it back the same).
    const expected = [sent[0], sent[1], asRead[2]] as ConfigResource[];
    const file = await fileOf(recordOf(asRead, asRead));
    assert.deepEqual(file, await fileOf(recordOf(expected, expected)), 'the same file, byte for byte');
    const back = decodeStateFile(file, 'mesh.state');
    assert.deepEqual(
      [...back.resources].map((r) => [r.version, r.annotations]),
      expected.map((r) => [r.version, r.annotations]),
    );
    assert.deepEqual(
      back.held?.resources.map((r) => r.version),
      expected.map((r) => r.version),
    );
    // Restored, the merge annotates the object as sent again: served as it was before the restart.
    const restored = back.resources.at(0) as ConfigResource;
    assert.deepEqual(new Provenance('mesh').annotate(restored, 'shop/plain', undefined), asRead[0]);
    // Another source's record keeps the provenance it names.
    const foreign = decodeStateFile(
      await fileOf({ ...recordOf(asRead, []), source: 'other' }),
      'other.state',
    );
    assert.equal(foreign.resources.at(0)?.version, asRead[0]?.version);
    // A change appended to the journal is written the same way.
    const { held: _held, ...unheld } = recordOf(asRead, []);
    const change = decodeRecordChange(encodeRecordChange({ record: unheld, splices: [] }), (why) =>
      assert.fail(why),
    );
    assert.deepEqual(
      [...change.record.resources].map((r) => r.version),
      expected.map((r) => r.version),
    );
  });

  it('name a kind emptied whole as a mass deletion, a reason every release reads, and the kinds held alone beside it', async () => {
    const original = record(3);
    const emptied: SourceRecord = {
      ...original,
      held: {
        ...original.held!,
        reason: 'emptied-kind',
        emptiedKinds: ['networking.istio.io/VirtualService'],
      },
    };
    const bytes = await fileOf(emptied);
    // What a release that knows no `emptied_kinds` reads: the reason on the wire.
    const wire = messageType('meshmux.state.v1.SourceRecord').decode(
      bytes.subarray(STATE_HEADER_BYTES),
    ) as unknown as {
      held: { reason: string };
    };
    assert.equal(wire.held.reason, 'mass-delete');
    const back = decodeStateFile(bytes, 'gitops.state');
    assert.deepEqual(
      [back.held?.reason, back.held?.emptiedKinds, back.held?.deletions],
      ['emptied-kind', ['networking.istio.io/VirtualService'], 40],
    );
    // A mass deletion stays one.
    assert.deepEqual(
      [decodeStateFile(await fileOf(original), 'gitops.state').held?.reason, original.held?.emptiedKinds],
      ['mass-delete', undefined],
    );
  });

  it('read back the deletion window a record keeps, and none from a record of a release that kept none', async () => {
    const deletionWindow = { startMs: 1_700_000_540_000, peak: 50_000 };
    const back = decodeStateFile(await fileOf({ ...record(2), deletionWindow }), 'gitops.state');
    assert.deepEqual(back.deletionWindow, deletionWindow);
    const { held: _held, ...plain } = record(2);
    const change = decodeRecordChange(
      encodeRecordChange({ record: { ...plain, deletionWindow }, splices: [] }),
      (why) => assert.fail(why),
    );
    assert.deepEqual(change.record.deletionWindow, deletionWindow, 'a change of the record carries it too');
    const earlier = decodeStateFile(await fileOf(record(2)), 'gitops.state');
    assert.equal(earlier.deletionWindow, undefined);
    assert.equal(earlier.held?.total, record(2).held?.total);
  });

  it('read a record without a held update or a last sync as such', async () => {
    const { held: _held, lastSyncMs: _sync, ...rest } = record(1);
    const back = decodeStateFile(await fileOf({ ...rest, complete: false }), 'gitops.state');
    assert.equal(back.held, undefined);
    assert.equal(back.lastSyncMs, undefined);
    assert.equal(back.complete, false);
  });

  it('refuse a truncated file, whatever the cut', async () => {
    const bytes = await fileOf(record(50));
    for (const cut of [0, 10, 55, 56, bytes.length - 1])
      rejects(bytes.subarray(0, cut), /not a meshmux|truncated/);
  });

  it('refuse a file with one flipped bit in its payload', async () => {
    const bytes = await fileOf(record(50));
    bytes[bytes.length - 7] = (bytes[bytes.length - 7] ?? 0) ^ 0x10;
    rejects(bytes, /checksum/);
  });

  it('refuse a foreign file and a future format version', async () => {
    rejects(
      new TextEncoder().encode('apiVersion: v1\nkind: ConfigMap\n'.repeat(4)),
      /not a meshmux state file/,
    );
    const bytes = await fileOf(record(1));
    bytes.writeUInt32BE(2, 8);
    rejects(bytes, /format version 2/);
  });

  it('read back any object as it was written: any text, numbers at their limits, every origin field', async () => {
    // Short and long, ASCII and not: the writer copies short ASCII text itself and leaves the rest to node.
    const text = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.string({ minLength: 60, maxLength: 140 }),
      fc.string({ unit: 'binary', minLength: 60, maxLength: 140 }),
    );
    // Label and annotation keys are validated names long before they are persisted: never `__proto__`.
    const map = fc
      .dictionary(
        text.filter((k) => k !== '__proto__'),
        text,
        { maxKeys: 4 },
      )
      .map((m) => ({ ...m }));
    const origin: fc.Arbitrary<ResourceOrigin> = fc.record(
      {
        // An origin's texts are absent rather than empty.
        file: text.filter((t) => t !== ''),
        doc: fc.oneof(fc.constant(0), fc.nat(), fc.integer({ min: -(2 ** 31), max: -1 })),
        line: fc.oneof(fc.constant(0), fc.nat()),
        upstreamVersion: text.filter((t) => t !== ''),
        createTimeStamped: fc.constant(true as const),
      },
      { requiredKeys: [] },
    );
    const resource = fc
      .record({
        namespace: text,
        name: text,
        labels: map,
        annotations: map,
        seconds: fc.oneof(
          fc.constant(0),
          fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
          fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER),
        ),
        nanos: fc.integer({ min: 0, max: 999_999_999 }),
        body: fc.uint8Array({ maxLength: 300 }),
        origin,
      })
      .map((f) =>
        makeResource({
          kind: 'networking.istio.io/ServiceEntry',
          namespace: f.namespace,
          name: f.name,
          labels: f.labels,
          annotations: f.annotations,
          createTime: { seconds: f.seconds, nanos: f.nanos },
          body: f.body,
          origin: { ...f.origin },
        }),
      );
    await fc.assert(
      fc.asyncProperty(fc.array(resource, { maxLength: 30 }), async (resources) => {
        const { held: _held, ...rest } = record(0);
        const back = decodeStateFile(await fileOf({ ...rest, resources }), 'gitops.state');
        assert.deepEqual(
          [...back.resources].map((r) => ({ ...r, body: [...r.body] })),
          resources.map((r) => ({ ...r, body: [...r.body] })),
        );
      }),
      { numRuns: 200 },
    );
  });
});
