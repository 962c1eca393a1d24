import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { GrpcMessageReader } from '../../src/upstream/streaming/grpc-message-reader.js';
import { ResponseLayout, type ResponseSplice } from '../../src/upstream/xds/discovery-response.js';
import { ResentResponseMatcher, type ResponseHead } from '../../src/upstream/xds/resent-response-matcher.js';
import { walkedRun } from '../support/entry-runs.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { fakeVirtualService } from '../support/fake-objects.js';
import { chunked, framed } from '../support/grpc-frames.js';
import { syncedXdsSource, type SourceEventRecorder } from '../support/source-event-recorder.js';

const MCP = 'type.googleapis.com/istio.mcp.v1alpha1.Resource';
const VS_V1 = 'networking.istio.io/v1/VirtualService';

/** A top-level field of a response, in the order written. */
type Part =
  | { readonly field: 'version' | 'type' | 'nonce'; readonly text: string }
  | { readonly field: 'entry'; readonly value: Uint8Array }
  | { readonly field: 'other'; readonly bytes: Uint8Array };

function encode(parts: readonly Part[]): Buffer {
  return Buffer.concat(
    parts.map((p) => {
      if (p.field === 'other') return p.bytes;
      const w = protobuf.Writer.create();
      if (p.field === 'entry') {
        const any = protobuf.Writer.create()
          .uint32((1 << 3) | 2)
          .string(MCP)
          .uint32((2 << 3) | 2)
          .bytes(p.value);
        return w
          .uint32((2 << 3) | 2)
          .bytes(any.finish())
          .finish();
      }
      const field = p.field === 'version' ? 1 : p.field === 'type' ? 4 : 5;
      return w
        .uint32((field << 3) | 2)
        .string(p.text)
        .finish();
    }),
  );
}

/** A top-level varint field. */
function varintField(field: number, n: number): Part {
  return {
    field: 'other',
    bytes: protobuf.Writer.create()
      .uint32(field << 3)
      .uint64(n)
      .finish(),
  };
}

/** A top-level length-delimited field. */
function bytesField(field: number, payload: Uint8Array): Part {
  return {
    field: 'other',
    bytes: protobuf.Writer.create()
      .uint32((field << 3) | 2)
      .bytes(payload)
      .finish(),
  };
}

/**
 * Fields the schema knows but the matcher only copies (canary, control plane), or does not know;
 * groups (which the matcher leaves to the layout) where asked for.
 */
const otherField = (groups: boolean): fc.Arbitrary<Part> =>
  fc
    .record({
      field: fc.constantFrom(3, 6, 9, 300),
      kind: fc.constantFrom('varint', 'fixed64', 'fixed32', 'bytes', ...(groups ? ['group'] : [])),
      number: fc.integer({ min: 0, max: 2 ** 31 }),
      payload: fc.uint8Array({ maxLength: 300 }),
    })
    .map(({ field, kind, number, payload }) => {
      const w = protobuf.Writer.create();
      if (kind === 'varint') w.uint32(field << 3).uint64(number);
      else if (kind === 'fixed64') w.uint32((field << 3) | 1).fixed64(number);
      else if (kind === 'fixed32') w.uint32((field << 3) | 5).fixed32(number);
      else if (kind === 'bytes') w.uint32((field << 3) | 2).bytes(payload);
      else
        w.uint32((field << 3) | 3)
          .uint32((1 << 3) | 2)
          .bytes(payload)
          .uint32((field << 3) | 4);
      return { field: 'other' as const, bytes: w.finish() };
    });

const headField = (groups: boolean): fc.Arbitrary<Part> =>
  fc.oneof(
    fc.record({
      field: fc.constantFrom('version' as const, 'nonce' as const),
      text: fc.string({ maxLength: 12 }),
    }),
    otherField(groups),
  );
const head = headField(false);
const anyHead = headField(true);

/** Entry values, some of equal length so entries of two kept responses can share their headers. */
const value = fc.oneof(fc.uint8Array({ minLength: 20, maxLength: 20 }), fc.uint8Array({ maxLength: 200 }));

const TYPES = ['networking.istio.io/v1/ServiceEntry', 'networking.istio.io/v1/VirtualService'];

