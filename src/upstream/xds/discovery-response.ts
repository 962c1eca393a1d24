import { firstAtOrAfter } from '../../core/first-at-or-after.js';
import { WireCursor } from '../../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED } from '../../wire/wire-types.js';
import { ByteRope, RopeBuilder } from './byte-rope.js';

/** One `google.protobuf.Any` of a response's `resources`. */
export interface ResponseEntry {
  readonly typeUrl: string;
  /**
   * A view into the response's bytes, a plain `Uint8Array` (not a `Buffer`): what a reader keeps
   * as an object's envelope where it may keep a view (see `McpResourceReader.read`).
   */
  readonly value: Uint8Array;
}

/** A piece of a {@link ResponseSplice} taken from the splice's own bytes. */
export const PIECE_OWN = 0;
/** A piece of a {@link ResponseSplice} taken from the bytes of the layout it is written over. */
export const PIECE_KEPT = 1;

/**
 * A response described as pieces of a kept layout's bytes and of bytes of its own, with the
 * layout a walk of those bytes would find, for {@link ResponseLayout.splice} to make a layout of.
 */
export interface ResponseSplice {
  /** Bytes of the response. */
  readonly size: number;
  /**
   * The response in order, as triples: {@link PIECE_OWN} or {@link PIECE_KEPT}, then where the
   * piece starts and ends in `own` or in the kept layout's bytes.
   */
  readonly pieces: readonly number[];
  readonly own: Uint8Array;
  /** Entries of `resources`, and their offsets as {@link ResponseLayout.offsets} holds them. */
  readonly count: number;
  readonly offsets: Int32Array<ArrayBuffer>;
  /** The entries after which something else comes before the next entry, in order. */
  readonly runEnds: readonly number[];
  /** The entries that are the kept layout's, as {@link ResponseLayout} notes them (see `fromBase`). */
  readonly fromBase: readonly number[];
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
}

function expectLengthDelimited(field: number, wireType: number, where: string): void {
  if (wireType !== WIRE_LENGTH_DELIMITED) {
    throw new Error(`${where} field ${field} has wire type ${wireType}, expected ${WIRE_LENGTH_DELIMITED}`);
  }
}

/** Objects compared in one range before falling back to one comparison per object. */
const RUN = 512;

/** Numbers kept per entry in `offsets`: see {@link ResponseLayout.offsets}. */
export const OFFSETS_PER_ENTRY = 4;
const STRIDE = OFFSETS_PER_ENTRY;
/** The tag of a `resources` entry (field 2, length-delimited): one byte. */
const ENTRY_TAG = (2 << 3) | WIRE_LENGTH_DELIMITED;
/** How far past the expected entry of the earlier response a read entry is looked for. */
const AHEAD = 8;
/** How far before it (entries the earlier response had, taken for removed, that come back). */
const BEHIND = 2;
/** Entries read, looking for one of an earlier response, before the layout stops looking. */
const PROBES = 8;

/**
 * Where each part of an `envoy.service.discovery.v3.DiscoveryResponse` lies, found by walking its
 * top-level fields only: the strings a state-of-the-world client acts on, and per entry of
 * `resources` the offsets of its field and of its `Any`. Nothing inside an entry is read until
 * asked for ({@link entry}), so a reader can tell which entries are byte for byte those of the
 * previous response (one comparison over a run of them, see {@link commonPrefix}) and read only
 * the rest. Fields other than 1, 2, 4 and 5 are skipped.
 *
 * Given earlier layouts (the last response of each type), the walk skips what they share: once an
 * entry is found byte for byte in one of them, the bytes from there on are compared in large runs
 * with that response's, and every entry inside the part that agrees takes its offsets from there,
 * shifted, without being walked. Equal bytes are the same fields with the same boundaries, so this
 * is the layout a walk finds; a state of the world with one change among 50k objects is then one
 * comparison of its bytes and a walk of the changed entry, not a walk of every entry.
 *
 * A layout reads the message in place (a view the transport lends, valid while it is read); one
 * kept for comparing with the next response takes over the transport's buffer the message lies
 * in ({@link adoptBytes}) or copies its bytes into a buffer of its own ({@link keepBytes}), and
 * from then on its bytes are never written again: the objects read from it keep views of them
 * instead of copies. A response that differs from a kept one in a few entries is made of that
 * layout's bytes and a small buffer of the entries that changed ({@link splice}), so an object's
 * bytes are held once, where the response that brought them put them, for as long as any kept
 * response or object uses them.
 */
