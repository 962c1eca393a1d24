import type { MessageMatcher } from '../streaming/grpc-message-reader.js';
import { WIRE_LENGTH_DELIMITED } from '../../wire/wire-types.js';
import {
  noteEntries,
  OFFSETS_PER_ENTRY,
  PIECE_KEPT,
  PIECE_OWN,
  walkAny,
  type ResponseLayout,
  type ResponseSplice,
} from './discovery-response.js';

/** The top-level strings of a response whose entries are a kept response's. */
export interface ResponseHead {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
}

/** What a matcher is told, and asks, of the responses kept. */
export interface ResentResponseHandlers {
  /** Whether `layout` is still the kept response of its type (nothing replaced it meanwhile). */
  isKept(layout: ResponseLayout): boolean;
  /** A response arrived whose entries are all of `layout`'s, in order, byte for byte. */
  resent(layout: ResponseLayout, head: ResponseHead): void;
  /**
   * A response arrived that differs from `layout` (kept, of its type) in a few entries: `splice`
   * says how it is made of `layout`'s bytes and its own ({@link ResponseLayout.splice}).
   */
  spliced(layout: ResponseLayout, splice: ResponseSplice): void;
}

/**
 * Bytes of a response's own (fields other than entries, entries' tags, entries no kept response
 * has) the matcher copies at most, unless an eighth of the response is more.
 */
const MAX_OWN_BYTES = 64 * 1024;

const HEADER = 0;
const VALUE = 1;
const ENTRIES = 2;
/** Comparing the first entry with those of several kept responses whose first entry has its header. */
const CHOOSING = 3;
/** Copying an entry that is not the kept response's at its place (maybe one a little further on). */
const ENTRY = 4;

/** Bytes of the longest varint a well-formed message holds. */
const MAX_VARINT_BYTES = 10;

/** Wire types of values the matcher copies: varint, 64-bit, 32-bit (groups are left to the layout). */
const PLAIN_WIRE_TYPES: ReadonlySet<number> = new Set([0, 1, 5]);

const STRIDE = OFFSETS_PER_ENTRY;
/** A copied entry is looked for among the expected entry of the kept response and this many after it. */
const AHEAD = 8;
/** Entries copied, none of them a kept response's, before the matcher gives up. */
const PROBES = 8;

/**
 * Reads a `DiscoveryResponse` as it arrives, against the responses kept on its stream (the last of
 * each type), so that a response that repeats one needs no buffer of its size: a state sent again
 * (its entries, byte for byte and in order, a kept response's, with any version, nonce or other
 * top-level fields) is handed on as that kept response; one that differs from the kept response of
 * its type in a few entries is handed on as pieces of it and of what differs ({@link ResponseSplice}),
 * to be made a layout of without copying what the kept response holds.
 *
 * Top-level field headers and values other than entries are read and copied (a few bytes). Each
 * entry's tag and length are checked against the kept entry expected at its place, and from there
 * the bytes are compared with the kept response's a chunk at a time, over every entry that follows
 * with nothing between them. Where they stop agreeing, the entry that holds the first byte that
 * differs is copied, and at its end looked for among the next kept entries: found, the comparison
 * goes on after it; not found, it stands in for none of them (a changed or added entry), and the
 * next entry is expected where it was. The kept response is the one whose first entry the
 * response's first agrees with (copied while it agrees with several; the first of them when their
 * first entries are the same). The matcher copies at most an eighth of the response (64 KiB at
 * least) and records 16 bytes per entry; nothing of the response's size is allocated.
 *
 * The matching ends, and the reader copies the response as any other (the bytes taken so far
 * written from the kept response and from what was copied here), at anything the matcher does not
 * read itself (groups, a misplaced wire type, an entry whose `Any` is not well formed: the layout
 * reads, and judges, those), past its bound of copied bytes, or at the end of a response whose
 * type does not suit its kept response.
 */
