import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { messageType } from '../../src/schema/proto-root.js';
import { readPlainEnvelope } from '../../src/upstream/mcp-envelope.js';
import { StrictReader } from '../../src/wire/strict-reader.js';
import { unknownFieldNumbers } from '../../src/wire/wire-fields.js';
import { arbitraryMessage } from '../support/arbitrary-messages.js';

const RESOURCE = messageType('istio.mcp.v1alpha1.Resource');

// A full collection on demand, without starting the test process with --expose-gc.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** What the schema-driven path makes of `bytes` (throws where it refuses them). */
function throughSchema(bytes: Uint8Array): unknown {
  return RESOURCE.toObject(RESOURCE.decode(new StrictReader(bytes)), { longs: Number });
}

function encode(fields: Record<string, unknown>): Uint8Array {
  return RESOURCE.encode(RESOURCE.fromObject(fields)).finish();
}

describe('an MCP envelope read from its bytes', () => {
  it('is what the schema-driven decode gives, whenever it is read at all, however the bytes are spoiled', () => {
    let plain = 0;
    let left = 0;
    fc.assert(
      fc.property(
        arbitraryMessage(RESOURCE, 3),
        fc.option(fc.record({ at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }), cut: fc.boolean() })),
        (fields, spoil) => {
          let bytes = encode(fields);
          if (spoil !== null && bytes.length > 0) {
            bytes = Uint8Array.from(bytes);
            if (spoil.cut) bytes = bytes.subarray(0, spoil.at % bytes.length);
            else bytes[spoil.at % bytes.length] = spoil.byte;
          }
          const read = readPlainEnvelope(bytes);
          if (read === undefined) {
            left++;
            return;
          }
          plain++;
          assert.deepStrictEqual(read, throughSchema(bytes));
        },
      ),
      { numRuns: 3000, seed: 3 },
    );
    assert.ok(plain > 300, `${plain} envelopes read`);
    assert.ok(left > 300, `${left} envelopes left to the schema`);
  });

  it('reads the envelope every upstream sends, the body a view of the bytes', () => {
    const body = Uint8Array.from([0x0a, 0x03, 0x61, 0x62, 0x63]);
    const bytes = encode({
      metadata: {
        name: 'shop/cart',
        create_time: { seconds: 1_700_000_123, nanos: 456 },
        version: 'v7',
        labels: { app: 'cart', 'zone.é': 'eu-1' },
        annotations: { owner: 'team-a' },
      },
      body: { type_url: 'type.googleapis.com/istio.networking.v1alpha3.VirtualService', value: body },
    });
    const read = readPlainEnvelope(bytes);
    assert.deepStrictEqual(read, throughSchema(bytes));
    assert.equal(read?.body?.value?.buffer, bytes.buffer);
    assert.deepEqual([...(read?.body?.value ?? [])], [...body]);
  });

  it('reads envelopes one after the other out of one buffer as each alone, type URLs and keys that differ by a byte apart', () => {
    // Type URLs and keys of one length that differ in one byte, more keys than are remembered,
    // values that are keys elsewhere: what is read again must never stand in for what differs.
    const word = fc.constantFrom('ab', 'ac', 'ba', 'a', 'abc', 'é', 'zone', 'zonf', 'app', 'apq', '');
    const envelope = fc.record({
      name: word,
      typeUrl: fc.constantFrom(
        'type.googleapis.com/x.A',
        'type.googleapis.com/x.B',
        'type.googleapis.com/x.AB',
        `type.googleapis.com/${'x'.repeat(300)}`,
        `type.googleapis.com/${'x'.repeat(299)}y`,
      ),
      labels: fc.dictionary(fc.oneof(word, fc.string({ maxLength: 3 })), word, { maxKeys: 5 }),
      annotations: fc.dictionary(word, word, { maxKeys: 3 }),
    });
    fc.assert(
      fc.property(fc.array(envelope, { minLength: 1, maxLength: 30 }), (envelopes) => {
        const each = envelopes.map((e) =>
          encode({
            metadata: { name: e.name, labels: e.labels, annotations: e.annotations },
            body: { type_url: e.typeUrl, value: Uint8Array.of(0x0a, 0x01, 0x61) },
          }),
        );
        // Side by side in one buffer, as the objects of a first state lie in a slab.
        const slab = new Uint8Array(each.reduce((n, b) => n + b.length, 0));
        let at = 0;
        const views = each.map((b) => {
          slab.set(b, at);
          at += b.length;
          return slab.subarray(at - b.length, at);
        });
        for (const bytes of views) assert.deepStrictEqual(readPlainEnvelope(bytes), throughSchema(bytes));
      }),
      { numRuns: 300, seed: 5 },
    );
  });

  it('reads envelopes out of responses too large to keep wrapped, two of them in turn within one task, as each alone', () => {
    // Two responses' buffers of some 150 KB each, their objects read alternately, as two types'
    // states may be within one turn: strings are decoded from whichever buffer each lies in.
    const responses = ['a', 'b'].map((side) => {
      const each = Array.from({ length: 400 }, (_, i) =>
        encode({
          metadata: {
            name: `ns-${side}/svc-${i}`,
            labels: { app: `${side}${i}` },
            annotations: { n: `${i}` },
          },
          body: {
            type_url: `type.googleapis.com/x.${side.toUpperCase()}`,
            value: new Uint8Array(300).fill(i),
          },
        }),
      );
      const buffer = new Uint8Array(each.reduce((n, b) => n + b.length, 0));
      let at = 0;
      return each.map((b) => {
        buffer.set(b, at);
        at += b.length;
        return buffer.subarray(at - b.length, at);
      });
    });
    const [a, b] = responses as [Uint8Array[], Uint8Array[]];
    assert.ok((a[0] as Uint8Array).buffer.byteLength > 128 * 1024);
    for (let i = 0; i < a.length; i++) {
      for (const bytes of [a[i] as Uint8Array, b[i] as Uint8Array]) {
        assert.deepStrictEqual(readPlainEnvelope(bytes), throughSchema(bytes));
      }
    }
  });

  it('lets go of a large response it read from once the task that read it is over', async () => {
    const response = (): WeakRef<ArrayBufferLike> => {
      const bytes = new Uint8Array(256 * 1024);
      const one = encode({
        metadata: { name: 'shop/cart', labels: { app: 'cart' } },
        body: { type_url: 'x', value: [1] },
      });
      bytes.set(one, 1000);
      // Only strings are kept from it; the body's view goes with the envelope.
      assert.equal(readPlainEnvelope(bytes.subarray(1000, 1000 + one.length))?.metadata?.name, 'shop/cart');
      return new WeakRef(bytes.buffer);
    };
    const held = response();
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    }
    assert.equal(held.deref(), undefined, 'the response is still held');
  });

  it('leaves to the schema what it does not read plainly', () => {
    const name = (n: string): number[] => [0x0a, n.length + 2, 0x0a, n.length, ...Buffer.from(n)];
    const label = (k: string, v: string): number[] => {
      const entry = [0x0a, k.length, ...Buffer.from(k), 0x12, v.length, ...Buffer.from(v)];
      return [0x0a, entry.length + 2, 0x22, entry.length, ...entry];
    };
    const cases: [string, number[]][] = [
      ['metadata twice', [...name('a/b'), ...name('a/c')]],
      ['a __proto__ label', label('__proto__', 'x')],
      ['an unknown field', [...name('a/b'), 0x1a, 0x00]],
      [
        'a negative creation time',
        [0x0a, 0x0e, 0x12, 0x0c, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
      ],
      ['a name that is not UTF-8', [0x0a, 0x04, 0x0a, 0x02, 0xc3, 0x28]],
      ['a length past the end', [0x0a, 0x09, 0x0a]],
    ];
    for (const [what, bytes] of cases)
      assert.equal(readPlainEnvelope(Uint8Array.from(bytes)), undefined, what);
    // The same entry under an ordinary key is read.
    assert.equal(readPlainEnvelope(Uint8Array.from(label('app', 'x')))?.metadata?.labels?.app, 'x');
  });

  it('skips fields the schema does not define as the schema does, when asked to, and names their numbers', () => {
    // Unknown fields of every wire type but groups, among the known ones, the bytes maybe spoiled.
    const unknownField = fc.record({
      number: fc.oneof(
        fc.integer({ min: 3, max: 20 }),
        fc.constant(100),
        fc.integer({ min: 3, max: 2 ** 29 - 1 }),
      ),
      wireType: fc.constantFrom(0, 1, 2, 5),
      value: fc.uint8Array({ maxLength: 12 }),
      at: fc.nat(),
    });
    let read = 0;
    let withUnknown = 0;
    fc.assert(
      fc.property(
        arbitraryMessage(RESOURCE, 3),
        fc.array(unknownField, { maxLength: 3 }),
        fc.option(fc.record({ at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }), { freq: 4 }),
        (fields, extra, spoil) => {
          // The known fields as top-level pieces, the unknown ones put between them.
          const pieces = topLevelPieces(encode(fields));
          for (const f of extra) pieces.splice(f.at % (pieces.length + 1), 0, unknownPiece(f));
          const bytes = Uint8Array.from(pieces.flatMap((p) => [...p]));
          if (spoil !== null && bytes.length > 0) bytes[spoil.at % bytes.length] = spoil.byte;
          const unknown: number[] = [];
          const plain = readPlainEnvelope(bytes, unknown);
          if (plain === undefined) return;
          read++;
          if (unknown.length > 0) withUnknown++;
          assert.deepStrictEqual(plain, throughSchema(bytes));
          assert.deepEqual(unknown, unknownFieldNumbers(bytes, new Set([1, 2])));
        },
      ),
      { numRuns: 2000, seed: 11 },
    );
    assert.ok(withUnknown > 300, `${withUnknown} of ${read} envelopes read with unknown fields`);
    // Without the list, an unknown field leaves the envelope to the schema, as before.
    const higress = Uint8Array.from([0x0a, 0x05, 0x0a, 0x03, 0x61, 0x2f, 0x62, 0xa2, 0x06, 0x01, 0x7b]);
    assert.equal(readPlainEnvelope(higress), undefined);
    const unknown: number[] = [];
    assert.equal(readPlainEnvelope(higress, unknown)?.metadata?.name, 'a/b');
    assert.deepEqual(unknown, [100]);
  });
});

/** The top-level fields of an encoded message, each as its bytes. */
function topLevelPieces(bytes: Uint8Array): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  const reader = protobuf.Reader.create(bytes);
  while (reader.pos < reader.len) {
    const start = reader.pos;
    reader.skipType(reader.uint32() & 7);
    pieces.push(bytes.subarray(start, reader.pos));
  }
  return pieces;
}

/** One field of `number` and `wireType`, its payload made from `value`. */
function unknownPiece(f: { number: number; wireType: number; value: Uint8Array }): Uint8Array {
  const w = protobuf.Writer.create().uint32((f.number << 3) | f.wireType);
  if (f.wireType === 0) w.uint64(f.value.reduce((n, b) => n * 3 + b, 0));
  else if (f.wireType === 1) w.fixed64(f.value.length);
  else if (f.wireType === 5) w.fixed32(f.value.length);
  else w.bytes(f.value);
  return w.finish();
}