export class ResponseLayout {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Entries of `resources`. */
  readonly count: number;
  private rope: ByteRope;
  /** Whether the bytes are the layout's own (kept), not the message it was read from. */
  private owned = false;
  /** The buffer of a spliced layout's own bytes (its changed entries), or none. */
  private ownBuffer: ArrayBufferLike | undefined;
  /**
   * Per entry `i`, at `4i` to `4i + 3`: where its tag begins, where the `Any` it carries begins
   * and ends, and the entry of {@link base} it was found equal to without a walk (-1 when it was
   * walked). May be longer than needed (reused between layouts).
   */
  readonly offsets: Int32Array<ArrayBuffer>;
  /** The earlier layout entries were taken from, until this one is kept. */
  private base: ResponseLayout | undefined;
  /**
   * The entries after which something other than the next entry comes (a field between two
   * entries), in order: where the runs {@link runFrom} answers with end. Nearly always none.
   */
  private readonly runEnds: readonly number[];
  /**
   * The entries taken for {@link base}'s, as triples: the first entry, the entry of `base` it is,
   * and how many follow one another in both (each run as long as it goes). What the fourth number
   * of each entry's offsets says, in a few numbers instead of one per entry: the shared ends of
   * the two layouts are read from here, not walked entry by entry.
   */
  private readonly fromBase: readonly number[];
  /** The last type URL read by {@link entry}: its bytes (a copy) and its text, to share one string. */
  private lastType = { bytes: EMPTY, text: '' };
  /** The buffer the entry walked last lies in (see {@link walkEntry}). */
  private walked: Buffer = EMPTY;

  /**
   * Throws on bytes that are not a well-formed message at the top level (overruns, wrong wire
   * types). `offsets`: an array to write the offsets into (one no longer used, from an earlier
   * layout, and none of `earlier`'s), replaced by a larger one when the message holds more
   * entries. `earlier`: kept layouts, to take shared entries from.
   */
  constructor(
    message: Uint8Array,
    offsets: Int32Array<ArrayBuffer> = new Int32Array(STRIDE * 64),
    earlier: readonly ResponseLayout[] = [],
    /** The layout, already known (see {@link splice}): the bytes are not walked, and are owned. */
    known?: {
      readonly splice: ResponseSplice;
      readonly base: ResponseLayout;
      readonly rope: ByteRope;
      readonly ownBuffer: ArrayBufferLike;
    },
  ) {
    if (known !== undefined) {
      const { splice, base } = known;
      this.rope = known.rope;
      this.ownBuffer = known.ownBuffer;
      this.versionInfo = splice.versionInfo;
      this.typeUrl = splice.typeUrl;
      this.nonce = splice.nonce;
      this.count = splice.count;
      this.offsets = splice.offsets;
      this.runEnds = splice.runEnds;
      this.fromBase = splice.fromBase;
      this.base = base;
      this.owned = true;
      return;
    }
    const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
    this.rope = ByteRope.of(bytes);
    const cursor = new WireCursor(bytes);
    const limit = bytes.byteLength;
    let versionInfo = '';
    let typeUrl = '';
    let nonce = '';
    let at4 = offsets;
    let count = 0;
    let base: ResponseLayout | undefined;
    const runEnds: number[] = [];
    const fromBase: number[] = [];
    // The entry of `base` the next one is expected to be (the one after the last found or read).
    let next = 0;
    let probes = earlier.length > 0 ? PROBES : 0;
    while (cursor.pos < limit) {
      const at = cursor.pos;
      if (bytes[at] === ENTRY_TAG && (base !== undefined || probes > 0)) {
        let found = -1;
        if (base !== undefined) found = base.findEntry(bytes, at, next);
        else {
          probes--;
          for (const candidate of earlier) {
            found = candidate.findEntry(bytes, at, count);
            if (found >= 0) {
              base = candidate;
              break;
            }
          }
        }
        if (base !== undefined && found >= 0) {
          const taken = base.sharedRun(found, bytes, at);
          const shift = at - (base.offsets[STRIDE * found] as number);
          if (STRIDE * (count + taken) > at4.length) at4 = grown(at4, STRIDE * (count + taken));
          const from = base.offsets;
          noteEntries(at4, count, (from[STRIDE * found] as number) + shift, runEnds, fromBase, found, taken);
          for (let k = found; k < found + taken; k++) {
            const o = STRIDE * count;
            at4[o] = (from[STRIDE * k] as number) + shift;
            at4[o + 1] = (from[STRIDE * k + 1] as number) + shift;
            at4[o + 2] = (from[STRIDE * k + 2] as number) + shift;
            at4[o + 3] = k;
            count++;
          }
          next = found + taken;
          cursor.pos = (from[STRIDE * (next - 1) + 2] as number) + shift;
          continue;
        }
      }
      const tag = cursor.uint32(limit);
      const field = tag >>> 3;
      if (field === 0) throw new Error(`invalid field number 0 at byte ${cursor.pos}`);
      if (field !== 1 && field !== 2 && field !== 4 && field !== 5) {
        cursor.skip(tag & 7, limit, field);
        continue;
      }
      expectLengthDelimited(field, tag & 7, 'DiscoveryResponse');
      cursor.lengthDelimited(limit);
      if (field === 2) {
        if (STRIDE * count + STRIDE > at4.length) at4 = grown(at4, STRIDE * count + STRIDE);
        noteEntries(at4, count, at, runEnds, fromBase, -1, 1);
        at4[STRIDE * count] = at;
        at4[STRIDE * count + 1] = cursor.start;
        at4[STRIDE * count + 2] = cursor.end;
        at4[STRIDE * count + 3] = -1;
        count++;
        // A changed entry stands in for the one at its place.
        next++;
      } else {
        const text = bytes.toString('utf8', cursor.start, cursor.end);
        if (field === 1) versionInfo = text;
        else if (field === 4) typeUrl = text;
        else nonce = text;
      }
    }
    this.versionInfo = versionInfo;
    this.typeUrl = typeUrl;
    this.nonce = nonce;
    this.count = count;
    this.offsets = at4;
    this.runEnds = runEnds;
    this.fromBase = fromBase;
    this.base = base;
  }

