import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { messageType } from '../../src/schema/proto-root.js';
import { ResponseLayout } from '../../src/upstream/xds/discovery-response.js';
import { walkedRun } from '../support/entry-runs.js';

/** Every part of a response as the layout reads it, each entry read. */
function scanDiscoveryResponse(bytes: Uint8Array): {
  versionInfo: string;
  typeUrl: string;
  nonce: string;
  resources: Array<{ typeUrl: string; value: Uint8Array }>;
} {
  const layout = new ResponseLayout(bytes);
  const resources = Array.from({ length: layout.count }, (_, i) => layout.entry(i));
  return { versionInfo: layout.versionInfo, typeUrl: layout.typeUrl, nonce: layout.nonce, resources };
}

const RESPONSE = messageType('envoy.service.discovery.v3.DiscoveryResponse');
const MCP = 'type.googleapis.com/istio.mcp.v1alpha1.Resource';

/** A field the schema does not define: every wire type, groups with nested fields included. */
const unknownField: fc.Arbitrary<Uint8Array> = fc
  .record({
    field: fc.integer({ min: 20, max: 2000 }),
    kind: fc.constantFrom('varint', 'fixed64', 'bytes', 'fixed32', 'group'),
    number: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    payload: fc.uint8Array({ maxLength: 40 }),
  })
  .map(({ field, kind, number, payload }) => {
    const w = protobuf.Writer.create();
    const lo = Number(number & 0xffffffffn) >>> 0;
    const hi = Number(number >> 32n) >>> 0;
    const long = new protobuf.util.LongBits(lo, hi);
    if (kind === 'varint') w.uint32((field << 3) | 0).uint64(long.toNumber(true));
    else if (kind === 'fixed64') w.uint32((field << 3) | 1).fixed64(long.toNumber(true));
    else if (kind === 'bytes') w.uint32((field << 3) | 2).bytes(payload);
    else if (kind === 'fixed32') w.uint32((field << 3) | 5).fixed32(lo);
    else
      w.uint32((field << 3) | 3)
        .uint32((7 << 3) | 2)
        .bytes(payload)
        .uint32((field << 3) | 4);
    return w.finish();
  });

const responseFields = fc.record({
  version_info: fc.string({ maxLength: 20 }),
  type_url: fc.constantFrom(
    '',
    'networking.istio.io/v1/ServiceEntry',
    'networking.istio.io/v1alpha3/Gateway',
  ),
  nonce: fc.string({ maxLength: 12 }),
  canary: fc.boolean(),
  resources: fc.array(
    fc.record({
      type_url: fc.constantFrom(
        MCP,
        '',
        'type.googleapis.com/istio.networking.v1alpha3.Sidecar',
        'type.googleapis.com/ü',
      ),
      value: fc.uint8Array({ maxLength: 30 }),
    }),
    { maxLength: 6 },
  ),
});

/** What the schema decoder makes of `bytes`, in the scanner's terms, or the fact that it throws. */
function decodedBySchema(bytes: Uint8Array): unknown {
  try {
    const m = RESPONSE.toObject(RESPONSE.decode(bytes), { defaults: true }) as {
      version_info: string;
      type_url: string;
      nonce: string;
      resources: Array<{ type_url: string; value: Uint8Array }>;
    };
    return {
      versionInfo: m.version_info,
      typeUrl: m.type_url,
      nonce: m.nonce,
      resources: m.resources.map((r) => [r.type_url, [...r.value]]),
    };
  } catch {
    return 'throws';
  }
}

function scanned(bytes: Uint8Array): unknown {
  try {
    const r = scanDiscoveryResponse(bytes);
    return {
      versionInfo: r.versionInfo,
      typeUrl: r.typeUrl,
      nonce: r.nonce,
      resources: r.resources.map((x) => [x.typeUrl, [...x.value]]),
    };
  } catch {
    return 'throws';
  }
}

function encoded(fields: Record<string, unknown>): Buffer {
  return Buffer.from(RESPONSE.encode(RESPONSE.fromObject(fields)).finish());
}