export class ResentResponseMatcher implements MessageMatcher {
  /** The kept response compared with. */
  private base: ResponseLayout | undefined;
  /** While choosing: the kept responses the first entry's bytes so far agree with. */
  private choices: readonly ResponseLayout[] = [];
  /** While choosing: bytes of the first entry compared (after its header), and how many it has. */
  private chosen = 0;
  private firstLength = 0;
  /** Bytes taken that are the response's own (not compared with `base`). */
  private own = Buffer.allocUnsafe(256);
  private ownLength = 0;
  /** What was taken, in order: triples of where (own or kept), start and end. */
  private readonly pieces: number[] = [];
  /** Bytes of the response taken so far (the pieces' length). */
  private taken = 0;
  private mode = HEADER;
  /** Where the field header being read begins in `own`, or -1 between fields; where in the response. */
  private headerStart = -1;
  private headerAt = 0;
  /** The field whose value is being copied, its value's start in `own`, the bytes left to copy. */
  private field = 0;
  private valueStart = 0;
  private valueLeft = 0;
  /** Whether the value being copied is a varint (copied until its last byte). */
  private varint = false;
  /** Entries of the response read so far, with their offsets (and the kept entry each one is, or -1). */
  private count = 0;
  private offsets: Int32Array<ArrayBuffer>;
  /** Where runs of entries end, and which entries are `base`'s, as the layout notes them. */
  private readonly runEnds: number[] = [];
  private readonly fromBase: number[] = [];
  /** Entries of the response that are no kept one's. */
  private ownEntries = 0;
  /** The entry of `base` the next entry is expected to be. */
  private expected = 0;
  /** While comparing entries: where in `base`, up to where, the entry after those, and the first. */
  private at = 0;
  private runEnd = 0;
  private runNext = 0;
  private runFirst = 0;
  /** What the response's offsets are past `base`'s in the run compared. */
  private shift = 0;
  /** The entry being read: where it begins in the response and in `own` (while copied), and its `Any`. */
  private entryAt = 0;
  private entryOwn = 0;
  private entryAny = 0;
  /** Bytes of the entry being copied still to come. */
  private entryLeft = 0;
  /** Entries copied while no kept response was chosen, before the matcher gives up. */
  private probes = PROBES;
  private readonly maxOwnBytes: number;
  private versionInfo = '';
  private typeUrl = '';
  private nonce = '';
  /**
   * Set once the bytes stopped being what the matcher reads (a field it leaves to the layout,
   * more to copy than it copies): it takes nothing more, and the response is not complete.
   */
  private stopped = false;

  constructor(
    /** The stream's kept responses, any of which this one may repeat. */
    private readonly kept: readonly ResponseLayout[],
    private readonly handlers: ResentResponseHandlers,
    /** Bytes of the response. */
    private readonly size: number,
    /** An array to write the response's offsets into (no kept layout's), grown as needed. */
    offsets: Int32Array<ArrayBuffer> = new Int32Array(STRIDE * 64),
  ) {
    this.maxOwnBytes = Math.max(MAX_OWN_BYTES, size >>> 3);
    this.offsets = offsets;
  }