  /**
   * The entry of this layout near `expected` whose bytes are those at `at` in `bytes` (tag,
   * length and `Any`), or -1. Looks at `expected`, then after it, then just before it.
   */
  private findEntry(bytes: Buffer, at: number, expected: number): number {
    const last = Math.min(this.count - 1, expected + AHEAD);
    for (let k = Math.max(0, expected); k <= last; k++) if (this.entryAt(k, bytes, at)) return k;
    for (let k = Math.min(expected, this.count) - 1; k >= Math.max(0, expected - BEHIND); k--) {
      if (this.entryAt(k, bytes, at)) return k;
    }
    return -1;
  }

  private entryAt(k: number, bytes: Buffer, at: number): boolean {
    const start = this.offsets[STRIDE * k] as number;
    const end = this.offsets[STRIDE * k + 2] as number;
    if (at + (end - start) > bytes.byteLength) return false;
    return this.rope.equals(start, bytes, at, at + (end - start));
  }

  /**
   * How many entries from `k` on (at least one: entry `k` is at `at`, checked) lie, with nothing
   * between them, in the bytes `bytes` shares with this layout from `at` on. A field between two
   * entries ends the run: the walk reads it (it may be a repeated string field).
   */
  private sharedRun(k: number, bytes: Buffer, at: number): number {
    const start = this.offsets[STRIDE * k] as number;
    const lastEnd = this.offsets[STRIDE * (this.count - 1) + 2] as number;
    const agree =
      start + this.rope.agreeing(start, bytes, at, Math.min(lastEnd - start, bytes.byteLength - at));
    let end = k + 1;
    while (
      end < this.count &&
      this.offsets[STRIDE * end] === this.offsets[STRIDE * (end - 1) + 2] &&
      (this.offsets[STRIDE * end + 2] as number) <= agree
    ) {
      end++;
    }
    return end - k;
  }

  /**
   * Copies the layout's bytes out of the message it was read from into a buffer of their own,
   * unless they are its own already; either way the layout is kept from here on, and no longer
   * refers to the layout it was read against.
   */
  keepBytes(): void {
    this.base = undefined;
    if (this.owned) return;
    const size = this.rope.size;
    const target = Buffer.allocUnsafeSlow(size);
    this.rope.copy(0, size, target, 0);
    this.rope = ByteRope.of(target);
    this.owned = true;
  }