/** A kept response: strings, then entries (one after another, or with a field between), then strings. */
function keptParts(
  typeUrl: string,
  values: readonly Uint8Array[],
  before: readonly Part[],
  gap?: readonly [number, Part],
): Part[] {
  const entries: Part[] = values.map((v) => ({ field: 'entry' as const, value: v }));
  if (gap !== undefined) entries.splice(gap[0] % (entries.length + 1), 0, gap[1]);
  return [...before, ...entries, { field: 'type', text: typeUrl }, { field: 'nonce', text: 'kept' }];
}

type Outcome =
  | { readonly as: 'bytes'; readonly bytes: Buffer }
  | { readonly as: 'resent'; readonly layout: ResponseLayout; readonly head: ResponseHead }
  | {
      readonly as: 'spliced';
      readonly base: ResponseLayout;
      /** The bytes of the kept response the splice was made of. */
      readonly before: Buffer;
      readonly layout: ResponseLayout;
      /** The bytes of the layout made of the splice. */
      readonly buffer: Buffer;
    };

/** The message each layout made by {@link keptLayout} was read from. */
const keptMessages = new WeakMap<ResponseLayout, Buffer>();

/** A layout of `message` that keeps its bytes in a buffer of its own, as a kept response does. */
function keptLayout(message: Buffer): ResponseLayout {
  const layout = new ResponseLayout(message);
  layout.keepBytes();
  keptMessages.set(layout, message);
  return layout;
}

/**
 * What the reader hands on for `message`, cut at `cuts`, its matcher comparing with `kept`; a
 * splice is made a layout of its kept layout's bytes and its own, as the xds client does.
 */
function receive(message: Buffer, cuts: readonly number[], kept: readonly ResponseLayout[]): Outcome[] {
  const out: Outcome[] = [];
  const reader = new GrpcMessageReader(1 << 24, true, (size) => {
    return new ResentResponseMatcher(
      kept,
      {
        isKept: (layout) => kept.includes(layout),
        resent: (layout, h) => out.push({ as: 'resent', layout, head: h }),
        spliced: (base, splice) => {
          const layout = base.splice(splice);
          out.push({
            as: 'spliced',
            base,
            before: keptMessages.get(base) as Buffer,
            layout,
            buffer: Buffer.from(layout.message),
          });
        },
      },
      size,
    );
  });
  for (const chunk of chunked(framed([message]), cuts)) {
    reader.push(chunk, (m) => out.push({ as: 'bytes', bytes: Buffer.from(m) }));
  }
  assert.equal(reader.midMessage, false);
  return out;
}

function entriesOf(layout: ResponseLayout): string[] {
  return Array.from({ length: layout.count }, (_, i) => Buffer.from(layout.entry(i).value).toString('hex'));
}

/** An edit of a kept response's entries: a change, a removal, a name twice, a swap, an insertion, a field between. */
interface Edit {
  readonly op: 'change' | 'remove' | 'truncate' | 'duplicate' | 'swap' | 'insert' | 'between';
  readonly at: number;
  readonly value?: Uint8Array;
  readonly part?: Part;
}

const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ op: fc.constant('change' as const), at: fc.nat(), value }),
  fc.record({
    op: fc.constantFrom('remove' as const, 'truncate' as const, 'duplicate' as const, 'swap' as const),
    at: fc.nat(),
  }),
  fc.record({ op: fc.constant('insert' as const), at: fc.nat(), value }),
  fc.record({ op: fc.constant('between' as const), at: fc.nat(), part: anyHead }),
);

function edited(values: readonly Uint8Array[], edits: readonly Edit[]): Part[] {
  const parts: Part[] = values.map((v) => ({ field: 'entry', value: v }));
  for (const e of edits) {
    const at = e.at % Math.max(1, parts.length);
    if (e.op === 'change' && e.value !== undefined && parts.length > 0)
      parts[at] = { field: 'entry', value: e.value };
    else if (e.op === 'remove') parts.splice(at, 1);
    else if (e.op === 'truncate') parts.splice(at);
    else if (e.op === 'duplicate' && parts[at] !== undefined) parts.splice(at, 0, parts[at]);
    else if (e.op === 'swap' && parts.length > 1) {
      const next = (at + 1) % parts.length;
      [parts[at], parts[next]] = [parts[next] as Part, parts[at] as Part];
    } else if (e.op === 'insert' && e.value !== undefined)
      parts.splice(at, 0, { field: 'entry', value: e.value });
    else if (e.op === 'between' && e.part !== undefined) parts.splice(at, 0, e.part);
  }
  return parts;
}