describe('ResponseLayout', () => {
  it('reads what the schema decoder reads, with values as views of the message', () => {
    const bytes = encoded({
      version_info: 'v7',
      resources: [
        { type_url: MCP, value: Buffer.from([1, 2, 3]) },
        { type_url: 'type.googleapis.com/other', value: Buffer.from([]) },
      ],
      canary: true,
      type_url: 'networking.istio.io/v1/ServiceEntry',
      nonce: 'n-1',
      control_plane: { identifier: 'istiod-1' },
    });
    const scanned = scanDiscoveryResponse(bytes);
    assert.equal(scanned.versionInfo, 'v7');
    assert.equal(scanned.typeUrl, 'networking.istio.io/v1/ServiceEntry');
    assert.equal(scanned.nonce, 'n-1');
    assert.deepEqual(
      scanned.resources.map((r) => [r.typeUrl, [...r.value]]),
      [
        [MCP, [1, 2, 3]],
        ['type.googleapis.com/other', []],
      ],
    );
    const first = scanned.resources[0]?.value;
    assert.equal(first?.buffer, bytes.buffer, 'no copy of the value');
  });

  it('takes the last occurrence of a string field, as proto3 does', () => {
    const bytes = Buffer.concat([encoded({ nonce: 'a' }), encoded({ nonce: 'b', version_info: 'x' })]);
    const scanned = scanDiscoveryResponse(bytes);
    assert.equal(scanned.nonce, 'b');
    assert.equal(scanned.versionInfo, 'x');
  });

  it('agrees with the schema decoder on any response, unknown fields of every wire type among its fields', () => {
    fc.assert(
      fc.property(responseFields, fc.array(unknownField, { maxLength: 4 }), (fields, extra) => {
        const bytes = Buffer.concat([encoded(fields), ...extra, ...extra.slice(0, 1)]);
        assert.deepEqual(scanned(bytes), decodedBySchema(new Uint8Array(bytes)));
      }),
      { numRuns: 300 },
    );
  });

  it('throws where the schema decoder does on every cut of a response', () => {
    fc.assert(
      fc.property(responseFields, unknownField, fc.nat(), (fields, extra, at) => {
        const whole = Buffer.concat([encoded(fields), extra]);
        const cut = new Uint8Array(whole.subarray(0, at % (whole.length + 1)));
        const expected = decodedBySchema(cut);
        assert.deepEqual(scanned(cut), expected);
      }),
      { numRuns: 500 },
    );
  });

  it('throws on truncated messages and on wrong wire types', () => {
    const bytes = encoded({ version_info: 'v1', resources: [{ type_url: MCP, value: Buffer.alloc(40) }] });
    assert.throws(() => scanDiscoveryResponse(bytes.subarray(0, bytes.length - 5)));
    // Field 2 (resources) as a varint.
    assert.throws(() => scanDiscoveryResponse(Buffer.from([0x10, 0x01])), /field 2 has wire type 0/);
    // Field 0 is never valid.
    assert.throws(() => scanDiscoveryResponse(Buffer.from([0x02, 0x00])), /field number 0/);
  });

  it('finds the entries two responses share at each end, as comparing them one by one does', () => {
    // Values from a small alphabet, so equal neighbours and repeats are common; lists long enough
    // to span several runs of the comparison.
    const value = fc.constantFrom('a', 'b', 'c', 'dd', '').map((v) => Buffer.from(v));
    const list = fc.array(value, { maxLength: 1500 });
    fc.assert(
      fc.property(list, list, fc.nat(1500), fc.string({ maxLength: 4 }), (a, b, cut, version) => {
        // b: a's entries up to a cut, some other ones, then a's from the cut (or unrelated).
        const later = [...a.slice(0, cut), ...b, ...a.slice(cut)];
        const before = new ResponseLayout(
          encoded({
            version_info: 'v0',
            nonce: 'n0',
            resources: a.map((v) => ({ type_url: MCP, value: v })),
          }),
        );
        const after = new ResponseLayout(
          encoded({
            version_info: version,
            nonce: 'n1',
            resources: later.map((v) => ({ type_url: MCP, value: v })),
          }),
        );
        const most = Math.min(before.count, after.count);
        let prefix = 0;
        while (prefix < most && after.sameEntry(prefix, before, prefix)) prefix++;
        let suffix = 0;
        while (
          suffix < most - prefix &&
          after.sameEntry(after.count - 1 - suffix, before, before.count - 1 - suffix)
        ) {
          suffix++;
        }
        assert.equal(after.commonPrefix(before, most), prefix);
        assert.equal(after.commonSuffix(before, most - prefix), suffix);
        for (let i = 0; i < prefix; i++) assert.deepEqual(after.entry(i), before.entry(i));
      }),
      { numRuns: 150 },
    );
  });

  it('tells entries apart by every byte, the type URL included', () => {
    const one = (type: string, value: number[]): ResponseLayout =>
      new ResponseLayout(encoded({ resources: [{ type_url: type, value: Buffer.from(value) }] }));
    const base = one(MCP, [1, 2, 3]);
    assert.equal(base.sameEntry(0, one(MCP, [1, 2, 3]), 0), true);
    assert.equal(base.sameEntry(0, one(MCP, [1, 2, 4]), 0), false);
    assert.equal(base.sameEntry(0, one(MCP, [1, 2]), 0), false);
    assert.equal(base.sameEntry(0, one(`${MCP}x`, [1, 2, 3]), 0), false);
  });

  it('reads a response as a walk does when it takes entries from earlier responses, whatever changed', () => {
    // Entries from a small alphabet (equal neighbours and repeats are common), mutated by
    // replacements, insertions and removals; responses in pieces, so that strings and unknown
    // fields may lie between entries (a later version_info wins, as in a walk).
    const value = fc.constantFrom('a', 'b', 'c', 'dd', '', 'eee').map((v) => Buffer.from(v));
    const edit = fc.record({
      at: fc.nat(400),
      remove: fc.nat(3),
      insert: fc.array(value, { maxLength: 3 }),
    });
    const piece = fc.oneof(
      fc.record({ version_info: fc.string({ maxLength: 4 }) }).map((f) => encoded(f)),
      fc.record({ nonce: fc.string({ maxLength: 4 }) }).map((f) => encoded(f)),
      unknownField.map((f) => Buffer.from(f)),
    );
    const layoutOf = (bytes: Buffer, earlier: ResponseLayout[] = []): unknown => {
      try {
        const layout = new ResponseLayout(bytes, undefined, earlier);
        return {
          versionInfo: layout.versionInfo,
          typeUrl: layout.typeUrl,
          nonce: layout.nonce,
          entries: Array.from({ length: layout.count }, (_, i) => {
            const e = layout.entry(i);
            return [e.typeUrl, [...e.value]];
          }),
        };
      } catch {
        return 'throws';
      }
    };
    fc.assert(
      fc.property(
        fc.array(value, { maxLength: 400 }),
        fc.array(edit, { maxLength: 4 }),
        fc.array(fc.tuple(fc.nat(400), piece), { maxLength: 3 }),
        fc.nat(),
        (values, edits, pieces, cut) => {
          const response = (list: Buffer[], extra: Array<[number, Buffer]>): Buffer => {
            const parts = list.map((v) => encoded({ resources: [{ type_url: MCP, value: v }] }));
            for (const [at, bytes] of extra) parts.splice(at % (parts.length + 1), 0, bytes);
            return Buffer.concat([encoded({ version_info: 'v0' }), ...parts, encoded({ nonce: 'n' })]);
          };
          const later = [...values];
          for (const e of edits) later.splice(e.at % (later.length + 1), e.remove, ...e.insert);
          const before = new ResponseLayout(response(values, pieces.slice(0, 1)));
          const other = new ResponseLayout(response([Buffer.from('zz')], []));
          const whole = response(later, pieces);
          for (const bytes of [whole, whole.subarray(0, cut % (whole.length + 1))]) {
            const walked = layoutOf(bytes);
            assert.deepEqual(layoutOf(bytes, [before]), walked);
            assert.deepEqual(layoutOf(bytes, [other, before]), walked);
          }
          // What the shared entries say agrees with comparing them.
          const after = new ResponseLayout(whole, undefined, [before]);
          const alone = new ResponseLayout(whole);
          const most = Math.min(after.count, before.count);
          const prefix = alone.commonPrefix(before, most);
          assert.equal(after.commonPrefix(before, most), prefix);
          assert.equal(after.commonSuffix(before, most - prefix), alone.commonSuffix(before, most - prefix));
          for (const layout of [after, alone, before]) {
            for (let k = 0; k < layout.count; k++) assert.deepEqual(layout.runFrom(k), walkedRun(layout, k));
          }
          for (let i = 0; i < after.count; i++) {
            for (const j of [i - 1, i, i + 1]) {
              if (j >= 0 && j < before.count)
                assert.equal(after.sameEntry(i, before, j), alone.sameEntry(i, before, j));
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('walks only the entries that changed when an earlier response holds the rest', () => {
    const response = (values: string[], version: string): Buffer =>
      encoded({
        version_info: version,
        nonce: `n-${version}`,
        resources: values.map((v) => ({ type_url: MCP, value: Buffer.from(v) })),
      });
    const values = Array.from({ length: 5000 }, (_, i) => `object-${i}`);
    const before = new ResponseLayout(response(values, 'v1'));
    const later = [...values];
    later[1234] = 'object-1234-changed-and-longer';
    later.splice(4000, 1);
    const after = new ResponseLayout(response(later, 'v22'), undefined, [before]);
    const walked: number[] = [];
    for (let i = 0; i < after.count; i++) if (after.offsets[4 * i + 3] === -1) walked.push(i);
    assert.deepEqual(walked, [1234], 'only the changed entry is walked; the removal needs no walk');
    assert.equal(after.versionInfo, 'v22');
    assert.equal(after.nonce, 'n-v22');
    assert.equal(after.commonPrefix(before, after.count), 1234);
    assert.equal(after.commonSuffix(before, after.count - 1234), 999);
    // A plain Uint8Array, not a Buffer: a reader keeps it as the object's envelope as it is.
    const entry = after.entry(4000).value;
    assert.equal(Object.getPrototypeOf(entry), Uint8Array.prototype);
    assert.equal(Buffer.from(entry).toString(), 'object-4001');
    // Without an earlier response every entry is walked.
    const alone = new ResponseLayout(response(later, 'v22'));
    assert.equal(
      Array.from({ length: alone.count }, (_, i) => alone.offsets[4 * i + 3]).filter((k) => k === -1).length,
      alone.count,
    );
  });

  it('keeps its bytes in a buffer of its own, never written again', () => {
    const response = (values: number[][]): Buffer =>
      encoded({
        version_info: 'v',
        resources: values.map((v) => ({ type_url: MCP, value: Buffer.from(v) })),
      });
    const message = response([[1], [2, 2], [3, 3, 3]]);
    const first = new ResponseLayout(message);
    assert.equal(first.kept, false);
    first.keepBytes();
    assert.equal(first.kept, true);
    // The message's buffer is the transport's to reuse: the kept layout no longer reads it.
    message.fill(0);
    const held = first.entry(1).value;
    assert.deepEqual([...held], [2, 2]);
    const later = new ResponseLayout(response([[1], [9, 9], [3, 3, 3]]));
    assert.equal(later.commonPrefix(first, 3), 1);
    assert.equal(later.commonSuffix(first, 2), 1);
    later.keepBytes();
    assert.deepEqual([...later.entry(1).value], [9, 9]);
    assert.deepEqual([...held], [2, 2], 'a view of the first kept bytes, as an object keeps it');
    // Offsets arrays are reused, and grown when a message holds more entries.
    const many = new ResponseLayout(response(Array.from({ length: 100 }, (_, i) => [i])), first.offsets);
    assert.equal(many.count, 100);
    assert.deepEqual([...many.entry(99).value], [99]);
  });

  it('copies even a large message that has its memory to itself: the transport lends it for the call only', () => {
    const big = encoded({
      version_info: 'v',
      resources: [{ type_url: MCP, value: Buffer.alloc(2 * 1024 * 1024, 7) }],
    });
    // As the transport lends a message: its reassembly buffer, reused for the next message.
    const lent = Buffer.allocUnsafeSlow(big.byteLength);
    big.copy(lent, 0);
    const kept = new ResponseLayout(lent);
    kept.keepBytes();
    assert.notEqual(kept.entry(0).value.buffer, lent.buffer, 'copied, not kept in place');
    lent.fill(0);
    assert.equal(kept.entry(0).value[0], 7, 'the next message overwriting the buffer changes nothing kept');
    // Taken over instead when the transport hands its buffer over for good.
    big.copy(lent, 0);
    const adopted = new ResponseLayout(lent.subarray(0, big.byteLength));
    assert.equal(adopted.adoptBytes(Buffer.allocUnsafeSlow(16)), false, 'not the buffer its bytes lie in');
    assert.equal(adopted.adoptBytes(lent), true);
    assert.equal(adopted.entry(0).value.buffer, lent.buffer);
  });
});