  /**
   * Takes `buffer`, which the layout's bytes are a view of (the transport's reassembly buffer,
   * handed over for good), as the layout's own: nothing is copied. Returns false, changing
   * nothing, when the bytes do not lie in it.
   */
  adoptBytes(buffer: Buffer): boolean {
    const size = this.rope.size;
    const only = size > 0 ? this.rope.partHolding(0, size) : undefined;
    if (this.owned || only === undefined || buffer.buffer !== only.buffer) return false;
    this.base = undefined;
    this.owned = true;
    return true;
  }

  /** Whether the bytes are the layout's own, never written again: views of them may be kept. */
  get kept(): boolean {
    return this.owned;
  }

  /** The response's bytes, as one view (a copy when the layout is made of several buffers). */
  get message(): Buffer {
    return this.rope.view(0, this.rope.size);
  }

  /** Buffers the layout's bytes lie in, one per run of them that is contiguous in memory. */
  get pieces(): number {
    return this.rope.partCount;
  }

  /** Where entry `k` (0 ≤ k < count) begins: its tag, in the layout's bytes. */
  entryStart(k: number): number {
    return this.offsets[STRIDE * k] as number;
  }

  /** Where entry `k` ends. */
  entryEnd(k: number): number {
    return this.offsets[STRIDE * k + 2] as number;
  }

  /** Bytes of entry `k`'s tag and length. */
  entryHeaderLength(k: number): number {
    return (this.offsets[STRIDE * k + 1] as number) - (this.offsets[STRIDE * k] as number);
  }

  /**
   * The entries from `k` on that follow one another with nothing between them: the entry after
   * the last of them (or `count`), and where that last one ends.
   */
  runFrom(k: number): { readonly next: number; readonly end: number } {
    // The first run end at or after `k`, by halves: nothing per entry (a walk of every entry of a
    // layout costs about a millisecond per 50k of them, and each change of a kind brings a layout).
    const ends = this.runEnds;
    const low = firstAtOrAfter(ends, k);
    const next = low < ends.length ? (ends[low] as number) + 1 : this.count;
    return { next, end: this.offsets[STRIDE * (next - 1) + 2] as number };
  }

  /** Whether the layout's bytes from `at` are those of `chunk` from `from` to `to`. */
  holds(at: number, chunk: Uint8Array, from: number, to: number): boolean {
    return this.rope.equals(at, chunk, from, to);
  }

  /** How many bytes of `chunk` from `from` (before `to`) are the layout's from `at` on. */
  agreeing(at: number, chunk: Uint8Array, from: number, to: number): number {
    const n = Math.min(to - from, this.rope.size - at);
    return n > 0 ? this.rope.agreeing(at, chunk, from, n) : 0;
  }

  /** Copies the layout's bytes from `start` to `end` into `target` at `at`. */
  copyRange(start: number, end: number, target: Uint8Array, at: number): void {
    this.rope.copy(start, end, target, at);
  }

  /**
   * The layout of `splice` (a response made of this layout's bytes and others): its bytes are
   * views of this layout's where the splice takes them from here, and a buffer of the splice's own
   * bytes, copied, for the rest; nothing of this layout changes. The new layout takes its entries
   * for equal to this one's where its offsets say so (see {@link sameEntry}).
   */
  splice(splice: ResponseSplice): ResponseLayout {
    const p = splice.pieces;
    let ownBytes = 0;
    for (let i = 0; i < p.length; i += 3) {
      if (p[i] === PIECE_OWN) ownBytes += (p[i + 2] as number) - (p[i + 1] as number);
    }
    const own = Buffer.allocUnsafeSlow(ownBytes);
    const builder = new RopeBuilder();
    let at = 0;
    for (let i = 0; i < p.length; i += 3) {
      const start = p[i + 1] as number;
      const end = p[i + 2] as number;
      if (p[i] === PIECE_KEPT) {
        this.rope.appendTo(builder, start, end);
        continue;
      }
      own.set(splice.own.subarray(start, end), at);
      builder.push(own.subarray(at, at + (end - start)));
      at += end - start;
    }
    const rope = builder.build();
    if (rope.size !== splice.size) {
      throw new Error(`a splice of ${splice.size} bytes came to ${rope.size}`);
    }
    return new ResponseLayout(EMPTY, splice.offsets, [], { splice, base: this, rope, ownBuffer: own.buffer });
  }