/**
 * The reader handed `message` on once: as exactly its bytes; as a splice made of exactly them,
 * with the layout a walk finds and each entry it names the kept one's the same bytes; or, taken
 * whole, as a kept response whose entries and type URL are the message's, with the head a layout
 * reads from it.
 */
function assertExact(message: Buffer, got: readonly Outcome[]): void {
  assert.equal(got.length, 1);
  const outcome = got[0] as Outcome;
  if (outcome.as === 'bytes') {
    assert.equal(outcome.bytes.toString('hex'), message.toString('hex'));
    return;
  }
  if (outcome.as === 'spliced') {
    assert.equal(outcome.buffer.toString('hex'), message.toString('hex'), 'the splice is the message');
    const read = new ResponseLayout(message);
    const got = outcome.layout;
    assert.deepEqual(
      { version: got.versionInfo, type: got.typeUrl, nonce: got.nonce, count: got.count },
      { version: read.versionInfo, type: read.typeUrl, nonce: read.nonce, count: read.count },
    );
    const kept = new ResponseLayout(outcome.before);
    for (let i = 0; i < read.count; i++) {
      assert.deepEqual(
        [got.entryStart(i), got.entryHeaderLength(i), got.entryEnd(i)],
        [read.entryStart(i), read.entryHeaderLength(i), read.entryEnd(i)],
        `the offsets of entry ${i}`,
      );
      const k = got.offsets[4 * i + 3] as number;
      if (k >= 0) assert.ok(read.sameEntry(i, kept, k), `entry ${i} is the kept entry ${k}`);
      assert.deepEqual(got.runFrom(i), walkedRun(read, i), `the run from entry ${i}`);
    }
    // The ends it shares with the kept response, as comparing the two walked responses finds them.
    const most = Math.min(read.count, kept.count);
    const prefix = read.commonPrefix(kept, most);
    assert.equal(got.commonPrefix(outcome.base, most), prefix, 'the shared first entries');
    assert.equal(got.commonSuffix(outcome.base, most - prefix), read.commonSuffix(kept, most - prefix));
    return;
  }
  // Taken whole: the response is well formed and is the kept state sent again.
  const read = new ResponseLayout(message);
  assert.deepEqual(entriesOf(read), entriesOf(outcome.layout));
  assert.equal(read.typeUrl, outcome.layout.typeUrl);
  assert.deepEqual(outcome.head, { versionInfo: read.versionInfo, typeUrl: read.typeUrl, nonce: read.nonce });
}