  take(chunk: Uint8Array, from: number, to: number): number {
    let at = from;
    while (at < to && !this.stopped) {
      if (this.mode === ENTRIES) {
        const base = this.base as ResponseLayout;
        const n = Math.min(to - at, this.runEnd - this.at);
        const agree = base.holds(this.at, chunk, at, at + n) ? n : base.agreeing(this.at, chunk, at, at + n);
        if (agree > 0) {
          this.piece(PIECE_KEPT, this.at, this.at + agree);
          this.at += agree;
          at += agree;
        }
        if (agree < n) this.diverge();
        else if (this.at === this.runEnd) this.endRun();
      } else if (this.mode === ENTRY) {
        const n = Math.min(to - at, this.entryLeft);
        if (!this.copy(chunk, at, at + n)) {
          this.stopped = true;
          break;
        }
        at += n;
        this.entryLeft -= n;
        if (this.entryLeft === 0) this.endEntry();
      } else if (this.mode === CHOOSING) {
        const n = Math.min(to - at, this.firstLength - this.chosen);
        const agree = this.choices.filter((c) =>
          c.holds(valueStart(c, this.expected) + this.chosen, chunk, at, at + n),
        );
        // Copied, as they agree with more than one kept response at different places, or none.
        if (!this.copy(chunk, at, at + n)) {
          this.stopped = true;
          break;
        }
        at += n;
        this.chosen += n;
        if (agree.length === 0) {
          this.entryLeft = this.firstLength - this.chosen;
          this.mode = ENTRY;
          if (this.entryLeft === 0) this.endEntry();
        } else {
          this.choices = agree;
          if (agree.length === 1 || this.chosen === this.firstLength) this.choose(agree[0] as ResponseLayout);
        }
      } else if (this.mode === VALUE) {
        const n = this.varint ? varintBytes(chunk, at, to) : Math.min(to - at, this.valueLeft);
        // A varint longer than ten bytes is left to the layout, which refuses it.
        if ((this.varint && n > this.valueLeft) || !this.copy(chunk, at, at + n)) {
          this.stopped = true;
          break;
        }
        at += n;
        this.valueLeft -= n;
        const ended = this.varint ? (chunk[at - 1] as number) < 0x80 : this.valueLeft === 0;
        if (ended) this.endValue();
      } else {
        if (this.headerStart < 0) {
          this.headerStart = this.ownLength;
          this.headerAt = this.taken;
        }
        if (!this.copy(chunk, at, at + 1)) {
          this.stopped = true;
          break;
        }
        at++;
        // The byte that shows the field is left to the layout is taken (and written back by
        // `copyTaken`); the matcher takes nothing after it.
        if (!this.header()) this.stopped = true;
      }
    }
    return at - from;
  }

  complete(): boolean {
    const base = this.base;
    return (
      base !== undefined &&
      !this.stopped &&
      this.mode === HEADER &&
      this.headerStart < 0 &&
      this.typeUrl === base.typeUrl &&
      this.handlers.isKept(base)
    );
  }

  deliver(): void {
    const base = this.base as ResponseLayout;
    if (this.resent()) {
      this.handlers.resent(base, { versionInfo: this.versionInfo, typeUrl: this.typeUrl, nonce: this.nonce });
      return;
    }
    this.handlers.spliced(base, {
      size: this.size,
      pieces: this.pieces,
      own: this.own,
      count: this.count,
      offsets: this.offsets,
      runEnds: this.runEnds,
      fromBase: this.fromBase,
      versionInfo: this.versionInfo,
      typeUrl: this.typeUrl,
      nonce: this.nonce,
    });
  }

  copyTaken(target: Uint8Array): void {
    let at = 0;
    const p = this.pieces;
    for (let i = 0; i < p.length; i += 3) {
      const start = p[i + 1] as number;
      const end = p[i + 2] as number;
      if (p[i] === PIECE_OWN) target.set(this.own.subarray(start, end), at);
      else (this.base as ResponseLayout).copyRange(start, end, target, at);
      at += end - start;
    }
  }

  /** Every entry the kept response's, at its place. */
  private resent(): boolean {
    return this.ownEntries === 0 && this.count === (this.base as ResponseLayout).count;
  }