  /**
   * Whether entry `i`'s bytes lie in the buffer of a splice's own bytes, which holds little but
   * the entries it changed: an object read from there may keep them as they lie.
   */
  inOwnBytes(i: number): boolean {
    if (this.ownBuffer === undefined) return false;
    const start = this.offsets[STRIDE * i + 1] as number;
    const end = this.offsets[STRIDE * i + 2] as number;
    const part = start < end ? this.rope.partHolding(start, end) : undefined;
    return part !== undefined && part.buffer === this.ownBuffer;
  }

  /**
   * Entry `i` (0 ≤ i < count), its `Any` walked in place. Throws when the `Any` is not well formed;
   * its fields other than 1 and 2 are skipped.
   */
  entry(i: number): ResponseEntry {
    const any = this.walkEntry(i);
    const bytes = this.walked;
    const last = this.lastType;
    let typeUrl: string;
    const typeLength = any.typeEnd - any.typeStart;
    if (
      last.bytes.byteLength === typeLength &&
      bytes.compare(last.bytes, 0, typeLength, any.typeStart, any.typeEnd) === 0
    ) {
      typeUrl = last.text;
    } else {
      typeUrl = bytes.toString('utf8', any.typeStart, any.typeEnd);
      this.lastType = { bytes: Buffer.from(bytes.subarray(any.typeStart, any.typeEnd)), text: typeUrl };
    }
    const value = new Uint8Array(
      bytes.buffer,
      bytes.byteOffset + any.valueStart,
      any.valueEnd - any.valueStart,
    );
    return { typeUrl, value };
  }

  /** Throws when entry `i`'s `Any` is not well formed, as {@link entry} would; reads nothing out. */
  checkEntry(i: number): void {
    this.walkEntry(i);
  }

  /**
   * Walks entry `i`'s `Any` in the buffer it lies in, left in {@link walked} (a copy when it spans
   * two: the first bytes of a splice's first entry can be its own).
   */
  private walkEntry(i: number): Readonly<AnyParts> {
    const start = this.offsets[STRIDE * i + 1] as number;
    const end = this.offsets[STRIDE * i + 2] as number;
    const part = start < end ? this.rope.partHolding(start, end) : undefined;
    if (part === undefined) {
      this.walked = this.rope.view(start, end);
      return walkAny(this.walked, 0, end - start);
    }
    this.walked = part;
    const from = start - this.rope.partStart;
    return walkAny(part, from, from + (end - start));
  }

  /** Whether entry `i` of this response and entry `j` of `other` are the same bytes. */
  sameEntry(i: number, other: ResponseLayout, j: number): boolean {
    if (other === this.base && this.offsets[STRIDE * i + 3] === j) return true;
    return this.sameRun(i, other, j, 1);
  }

  /**
   * How many entries from the start are byte for byte those of `other` at the same places, at
   * most `max`. One comparison per run of entries; per entry only inside the run that differs.
   */
  commonPrefix(other: ResponseLayout, max: number): number {
    let n = 0;
    if (other === this.base) {
      // Found equal when the layout was built: no byte compared again.
      const t = this.fromBase;
      if (t[0] === 0 && t[1] === 0) n = Math.min(max, t[2] as number);
      if (n === max) return n;
    }
    while (n < max) {
      const run = Math.min(RUN, max - n);
      if (this.sameRun(n, other, n, run)) {
        n += run;
        continue;
      }
      while (n < max && this.sameRun(n, other, n, 1)) n++;
      return n;
    }
    return n;
  }

  /**
   * How many entries from the end are byte for byte those of `other` at the same places from its
   * end, at most `max`.
   */
  commonSuffix(other: ResponseLayout, max: number): number {
    let n = 0;
    if (other === this.base) {
      const t = this.fromBase;
      const last = t.length - 3;
      if (last >= 0) {
        const run = t[last + 2] as number;
        if ((t[last] as number) + run === this.count && (t[last + 1] as number) + run === other.count) {
          n = Math.min(max, run);
        }
      }
      if (n === max) return n;
    }
    while (n < max) {
      const run = Math.min(RUN, max - n);
      if (this.sameRun(this.count - n - run, other, other.count - n - run, run)) {
        n += run;
        continue;
      }
      while (n < max && this.sameRun(this.count - n - 1, other, other.count - n - 1, 1)) n++;
      return n;
    }
    return n;
  }

