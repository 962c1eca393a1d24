import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { GrpcMessageReader, GrpcReadError } from '../../src/upstream/streaming/grpc-message-reader.js';
import { chunked, framed } from '../support/grpc-frames.js';

/** What a reader delivers from `chunks`, each message copied inside the call (a lent view dies after it). */
function readAll(reader: GrpcMessageReader, chunks: readonly Buffer[]): Buffer[] {
  const out: Buffer[] = [];
  for (const chunk of chunks) reader.push(chunk, (m) => out.push(Buffer.from(m)));
  return out;
}

describe('GrpcMessageReader', () => {
  it('delivers every message whole and in order however the stream is cut, lending or not', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.boolean(),
        (messages, cuts, lend) => {
          const reader = new GrpcMessageReader(1024, lend);
          const got = readAll(reader, chunked(framed(messages), cuts));
          assert.deepEqual(
            got.map((m) => m.toString('hex')),
            messages.map((m) => Buffer.from(m).toString('hex')),
          );
          assert.equal(reader.midMessage, false);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('lends one buffer for every message it assembles, and gives each its own without lending', () => {
    const messages = [Buffer.alloc(4000, 1), Buffer.alloc(3000, 2), Buffer.alloc(4000, 3)];
    const chunks = chunked(framed(messages), [100, 2000, 4100, 6000, 9000]);
    const buffers = (lend: boolean): ArrayBuffer[] => {
      const seen: ArrayBuffer[] = [];
      const reader = new GrpcMessageReader(1 << 20, lend);
      for (const chunk of chunks) reader.push(chunk, (m) => seen.push(m.buffer as ArrayBuffer));
      return seen;
    };
    const lent = buffers(true);
    assert.equal(lent.length, 3);
    assert.equal(new Set(lent).size, 1, 'one reassembly buffer, reused');
    assert.ok(!chunks.some((c) => c.buffer === lent[0]), 'not a chunk: nothing of a chunk is kept');
    const own = buffers(false);
    assert.equal(new Set(own).size, 3, 'a buffer per message');
  });

  it('lets its buffer go on release, but never in the middle of a message', () => {
    const seen: ArrayBuffer[] = [];
    const got: string[] = [];
    const reader = new GrpcMessageReader(1 << 20, true);
    const deliver = (m: Uint8Array): void => {
      seen.push(m.buffer as ArrayBuffer);
      got.push(Buffer.from(m).toString('hex', 0, 4));
    };
    const [a, b] = chunked(framed([Buffer.alloc(5000, 1)]), [2500]);
    reader.push(a as Buffer, deliver);
    reader.release();
    reader.push(b as Buffer, deliver);
    assert.deepEqual(got, ['01010101'], 'the message assembled across the release is whole');
    for (const chunk of chunked(framed([Buffer.alloc(5000, 2)]), [2500])) reader.push(chunk, deliver);
    assert.equal(seen[1], seen[0], 'reused until released');
    reader.release();
    for (const chunk of chunked(framed([Buffer.alloc(5000, 3)]), [2500])) reader.push(chunk, deliver);
    assert.notEqual(seen[2], seen[1], 'a new buffer after the release');
    assert.deepEqual(got, ['01010101', '02020202', '03030303']);
  });

  it('hands its buffer over to a receiver that adopts the message for good, and assembles the next in a new one', () => {
    const reader = new GrpcMessageReader(1 << 20, true);
    const kept: { message: Buffer; buffer: Buffer | undefined }[] = [];
    const adoptAll = (m: Uint8Array): void => {
      const buffer = reader.adopt();
      kept.push({ message: Buffer.from(m.buffer, m.byteOffset, m.byteLength), buffer });
      // Once only: a second call within the same delivery keeps nothing.
      assert.equal(reader.adopt(), undefined);
    };
    for (const chunk of chunked(framed([Buffer.alloc(5000, 1)]), [2500])) reader.push(chunk, adoptAll);
    for (const chunk of chunked(framed([Buffer.alloc(6000, 2)]), [3000])) reader.push(chunk, adoptAll);
    const [first, second] = kept;
    assert.ok(first?.buffer !== undefined && first.message.buffer === first.buffer.buffer);
    assert.ok(second?.buffer !== undefined && second.message.buffer === second.buffer.buffer);
    assert.notEqual(second.buffer.buffer, first.buffer.buffer, 'the next message assembled in a new buffer');
    // What was adopted is never written again: the first message is still whole.
    assert.ok(first.message.every((b) => b === 1) && first.message.byteLength === 5000);
    assert.ok(second.message.every((b) => b === 2) && second.message.byteLength === 6000);
    // Outside a delivery, and for a message lent where it lay in its chunk, nothing is handed over.
    assert.equal(reader.adopt(), undefined);
    let inChunk: Buffer | undefined = Buffer.alloc(0);
    reader.push(framed([Buffer.from('whole')]), () => (inChunk = reader.adopt()));
    assert.equal(inChunk, undefined);
  });

  it('keeps a buffer far larger than the message', () => {
    const reader = new GrpcMessageReader(1 << 20, true);
    const adopted: (Buffer | undefined)[] = [];
    const offer = (): void => void adopted.push(reader.adopt());
    // A large message, then a small one assembled in the large one's buffer: that buffer stays.
    for (const chunk of chunked(framed([Buffer.alloc(200_000, 1)]), [1000]))
      reader.push(chunk, () => undefined);
    for (const chunk of chunked(framed([Buffer.alloc(1000, 2)]), [500])) reader.push(chunk, offer);
    assert.equal(adopted.length, 1);
    assert.equal(adopted[0], undefined);
    // A large one again goes with its buffer.
    for (const chunk of chunked(framed([Buffer.alloc(200_000, 3)]), [1000])) reader.push(chunk, offer);
    const taken = adopted[1];
    assert.ok(taken !== undefined && taken.byteLength >= 200_000);
  });

  it('lends a message that arrived whole in one chunk where it lies, without copying it', () => {
    const chunk = framed([Buffer.from('abc'), Buffer.from('defg')]);
    const reader = new GrpcMessageReader(1024, true);
    const views: Uint8Array[] = [];
    reader.push(chunk, (m) => views.push(m));
    assert.deepEqual(
      views.map((v) => Buffer.from(v).toString()),
      ['abc', 'defg'],
    );
    assert.ok(views.every((v) => v.buffer === chunk.buffer));
  });

  it('delivers an empty message as soon as its prefix is read, even at the end of a chunk', () => {
    const reader = new GrpcMessageReader(1024, true);
    const got: number[] = [];
    reader.push(framed([new Uint8Array(0)]), (m) => got.push(m.byteLength));
    assert.deepEqual(got, [0]);
    assert.equal(reader.midMessage, false);
  });

  it('tells a stream cut in the middle of a message or of its prefix', () => {
    const whole = framed([Buffer.alloc(10, 9)]);
    for (const cut of [1, 4, 5, 9]) {
      const reader = new GrpcMessageReader(1024, true);
      reader.push(whole.subarray(0, cut), () => assert.fail('nothing is whole yet'));
      assert.equal(reader.midMessage, true, `cut at ${cut}`);
    }
  });

  it('refuses a message over the limit by its prefix, before holding any of its bytes', () => {
    const reader = new GrpcMessageReader(100, true);
    const prefix = Buffer.from([0, 0, 0, 0, 101]);
    assert.throws(
      () => reader.push(prefix, () => undefined),
      (err: unknown) =>
        err instanceof GrpcReadError &&
        err.status === 'RESOURCE_EXHAUSTED' &&
        /101 bytes, over maxReceiveSize \(100 bytes\)/.test(err.message),
    );
    // Exactly the limit is accepted.
    const ok = new GrpcMessageReader(100, true);
    assert.equal(readAll(ok, [framed([Buffer.alloc(100)])]).length, 1);
  });

  it('refuses compressed messages (only identity encoding is asked for) and unknown flags', () => {
    for (const [flag, pattern] of [
      [1, /compressed message/],
      [2, /compression flag 2/],
    ] as const) {
      const reader = new GrpcMessageReader(1024, true);
      assert.throws(
        () => reader.push(framed([Buffer.from('x')], flag), () => undefined),
        (err: unknown) =>
          err instanceof GrpcReadError && err.status === 'INTERNAL' && pattern.test(err.message),
      );
    }
  });
});