  /**
   * Reads the field header in `own` from `headerStart`, once whole: goes on to its value, or to
   * the entry it begins. False when the matching ends here (a field left to the layout).
   */
  private header(): boolean {
    const bytes = this.own;
    let pos = this.headerStart;
    const tag = readVarint(bytes, pos, this.ownLength);
    if (tag === undefined) return this.ownLength - this.headerStart < 5;
    if (tag.value > 0xffffffff) return false;
    pos = tag.end;
    const field = tag.value >>> 3;
    const wireType = tag.value & 7;
    if (field === 0) return false;
    let length = 0;
    if (wireType === WIRE_LENGTH_DELIMITED) {
      const read = readVarint(bytes, pos, this.ownLength);
      if (read === undefined) return this.ownLength - pos < 5;
      length = read.value;
    } else if (field === 1 || field === 2 || field === 4 || field === 5 || !PLAIN_WIRE_TYPES.has(wireType)) {
      return false;
    }
    const headerStart = this.headerStart;
    this.headerStart = -1;
    if (field === 2) return this.startEntry(headerStart, length);
    this.field = field;
    this.valueStart = this.ownLength;
    this.varint = wireType === 0;
    // For a varint: the bytes it may still take.
    this.valueLeft = wireType === 0 ? MAX_VARINT_BYTES : wireType === 1 ? 8 : wireType === 5 ? 4 : length;
    if (!this.varint && this.ownLength + this.valueLeft > this.maxOwnBytes) return false;
    this.mode = VALUE;
    if (!this.varint && this.valueLeft === 0) this.endValue();
    return true;
  }

  /**
   * An entry's header was read (in `own` from `headerStart`, its value `length` bytes): compared
   * with the kept entry expected at its place when that one has the same header, copied otherwise.
   */
  private startEntry(headerStart: number, length: number): boolean {
    this.entryAt = this.headerAt;
    this.entryOwn = headerStart;
    this.entryAny = this.taken;
    const sameHeader = (layout: ResponseLayout, k: number): boolean =>
      k < layout.count &&
      layout.entryHeaderLength(k) === this.ownLength - headerStart &&
      layout.holds(layout.entryStart(k), this.own, headerStart, this.ownLength);
    const base = this.base;
    if (base !== undefined) {
      if (sameHeader(base, this.expected)) {
        this.compareWith(base, this.expected, 0);
        return true;
      }
      return this.copyEntry(length);
    }
    this.choices = this.kept.filter((layout) => sameHeader(layout, this.expected));
    const first = this.choices[0];
    if (first === undefined) return this.copyEntry(length);
    this.firstLength = length;
    this.chosen = 0;
    if (this.choices.length === 1) this.choose(first);
    else this.mode = CHOOSING;
    return true;
  }

  /** Copies the entry being read (`length` bytes after its header); false when that is too much. */
  private copyEntry(length: number): boolean {
    if (this.ownLength + length > this.maxOwnBytes) return false;
    this.entryLeft = length;
    this.mode = ENTRY;
    if (length === 0) this.endEntry();
    return true;
  }

  /** The first entry agrees with `base`'s (the bytes taken so far): compared with it from here on. */
  private choose(base: ResponseLayout): void {
    this.choices = [];
    this.compareWith(base, this.expected, this.chosen);
  }

  /**
   * Compares the entry being read, `done` bytes past its header, and those after it, with
   * `base`'s from its entry `k` on.
   */
  private compareWith(base: ResponseLayout, k: number, done: number): void {
    this.base = base;
    this.runFirst = k;
    this.shift = this.entryAt - base.entryStart(k);
    this.at = base.entryStart(k) + base.entryHeaderLength(k) + done;
    const run = base.runFrom(k);
    this.runEnd = run.end;
    this.runNext = run.next;
    this.mode = ENTRIES;
    if (this.at === this.runEnd) this.endRun();
  }

  private endRun(): void {
    this.matched(this.runNext);
    this.mode = HEADER;
  }

  /** The entries of the run compared, from its first up to `end` (of `base`), agreed whole. */
  private matched(end: number): void {
    this.reserve(end - this.runFirst);
    const base = this.base as ResponseLayout;
    if (end > this.runFirst) {
      const tag = base.entryStart(this.runFirst) + this.shift;
      noteEntries(
        this.offsets,
        this.count,
        tag,
        this.runEnds,
        this.fromBase,
        this.runFirst,
        end - this.runFirst,
      );
    }
    keptOffsets(base.offsets, this.runFirst, end, this.offsets, this.count, this.shift);
    this.count += end - this.runFirst;
    this.expected = end;
  }