  /**
   * Whether `run` entries from `i` here are those from `j` in `other`. The compared ranges start at
   * a tag, so equal bytes are read as the same fields with the same boundaries (any field between
   * two entries is compared too, which can only make the answer more cautious).
   */
  private sameRun(i: number, other: ResponseLayout, j: number, run: number): boolean {
    const start = this.offsets[STRIDE * i] as number;
    const end = this.offsets[STRIDE * (i + run - 1) + 2] as number;
    const otherStart = other.offsets[STRIDE * j] as number;
    const otherEnd = other.offsets[STRIDE * (j + run - 1) + 2] as number;
    if (end - start !== otherEnd - otherStart) return false;
    return this.rope.sameAs(start, end, other.rope, otherStart);
  }
}

/** Where the type URL and the value of an `Any` lie. */
interface AnyParts {
  typeStart: number;
  typeEnd: number;
  valueStart: number;
  valueEnd: number;
}

/** The cursor {@link walkAny} walks with, and the parts it found: one of each for every walk. */
const anyCursor = new WireCursor(new Uint8Array(0));
const anyParts: AnyParts = { typeStart: 0, typeEnd: 0, valueStart: 0, valueEnd: 0 };
/** What the cursor points at between walks: it must not hold a response's buffer alive. */
const NO_BYTES = new Uint8Array(0);

/**
 * Walks the `Any` in `bytes` from `start` to `end` (fields other than 1 and 2 skipped; the last of
 * each taken). Throws when it is not well formed. The parts are the same object for every walk,
 * to be read before the next: a walk per entry, and often two, made two objects per entry.
 */
export function walkAny(bytes: Uint8Array, start: number, end: number): Readonly<AnyParts> {
  const cursor = anyCursor.reset(bytes, start);
  let typeStart = 0;
  let typeEnd = 0;
  let valueStart = 0;
  let valueEnd = 0;
  try {
    while (cursor.pos < end) {
      const tag = cursor.uint32(end);
      const field = tag >>> 3;
      if (field !== 1 && field !== 2) {
        if (field === 0) throw new Error(`invalid field number 0 at byte ${cursor.pos}`);
        cursor.skip(tag & 7, end, field);
        continue;
      }
      expectLengthDelimited(field, tag & 7, 'Any');
      cursor.lengthDelimited(end);
      if (field === 2) {
        valueStart = cursor.start;
        valueEnd = cursor.end;
      } else {
        typeStart = cursor.start;
        typeEnd = cursor.end;
      }
    }
  } finally {
    cursor.reset(NO_BYTES, 0);
  }
  anyParts.typeStart = typeStart;
  anyParts.typeEnd = typeEnd;
  anyParts.valueStart = valueStart;
  anyParts.valueEnd = valueEnd;
  return anyParts;
}

const EMPTY = Buffer.alloc(0);

/**
 * Notes `n` entries about to be written into `offsets` from entry `count` on, the first of them
 * from its tag at `tag`, which follow one another with nothing between them: a run end before them
 * when the entry before ends elsewhere, and, when they are the entries of the base layout from
 * `k` on (`k` ≥ 0), that fact, joined to the run noted last when they go on from it in both.
 */
export function noteEntries(
  offsets: Int32Array,
  count: number,
  tag: number,
  runEnds: number[],
  fromBase: number[],
  k: number,
  n: number,
): void {
  if (count > 0 && offsets[STRIDE * (count - 1) + 2] !== tag) runEnds.push(count - 1);
  if (k < 0) return;
  const last = fromBase.length - 3;
  if (last >= 0) {
    const run = fromBase[last + 2] as number;
    if ((fromBase[last] as number) + run === count && (fromBase[last + 1] as number) + run === k) {
      fromBase[last + 2] = run + n;
      return;
    }
  }
  fromBase.push(count, k, n);
}

function grown(array: Int32Array, atLeast: number): Int32Array<ArrayBuffer> {
  const next = new Int32Array(Math.max(STRIDE * 16, array.length * 2, atLeast));
  next.set(array);
  return next;
}
