import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type ByteRope, RopeBuilder } from '../../src/upstream/xds/byte-rope.js';

/** `bytes` cut at `cuts` into views of buffers of their own, some of them adjacent in one buffer. */
function ropeOf(bytes: Buffer, cuts: readonly number[], shared: boolean): ByteRope {
  const builder = new RopeBuilder();
  const at = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  // Adjacent views of one buffer are joined by the builder; views of copies are not.
  const source = shared ? Buffer.from(bytes) : undefined;
  let from = 0;
  for (const to of [...at, bytes.byteLength]) {
    builder.push(source !== undefined ? source.subarray(from, to) : Buffer.from(bytes.subarray(from, to)));
    from = to;
  }
  return builder.build();
}

const input = fc.record({
  bytes: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => Buffer.from(b)),
  cuts: fc.array(fc.nat(400), { maxLength: 12 }),
  shared: fc.boolean(),
  start: fc.nat(400),
  length: fc.nat(400),
  flip: fc.nat(400),
});

describe('ByteRope', () => {
  it('reads as the bytes it was cut from, whatever the cuts', () => {
    fc.assert(
      fc.property(input, ({ bytes, cuts, shared, start: s, length: l }) => {
        const rope = ropeOf(bytes, cuts, shared);
        assert.equal(rope.size, bytes.byteLength);
        if (shared) assert.equal(rope.partCount, 1, 'adjacent views of one buffer joined');
        const start = s % bytes.byteLength;
        const end = start + (l % (bytes.byteLength - start + 1));
        assert.ok(rope.view(start, end).equals(bytes.subarray(start, end)));
        const target = Buffer.alloc(end - start + 3);
        rope.copy(start, end, target, 3);
        assert.ok(target.subarray(3).equals(bytes.subarray(start, end)));
        assert.equal(rope.equals(start, bytes, start, end), true);
        assert.equal(rope.agreeing(start, bytes, start, end - start), end - start);
        const again = ropeOf(
          bytes,
          [...cuts].reverse().map((c) => c + 1),
          false,
        );
        assert.equal(rope.sameAs(start, end, again, start), true);
        // Past its end: not equal.
        assert.equal(
          rope.equals(start, Buffer.concat([bytes, Buffer.of(1)]), start, bytes.byteLength + 1),
          false,
        );
      }),
    );
  });

  it('finds the first byte that differs, across parts', () => {
    fc.assert(
      fc.property(input, ({ bytes, cuts, shared, start: s, flip }) => {
        const rope = ropeOf(bytes, cuts, shared);
        const start = s % bytes.byteLength;
        const at = start + (flip % (bytes.byteLength - start));
        const other = Buffer.from(bytes);
        other[at] = ((other[at] as number) + 1) & 255;
        const length = bytes.byteLength - start;
        assert.equal(rope.agreeing(start, other, start, length), at - start);
        assert.equal(rope.equals(start, other, start, bytes.byteLength), false);
        assert.equal(rope.sameAs(start, bytes.byteLength, ropeOf(other, cuts, !shared), start), false);
      }),
    );
  });

  it('reads as the bytes it stands for when made of another many times over, the earlier ones unchanged', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ at: fc.nat(), cut: fc.nat(300), length: fc.nat(300), fill: fc.nat(255) }), {
          minLength: 1,
          maxLength: 30,
        }),
        (edits) => {
          // Hundreds of parts, in several groups.
          let bytes = Buffer.from(Array.from({ length: 20_000 }, (_, i) => (i * 7) & 255));
          let rope = ropeOf(
            bytes,
            Array.from({ length: 700 }, (_, i) => i * 28),
            false,
          );
          const made: { readonly rope: ByteRope; readonly bytes: Buffer }[] = [];
          for (const { at: a, cut, length, fill } of edits) {
            const at = a % (bytes.byteLength + 1);
            const end = Math.min(bytes.byteLength, at + cut);
            const own = Buffer.alloc(length, fill);
            const builder = new RopeBuilder();
            rope.appendTo(builder, 0, at);
            builder.push(own);
            rope.appendTo(builder, end, bytes.byteLength);
            const next = builder.build();
            const expected = Buffer.concat([bytes.subarray(0, at), own, bytes.subarray(end)]);
            assert.equal(next.size, expected.byteLength);
            assert.ok(next.view(0, next.size).equals(expected));
            assert.equal(next.sameAs(0, at, rope, 0), true);
            assert.equal(next.sameAs(at + length, next.size, rope, end), true);
            assert.equal(next.agreeing(0, expected, 0, expected.byteLength), expected.byteLength);
            made.push({ rope: next, bytes: expected });
            rope = next;
            bytes = expected;
          }
          for (const m of made) assert.ok(m.rope.view(0, m.rope.size).equals(m.bytes));
          // Parts are never more than the cuts and edits made.
          assert.ok(rope.partCount <= 700 + 2 * edits.length, `${rope.partCount} parts`);
        },
      ),
      { numRuns: 50 },
    );
  });

  it('compares ranges of itself, and past the end of a shorter rope, as their bytes say', () => {
    const bytes = Buffer.from(Array.from({ length: 90 }, (_, i) => i % 30));
    const rope = ropeOf(bytes, [7, 31, 64], false);
    // Bytes 0–30 and 30–60 are the same; 0–30 and 1–31 are not.
    assert.equal(rope.sameAs(0, 30, rope, 30), true);
    assert.equal(rope.sameAs(5, 65, rope, 35), false, 'runs past the end of the other range');
    assert.equal(rope.sameAs(0, 30, rope, 1), false);
    const short = ropeOf(bytes.subarray(0, 40), [10], false);
    assert.equal(rope.sameAs(0, 30, short, 30), false, 'the other rope ends first');
    assert.equal(rope.sameAs(0, 10, short, 30), true);
  });

  it('finds the first byte that differs in ranges longer than one comparison', () => {
    const size = 300_000;
    const bytes = Buffer.from(Array.from({ length: size }, (_, i) => (i * 13) & 255));
    const rope = ropeOf(bytes, [1000, 70_000, 200_000], false);
    for (const at of [0, 65_535, 65_536, 65_600, 131_100, 199_999, 250_000, size - 1]) {
      const other = Buffer.from(bytes);
      other[at] = ((other[at] as number) + 1) & 255;
      assert.equal(rope.agreeing(0, other, 0, size), at, `a byte changed at ${at}`);
      assert.equal(
        rope.agreeing(500, other, 500, size - 500),
        at < 500 ? size - 500 : at - 500,
        `from 500, at ${at}`,
      );
    }
    assert.equal(rope.agreeing(0, bytes, 0, size), size);
  });

  it('takes its ranges into another rope as views of its own memory', () => {
    const bytes = Buffer.from(Array.from({ length: 100 }, (_, i) => i));
    const rope = ropeOf(bytes, [10, 40, 70], false);
    assert.equal(rope.partCount, 4);
    const builder = new RopeBuilder();
    rope.appendTo(builder, 5, 55);
    builder.push(Buffer.from([200, 201]));
    rope.appendTo(builder, 90, 100);
    const made = builder.build();
    assert.equal(made.partCount, 5);
    assert.ok(
      made
        .view(0, made.size)
        .equals(Buffer.concat([bytes.subarray(5, 55), Buffer.from([200, 201]), bytes.subarray(90)])),
    );
    // A view of the same memory: no copy, and equal without comparing a byte.
    assert.equal(made.partHolding(5, 35)?.buffer, rope.partHolding(10, 40)?.buffer);
    assert.equal(made.partStart, 5);
    assert.equal(made.partHolding(4, 6), undefined, 'across two parts');
    assert.equal(made.sameAs(0, 50, rope, 5), true);
  });
});