  /**
   * The byte at `at` in `base` is not the response's: the entries before the one that holds it
   * agreed, and that one is copied from its start, read again as a field header when the byte is
   * in its header.
   */
  private diverge(): void {
    const base = this.base as ResponseLayout;
    const e = entryHolding(base, this.runFirst, this.runNext, this.at);
    const start = base.entryStart(e);
    const headerEnd = start + base.entryHeaderLength(e);
    if (this.ownLength + (base.entryEnd(e) - start) > this.maxOwnBytes) {
      this.stopped = true;
      return;
    }
    this.matched(e);
    const entryAt = start + this.shift;
    // The entry's bytes so far, taken as the kept one's, are taken again as copied (the same bytes).
    this.rewind(entryAt);
    const own = this.ownLength;
    this.reserveOwn(this.at - start);
    base.copyRange(start, this.at, this.own, own);
    this.ownLength += this.at - start;
    this.piece(PIECE_OWN, own, this.ownLength);
    if (this.at < headerEnd) {
      this.headerStart = own;
      this.headerAt = entryAt;
      this.mode = HEADER;
      return;
    }
    this.entryAt = entryAt;
    this.entryOwn = own;
    this.entryAny = entryAt + (headerEnd - start);
    this.entryLeft = base.entryEnd(e) - this.at;
    this.mode = ENTRY;
  }

  /**
   * The entry copied is whole (in `own` from `entryOwn`): taken as the kept entry it is, when it is
   * one of the next ones, the comparison going on after it; otherwise kept as copied, standing in
   * for none of them. Copied entries whose `Any` is not well formed end the matching.
   */
  private endEntry(): void {
    this.mode = HEADER;
    const length = this.ownLength - this.entryOwn;
    const candidates = this.base === undefined ? this.kept : [this.base];
    for (const layout of candidates) {
      const from = this.base === undefined ? 0 : this.expected;
      const last = Math.min(layout.count - 1, from + AHEAD);
      for (let k = from; k <= last; k++) {
        if (layout.entryEnd(k) - layout.entryStart(k) !== length) continue;
        if (!layout.holds(layout.entryStart(k), this.own, this.entryOwn, this.ownLength)) continue;
        this.base = layout;
        this.rewind(this.entryAt);
        this.piece(PIECE_KEPT, layout.entryStart(k), layout.entryEnd(k));
        this.record(this.entryAt, this.entryAny, this.taken, k);
        this.expected = k + 1;
        return;
      }
    }
    try {
      walkAny(this.own, this.entryOwn + (this.entryAny - this.entryAt), this.ownLength);
    } catch {
      this.stopped = true;
      return;
    }
    this.record(this.entryAt, this.entryAny, this.taken, -1);
    this.ownEntries++;
    if (this.base === undefined && --this.probes === 0) this.stopped = true;
  }

  private record(tag: number, any: number, end: number, k: number): void {
    this.reserve(1);
    noteEntries(this.offsets, this.count, tag, this.runEnds, this.fromBase, k, 1);
    const o = STRIDE * this.count++;
    this.offsets[o] = tag;
    this.offsets[o + 1] = any;
    this.offsets[o + 2] = end;
    this.offsets[o + 3] = k;
  }

  /** Room in `offsets` for `more` entries. */
  private reserve(more: number): void {
    const needed = STRIDE * (this.count + more);
    if (needed <= this.offsets.length) return;
    const next = new Int32Array(Math.max(needed, 2 * this.offsets.length));
    next.set(this.offsets);
    this.offsets = next;
  }

  /** Takes back what was taken from `to` (a place in the response) on. */
  private rewind(to: number): void {
    const p = this.pieces;
    while (this.taken > to) {
      const last = p.length - 3;
      const start = p[last + 1] as number;
      const end = p[last + 2] as number;
      const cut = Math.min(end - start, this.taken - to);
      if (p[last] === PIECE_OWN) this.ownLength -= cut;
      if (cut === end - start) p.length = last;
      else p[last + 2] = end - cut;
      this.taken -= cut;
    }
  }