describe('ResentResponseMatcher', () => {
  it('takes a response that repeats a kept one’s entries whole, whatever else it carries and however it is cut', () => {
    fc.assert(
      fc.property(
        fc.array(value, { minLength: 1, maxLength: 12 }),
        fc.array(value, { minLength: 1, maxLength: 12 }),
        fc.boolean(),
        fc.array(head, { maxLength: 3 }),
        fc.array(head, { maxLength: 3 }),
        fc.array(head, { maxLength: 3 }),
        fc.option(fc.tuple(fc.nat(), head, fc.option(head, { nil: undefined })), { nil: undefined }),
        fc.option(fc.string({ maxLength: 8 }), { nil: undefined }),
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.boolean(),
        (firsts, seconds, sameFirst, keptHead, newHead, newTail, gap, nonce, cuts, sendSecond) => {
          // Two kept responses, their entries told apart by their first byte (their headers may be
          // the same): which one is sent again is the matcher's to find. Or with the same first
          // entry, the first of them sent again (the first kept response whose first entry agrees
          // is taken). The first may have a field between its entries, where the response has
          // another field or none.
          const second = sendSecond && !sameFirst;
          const values = firsts.map((v) => Buffer.concat([Buffer.from([1]), v]));
          const others = seconds.map((v, i) =>
            sameFirst && i === 0 ? (values[0] as Buffer) : Buffer.concat([Buffer.from([2]), v]),
          );
          const keptGap = gap === undefined ? undefined : ([gap[0], gap[1]] as const);
          const kept = [
            keptLayout(encode(keptParts(TYPES[0] as string, values, keptHead, keptGap))),
            keptLayout(encode(keptParts(TYPES[1] as string, others, []))),
          ];
          const entries: Part[] = (second ? others : values).map((v) => ({ field: 'entry', value: v }));
          if (!second && gap !== undefined && gap[2] !== undefined) {
            entries.splice(gap[0] % (entries.length + 1), 0, gap[2]);
          }
          const message = encode([
            ...newHead,
            ...entries,
            ...newTail,
            { field: 'type', text: TYPES[second ? 1 : 0] as string },
            ...(nonce === undefined ? [] : [{ field: 'nonce' as const, text: nonce }]),
          ]);
          // Cut inside the message at least once: a message that arrives whole is read where it lies.
          const got = receive(message, [6, ...cuts], kept);
          assert.equal(got.length, 1);
          const outcome = got[0] as Outcome;
          assert.equal(outcome.as, 'resent', 'taken whole, without a copy');
          if (outcome.as !== 'resent') return;
          const read = new ResponseLayout(message);
          assert.equal(outcome.layout, kept[second ? 1 : 0]);
          assert.deepEqual(outcome.head, {
            versionInfo: read.versionInfo,
            typeUrl: read.typeUrl,
            nonce: read.nonce,
          });
        },
      ),
      {
        numRuns: 400,
        examples: [
          // Varints and lengths with a byte of 0x80 in them, before the entries.
          [
            [Buffer.alloc(20, 5)],
            [Buffer.alloc(20, 6)],
            false,
            [],
            [varintField(3, 128), bytesField(9, Buffer.alloc(128, 7)), bytesField(300, Buffer.alloc(300, 8))],
            [],
            undefined,
            '',
            [7, 40],
            false,
          ],
        ],
      },
    );
  });

  it('hands on exactly the bytes sent, or a kept response they repeat, for any other response', () => {
    fc.assert(
      fc.property(
        fc.array(value, { minLength: 1, maxLength: 12 }),
        fc.array(edit, { maxLength: 3 }),
        fc.array(anyHead, { maxLength: 2 }),
        fc.constantFrom(...TYPES, 'networking.istio.io/v1/Gateway'),
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.option(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { nil: undefined }),
        fc.option(fc.tuple(fc.nat(), anyHead), { nil: undefined }),
        (values, edits, newHead, typeUrl, cuts, flip, gap) => {
          const kept = keptLayout(encode(keptParts(TYPES[0] as string, values, [], gap)));
          // Another kept response whose entries have the same headers (lengths) as the first's and
          // other bytes: its first entry is compared too until the bytes tell them apart.
          const sibling = keptLayout(
            encode(
              keptParts(
                TYPES[1] as string,
                values.map((v) => Buffer.from(v).map((b) => b ^ 0xff)),
                [],
              ),
            ),
          );
          const message = encode([
            ...newHead,
            ...edited(values, edits),
            { field: 'type', text: typeUrl },
            { field: 'nonce', text: 'n' },
          ]);
          // A byte changed anywhere: the response may not even be well formed.
          if (flip !== undefined) message[flip[0] % message.byteLength] = flip[1];
          assertExact(message, receive(message, cuts, [kept, sibling]));
        },
      ),
      {
        numRuns: 1500,
        examples: [
          // An entry no kept response begins with, its header's last byte the chunk's last: the
          // matcher must take nothing after it (it once read on inside the entry as top-level
          // fields, and took the next entry for the kept one's first).
          [
            [Buffer.alloc(7)],
            [{ op: 'insert', at: 0, value: Buffer.from([57, 0, 0, 0, 0, 0, 0, 0, 0]) }],
            [{ field: 'other', bytes: Buffer.from([25, 0, 0, 0, 0, 0, 0, 0, 0]) }],
            TYPES[0] as string,
            [16, 67],
            undefined,
            undefined,
          ],
          // The entries before a field the kept response has between its entries, and no more.
          [
            [Buffer.alloc(30, 1), Buffer.alloc(30, 2), Buffer.alloc(30, 3)],
            [{ op: 'truncate', at: 2 }],
            [],
            TYPES[0] as string,
            [6],
            undefined,
            [2, { field: 'other', bytes: Buffer.from([0x18, 0x01]) }],
          ],
        ],
      },
    );
  });

  it('makes a response that differs in a few entries of its kept response’s bytes and a copy of the rest', () => {
    // Entries of one length (their headers all alike) and of many.
    for (const lengths of ['same', 'varied'] as const) {
      const values = Array.from({ length: 300 }, (_, i) =>
        Buffer.alloc(lengths === 'same' ? 120 : 60 + ((i * 37) % 200), i % 251),
      );
      const edits: Record<string, readonly Edit[]> = {
        'one entry changed, same length': [
          { op: 'change', at: 150, value: Buffer.alloc(values[150]?.length ?? 0, 7) },
        ],
        'one entry changed, longer': [{ op: 'change', at: 150, value: Buffer.alloc(400, 7) }],
        'the first entry changed': [{ op: 'change', at: 0, value: Buffer.alloc(30, 9) }],
        'the last entry changed': [{ op: 'change', at: 299, value: Buffer.alloc(30, 9) }],
        'one removed': [{ op: 'remove', at: 10 }],
        'one added': [{ op: 'insert', at: 200, value: Buffer.alloc(90, 3) }],
        'two swapped': [{ op: 'swap', at: 40 }],
        'changes far apart': [
          { op: 'change', at: 5, value: Buffer.alloc(10, 1) },
          { op: 'remove', at: 100 },
          { op: 'insert', at: 250, value: Buffer.alloc(300, 2) },
        ],
        'the last ones cut off': [{ op: 'truncate', at: 280 }],
      };
      for (const [name, edit] of Object.entries(edits)) {
        for (const version of ['v1', 'a much longer version'] as const) {
          const keptMessage = encode(
            keptParts(TYPES[0] as string, values, [{ field: 'version', text: 'v0' }]),
          );
          const kept = keptLayout(keptMessage);
          const keptBefore = Buffer.from(kept.message);
          const message = encode([
            { field: 'version', text: version },
            ...edited(values, edit),
            { field: 'type', text: TYPES[0] as string },
            { field: 'nonce', text: 'n' },
          ]);
          const got = receive(message, [6, 1000, 1001, 7000, 20_000, 20_001, 33_000], [kept]);
          assertExact(message, got);
          const outcome = got[0] as Outcome;
          assert.equal(outcome.as, 'spliced', `${lengths}, ${name}, version ${version}`);
          if (outcome.as === 'spliced') {
            const keptBuffer = kept.entry(0).value.buffer;
            const layout = outcome.layout;
            let shared = 0;
            for (let i = 0; i < layout.count; i++) {
              const k = layout.offsets[4 * i + 3] as number;
              // An entry the splice took from the kept response is a view of the kept bytes; any
              // other lies in the splice's own buffer, which holds the few bytes that changed.
              if (k >= 0 && layout.entry(i).value.buffer === keptBuffer) shared++;
              assert.equal(layout.inOwnBytes(i), k < 0, `entry ${i}`);
            }
            assert.ok(shared >= layout.count - 4, `${name}: ${shared} of ${layout.count} entries shared`);
            assert.ok(layout.pieces <= 12, `${name}: ${layout.pieces} buffers`);
            assert.equal(
              kept.message.toString('hex'),
              keptBefore.toString('hex'),
              'the kept response unchanged',
            );
          }
        }
      }
    }
  });

  /** Edits of entries only: each response can be made of the last. */
  const entryEdit: fc.Arbitrary<Edit> = fc.record({
    op: fc.constantFrom(
      'change' as const,
      'insert' as const,
      'remove' as const,
      'swap' as const,
      'duplicate' as const,
    ),
    at: fc.nat(),
    value,
  });

  it('reads responses made one of the next, many in a row, as the bytes sent, none changing another', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(entryEdit, { minLength: 1, maxLength: 3 }), { minLength: 5, maxLength: 25 }),
        (rounds) => {
          let values: Uint8Array[] = Array.from({ length: 120 }, (_, i) => Buffer.alloc(40 + (i % 50), i));
          let kept = keptLayout(encode(keptParts(TYPES[0] as string, values, [])));
          // Every layout kept so far, with its entries as they were when it was made.
          const made: { readonly layout: ResponseLayout; readonly entries: string[] }[] = [];
          let spliced = 0;
          const entries = (layout: ResponseLayout): string[] =>
            Array.from({ length: layout.count }, (_, i) =>
              Buffer.from(layout.entry(i).value).toString('hex'),
            );
          for (const edits of rounds) {
            const parts = edited(values, edits);
            const message = encode([...parts, { field: 'type', text: TYPES[0] as string }]);
            const got = receive(message, [7, 900, 901, 4000], [kept]);
            assertExact(message, got);
            const outcome = got[0] as Outcome;
            if (outcome.as === 'bytes') kept = keptLayout(outcome.bytes);
            else if (outcome.as === 'resent') kept = outcome.layout;
            else {
              kept = outcome.layout;
              kept.keepBytes();
              keptMessages.set(kept, message);
              spliced++;
            }
            values = parts.flatMap((p) => (p.field === 'entry' ? [p.value] : []));
            made.push({ layout: kept, entries: entries(kept) });
            assert.deepEqual(
              made.map((m) => entries(m.layout)),
              made.map((m) => m.entries),
              'a kept layout read the same after the next was made of it',
            );
          }
          // Some edits leave nothing to splice (a swap of equal entries sends the state again).
          assert.ok(spliced >= rounds.length / 2, `${spliced} of ${rounds.length} responses spliced`);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('copies a response that differs in more entries than it is worth comparing', () => {
    const values = Array.from({ length: 400 }, (_, i) => Buffer.alloc(200, i % 251));
    const kept = keptLayout(encode(keptParts(TYPES[0] as string, values, [])));
    // Every entry changed: more than an eighth of the response (and 64 KiB) would be copied.
    const message = encode(
      keptParts(
        TYPES[0] as string,
        // None of them a kept one's: each kept value is one byte repeated.
        values.map((v, i) => Buffer.concat([Buffer.from([i % 256, 0xee]), v.subarray(2)])),
        [],
      ),
    );
    const got = receive(message, [6, 5000, 50_000], [kept]);
    assertExact(message, got);
    assert.equal(got[0]?.as, 'bytes');
  });

  it('leaves to the layout a response that ends inside a field', () => {
    const values = Array.from({ length: 5 }, (_, i) => Buffer.alloc(40, i));
    const kept = keptLayout(encode(keptParts(TYPES[0] as string, values, [])));
    const whole = encode(keptParts(TYPES[0] as string, values, [{ field: 'version', text: 'v2' }]));
    // A tag going on past the end, a length missing, a value cut short, a varint missing.
    for (const tail of [[0x92], [0x2a], [0x2a, 0x05, 0x61], [0x18], [0x18, 0x80]]) {
      const message = Buffer.concat([whole, Buffer.from(tail)]);
      const got = receive(message, [6, 200], [kept]);
      assert.deepEqual(
        got.map((o) => (o.as === 'bytes' ? o.bytes.toString('hex') : 'resent')),
        [message.toString('hex')],
        `ending with ${Buffer.from(tail).toString('hex')}`,
      );
    }
  });

  it('leaves to the layout a field it cannot tell is well formed, wherever it stands', () => {
    const values = Array.from({ length: 5 }, (_, i) => Buffer.alloc(40, i));
    const malformed = [
      [0x08, 0x01], // version_info as a varint
      [0x10, 0x01], // an entry as a varint
      [0x20, 0x01], // type_url as a varint
      [0x28, 0x01], // nonce as a varint
      [0x00, 0x01], // field 0
      [0x80, 0x80, 0x80, 0x80, 0x80, 0x08, 0x01], // a tag of more than five bytes
      [0xff, 0xff, 0xff, 0xff, 0x7f, 0x01], // a tag over 32 bits
      [0x1a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], // a length of more than five bytes
      [0x18, ...Array<number>(10).fill(0x80), 0x01], // a varint of more than ten bytes
      [0x1b, 0x0a, 0x00, 0x1c], // a group
      [0x1e, 0x01], // wire type 6
      [0x1f, 0x01], // wire type 7
      [0x12, 0x00], // one more entry, empty, no kept response's
    ];
    for (const field of malformed) {
      for (const at of ['before', 'after', 'last'] as const) {
        const other: Part = { field: 'other', bytes: Buffer.from(field) };
        const entries = values.map((v): Part => ({ field: 'entry', value: v }));
        const message = encode([
          ...(at === 'before' ? [other] : []),
          ...entries,
          ...(at === 'after' ? [other] : []),
          { field: 'type', text: TYPES[0] as string },
          { field: 'nonce', text: 'n' },
          ...(at === 'last' ? [other] : []),
        ]);
        let read = 'well formed';
        try {
          new ResponseLayout(message);
        } catch {
          read = 'refused';
        }
        // Kept anew for each response.
        const kept = keptLayout(encode(keptParts(TYPES[0] as string, values, [])));
        const got = receive(message, [6, 60, 61, 62], [kept]);
        assertExact(message, got);
        if (read === 'refused')
          assert.equal(got[0]?.as, 'bytes', `${Buffer.from(field).toString('hex')} ${at}`);
      }
    }
  });

  it('leaves a response to be copied when its kept response was replaced while it arrived', () => {
    const values = Array.from({ length: 50 }, (_, i) => Buffer.alloc(100, i));
    const layout = new ResponseLayout(encode(keptParts(TYPES[0] as string, values, [])));
    const message = encode(keptParts(TYPES[0] as string, values, [{ field: 'version', text: 'v2' }]));
    const out: Outcome[] = [];
    let kept = true;
    const reader = new GrpcMessageReader(1 << 20, true, () => {
      return new ResentResponseMatcher(
        [layout],
        {
          isKept: () => kept,
          resent: (l, h) => out.push({ as: 'resent', layout: l, head: h }),
          spliced: () => assert.fail('not kept'),
        },
        message.byteLength,
      );
    });
    const chunks = chunked(framed([message]), [1000, 3000]);
    reader.push(chunks[0] as Buffer, () => assert.fail('not whole yet'));
    kept = false;
    for (const chunk of chunks.slice(1))
      reader.push(chunk, (m) => out.push({ as: 'bytes', bytes: Buffer.from(m) }));
    assert.deepEqual(
      out.map((o) => (o.as === 'bytes' ? o.bytes.toString('hex') : 'resent')),
      [message.toString('hex')],
    );
  });

  it('reads a response to its end against a kept response another one was made of meanwhile', () => {
    const values = Array.from({ length: 50 }, (_, i) => Buffer.alloc(100, i));
    const changed = (at: number): Buffer =>
      encode([
        ...edited(values, [{ op: 'change', at, value: Buffer.alloc(100, 99) }]),
        { field: 'type', text: TYPES[0] as string },
      ]);
    const kept = keptLayout(encode(keptParts(TYPES[0] as string, values, [])));
    const made: ResponseLayout[] = [];
    const reader = (): GrpcMessageReader =>
      new GrpcMessageReader(1 << 20, true, (size) => {
        return new ResentResponseMatcher(
          [kept],
          {
            isKept: (layout) => layout === kept,
            resent: () => assert.fail('not resent'),
            spliced: (base, splice) => made.push(base.splice(splice)),
          },
          size,
        );
      });
    // One response arrives halfway; meanwhile another, read whole, is made of the kept one.
    const first = reader();
    const chunks = chunked(framed([changed(40)]), [2000]);
    first.push(chunks[0] as Buffer, () => assert.fail('not whole yet'));
    const second = reader();
    for (const chunk of chunked(framed([changed(10)]), [3000]))
      second.push(chunk, () => assert.fail('spliced'));
    first.push(chunks[1] as Buffer, () => assert.fail('spliced'));
    assert.deepEqual(
      made.map((layout) => Buffer.from(layout.message).toString('hex')),
      [changed(10).toString('hex'), changed(40).toString('hex')],
    );
    assert.equal(made[1]?.entry(40).value[0], 99);
    assert.equal(made[1]?.entry(10).value[0], 10, 'the kept bytes unchanged by the response made of them');
  });
});

describe('an xds source whose upstream sends its state again on a new stream (real gRPC)', () => {
  const calls = { resent: 0, spliced: 0, copied: 0 };
  const deliver = Object.getOwnPropertyDescriptor(ResentResponseMatcher.prototype, 'deliver')?.value as (
    this: ResentResponseMatcher,
  ) => void;
  const copyTaken = Object.getOwnPropertyDescriptor(ResentResponseMatcher.prototype, 'copyTaken')?.value as (
    this: ResentResponseMatcher,
    target: Uint8Array,
  ) => void;
  const splice = Object.getOwnPropertyDescriptor(ResponseLayout.prototype, 'splice')?.value as (
    this: ResponseLayout,
    splice: ResponseSplice,
  ) => ResponseLayout;
  let fake: FakeAdsServer;
  let recorder: SourceEventRecorder;

  before(async () => {
    // Counts which way each response the matcher was offered went.
    ResentResponseMatcher.prototype.deliver = function (this: ResentResponseMatcher): void {
      calls.resent++;
      deliver.call(this);
    };
    ResponseLayout.prototype.splice = function (
      this: ResponseLayout,
      spliced: ResponseSplice,
    ): ResponseLayout {
      calls.resent--;
      calls.spliced++;
      return splice.call(this, spliced);
    };
    ResentResponseMatcher.prototype.copyTaken = function (
      this: ResentResponseMatcher,
      target: Uint8Array,
    ): void {
      calls.copied++;
      copyTaken.call(this, target);
    };
    fake = await FakeAdsServer.start({ peer: 'istiod' });
    // About 100 KB of VirtualServices: large enough to be compared as it arrives.
    fake.set(
      'VirtualService',
      Array.from({ length: 800 }, (_, i) => fakeVirtualService(`vs-${i}`, `host-${i}.example.com`)),
    );
    recorder = await syncedXdsSource(fake.address, ['VirtualService']);
  });
  after(async () => {
    ResentResponseMatcher.prototype.deliver = deliver;
    ResentResponseMatcher.prototype.copyTaken = copyTaken;
    ResponseLayout.prototype.splice = splice;
    recorder.close();
    await fake.stop();
  });

  /** Ends the stream and waits for the ACK of the first response on the next one. */
  async function reconnect(): Promise<void> {
    const streams = fake.streams;
    fake.disconnectAll();
    await fake.waitFor(
      () => {
        const sent = fake.sent.find((s) => s.stream > streams && s.typeUrl === VS_V1);
        return sent !== undefined && fake.requests.some((r) => r.nonce === sent.nonce);
      },
      10_000,
      'the ACK of the state sent on the new stream',
    );
  }

  function served(): string[] {
    return [...(recorder.lastSnapshot()?.resources ?? [])].map((r) => `${r.name}@${r.version}`).sort();
  }

  it('ACKs a state sent again without copying it, and reads one with a change', async () => {
    const before = served();
    assert.equal(before.length, 800);
    await reconnect();
    assert.deepEqual(calls, { resent: 1, spliced: 0, copied: 0 }, 'taken as the kept state, nothing copied');
    const ack = fake.requests.at(-1);
    assert.equal(ack?.errorDetail, null, 'an ACK');
    assert.equal(ack?.versionInfo, fake.sent.at(-1)?.versionInfo, 'of the version sent on the new stream');
    assert.deepEqual(served(), before, 'the same objects served');

    fake.set(
      'VirtualService',
      Array.from({ length: 800 }, (_, i) =>
        fakeVirtualService(`vs-${i}`, i === 400 ? 'moved.example.com' : `host-${i}.example.com`),
      ),
    );
    const from = recorder.events.length;
    await reconnect();
    assert.deepEqual(
      calls,
      { resent: 1, spliced: 1, copied: 0 },
      'compared with the kept state, the change spliced into it',
    );
    const snapshot = await recorder.snapshot(from);
    const moved = [...snapshot.resources].find((r) => r.name === 'vs-400');
    assert.ok(
      moved !== undefined && before.every((line) => line !== `vs-400@${moved.version}`),
      'vs-400 changed',
    );
    assert.equal(snapshot.resources.length, 800);
  });

  it('serves what a fresh read serves after changes spliced into the kept state on one stream', async () => {
    const hosts = Array.from({ length: 800 }, (_, i) => `host-${i}.example.com`);
    const objects = (): ReturnType<typeof fakeVirtualService>[] =>
      hosts.flatMap((host, i) => (host === '' ? [] : [fakeVirtualService(`vs-${i}`, host)]));
    // A host of the same length (the entry's length unchanged), one removed, one added.
    const steps: readonly { readonly step: () => void; readonly gone: number; readonly came: number }[] = [
      { step: () => (hosts[401] = 'hosx-401.example.com'), gone: 1, came: 1 },
      { step: () => (hosts[10] = ''), gone: 1, came: 0 },
      { step: () => hosts.push('new-800.example.com'), gone: 0, came: 1 },
    ];
    const start = recorder.events.length;
    fake.set('VirtualService', objects()).push();
    await recorder.snapshot(start);
    for (const { step, gone, came } of steps) {
      const spliced = calls.spliced;
      const copied = calls.copied;
      const before = served();
      step();
      const from = recorder.events.length;
      fake.set('VirtualService', objects()).push();
      const snapshot = await recorder.snapshot(from);
      assert.equal(calls.spliced, spliced + 1, 'spliced into the kept state');
      assert.equal(calls.copied, copied, 'not copied');
      assert.equal(snapshot.resources.length, hosts.filter((h) => h !== '').length);
      const after = served();
      assert.deepEqual(
        {
          gone: before.filter((line) => !after.includes(line)).length,
          came: after.filter((line) => !before.includes(line)).length,
        },
        { gone, came },
        'only the object edited changed',
      );
    }
    // A source that reads the same state on a stream of its own serves the same objects, versions
    // (hashes of their content) included.
    const fresh = await syncedXdsSource(fake.address, ['VirtualService']);
    try {
      const theirs = [...(fresh.lastSnapshot()?.resources ?? [])].map((r) => `${r.name}@${r.version}`).sort();
      assert.deepEqual(served(), theirs);
    } finally {
      fresh.close();
    }
  });
});
