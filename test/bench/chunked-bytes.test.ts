import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ChunkedBytes, samePieces } from '../../bench/chunked-bytes.js';
import { lengthDelimited, scanResponse, stringField } from '../../bench/wire-scan.js';

/** `bytes` cut where `cuts` say (positions taken modulo its length), empty chunks included. */
function cut(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => (bytes.length === 0 ? 0 : c % (bytes.length + 1))))].sort(
    (a, b) => a - b,
  );
  const chunks: Buffer[] = [];
  let from = 0;
  for (const to of at) {
    chunks.push(bytes.subarray(from, to));
    from = to;
  }
  chunks.push(bytes.subarray(from));
  return chunks;
}

/** A DiscoveryResponse with the given entries, a varint field and the strings in between. */
function response(entries: readonly Uint8Array[], version: string, nonce: string, split: number): Buffer {
  const fields = entries.map((e) => lengthDelimited(2, e));
  return Buffer.concat([
    stringField(1, version),
    ...fields.slice(0, split),
    // A nonce between entries splits them into two ranges, a varint field (7) is skipped.
    ...(split > 0 && split < fields.length ? [stringField(5, nonce)] : []),
    Uint8Array.of(7 << 3, 0x96, 0x01),
    ...fields.slice(split),
    stringField(4, 'type.googleapis.com/x'),
    ...(split > 0 && split < fields.length ? [] : [stringField(5, nonce)]),
  ]);
}

const entry = fc.uint8Array({ minLength: 0, maxLength: 300 });
const cuts = fc.array(fc.nat(5000), { maxLength: 12 });

describe("the benchmark fleet's responses kept as the chunks they arrived in", () => {
  it('scans a response cut anywhere as it scans it whole', () => {
    fc.assert(
      fc.property(
        fc.array(entry, { maxLength: 12 }),
        fc.string(),
        fc.string({ minLength: 1 }),
        fc.nat(12),
        cuts,
        (entries, version, nonce, split, at) => {
          const whole = response(entries, version, nonce, split);
          const expected = Buffer.concat(entries.map((e) => lengthDelimited(2, e)));
          for (const scan of [scanResponse(whole), scanResponse(new ChunkedBytes(cut(whole, at)))]) {
            assert.equal(scan.versionInfo, version);
            assert.equal(scan.nonce, nonce);
            assert.equal(scan.typeUrl, 'type.googleapis.com/x');
            assert.equal(scan.resources, entries.length);
            assert.equal(scan.resourceLength, expected.length);
            assert.deepEqual(Buffer.concat(scan.resourcePieces), expected);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('compares bytes as one buffer would, however either side is cut', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.uint8Array({ maxLength: 200 }),
        fc.boolean(),
        cuts,
        cuts,
        fc.nat(200),
        (x, y, same, cutsA, cutsB, from) => {
          const a = Buffer.from(x);
          const b = same ? Buffer.from(x) : Buffer.from(y);
          const chunkedA = new ChunkedBytes(cut(a, cutsA));
          const chunkedB = new ChunkedBytes(cut(b, cutsB));
          assert.equal(chunkedA.equals(chunkedB), a.equals(b));
          if (a.length === b.length) assert.equal(samePieces(cut(a, cutsA), cut(b, cutsB)), a.equals(b));
          // A piece of b held at `from` in a, as a plain comparison says.
          const at = a.length === 0 ? 0 : from % a.length;
          const piece = b.subarray(0, Math.min(b.length, 40));
          const plain = at + piece.length <= a.length && a.subarray(at, at + piece.length).equals(piece);
          assert.equal(chunkedA.holds(at, piece), plain);
          assert.deepEqual(Buffer.concat(chunkedA.pieces(at, a.length)), a.subarray(at));
        },
      ),
      { numRuns: 2000 },
    );
  });
});