  private endValue(): void {
    this.mode = HEADER;
    if (this.field !== 1 && this.field !== 4 && this.field !== 5) return;
    const text = this.own.toString('utf8', this.valueStart, this.ownLength);
    if (this.field === 1) this.versionInfo = text;
    else if (this.field === 4) this.typeUrl = text;
    else this.nonce = text;
  }

  /** Copies `chunk[from, to)` into `own`; false, copying nothing, past the bound of copied bytes. */
  private copy(chunk: Uint8Array, from: number, to: number): boolean {
    const end = this.ownLength + (to - from);
    if (end > this.maxOwnBytes) return false;
    this.reserveOwn(to - from);
    this.own.set(chunk.subarray(from, to), this.ownLength);
    this.piece(PIECE_OWN, this.ownLength, end);
    this.ownLength = end;
    return true;
  }

  /** Room in `own` for `more` bytes. */
  private reserveOwn(more: number): void {
    const end = this.ownLength + more;
    if (end <= this.own.byteLength) return;
    const grown = Buffer.allocUnsafe(Math.min(this.maxOwnBytes, Math.max(end, 2 * this.own.byteLength)));
    this.own.copy(grown, 0, 0, this.ownLength);
    this.own = grown;
  }

  private piece(where: number, start: number, end: number): void {
    const p = this.pieces;
    const last = p.length - 3;
    this.taken += end - start;
    if (last >= 0 && p[last] === where && p[last + 2] === start) p[last + 2] = end;
    else p.push(where, start, end);
  }
}

/** The entry of `layout` from `first` (before `next`) whose bytes hold `at`. */
function entryHolding(layout: ResponseLayout, first: number, next: number, at: number): number {
  let low = first;
  let high = next - 1;
  while (low < high) {
    const middle = (low + high + 1) >>> 1;
    if (layout.entryStart(middle) <= at) low = middle;
    else high = middle - 1;
  }
  return low;
}

/** Where the value of `layout`'s entry `k` begins (after its tag and length). */
function valueStart(layout: ResponseLayout, k: number): number {
  return layout.entryStart(k) + layout.entryHeaderLength(k);
}

/** A varint read from `bytes` at `pos` (before `limit`), or undefined when it goes on past it. */
function readVarint(
  bytes: Uint8Array,
  pos: number,
  limit: number,
): { value: number; end: number } | undefined {
  let value = 0;
  for (let shift = 0, i = pos; i < limit && shift < 35; shift += 7, i++) {
    const byte = bytes[i] as number;
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return { value, end: i + 1 };
  }
  return undefined;
}

/**
 * Writes the offsets of kept entries `first` to `end` (before `end`) into `to` from entry `at` on:
 * their tag, `Any` start and end moved by `shift`, and which kept entry each is.
 *
 * A function of its own, on arrays and numbers only: V8 compiles a loop this long while it runs
 * and enters that code again on later calls. Compiled inside a method of the matcher, the code
 * checked the shape the first matchers had, which later ones did not, and was left on every
 * call after the loop (some sixty times in a run of the benchmark on S).
 */
function keptOffsets(
  from: Int32Array,
  first: number,
  end: number,
  to: Int32Array,
  at: number,
  shift: number,
): void {
  for (let k = first, o = STRIDE * at; k < end; k++, o += STRIDE) {
    const b = STRIDE * k;
    to[o] = (from[b] as number) + shift;
    to[o + 1] = (from[b + 1] as number) + shift;
    to[o + 2] = (from[b + 2] as number) + shift;
    to[o + 3] = k;
  }
}

/** Bytes from `at` up to and including the last byte of the varint going on there, or to `to`. */
function varintBytes(chunk: Uint8Array, at: number, to: number): number {
  let i = at;
  while (i < to && (chunk[i] as number) >= 0x80) i++;
  return Math.min(i + 1, to) - at;
}
