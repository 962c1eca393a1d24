import type { MessageMatcher } from '../streaming/grpc-message-reader.js';
import { WIRE_LENGTH_DELIMITED } from '../../wire/wire-types.js';
import type { ResponseLayout } from './discovery-response.js';

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
}

/** Bytes of a response's own (fields other than entries, entries' tags) the matcher copies at most. */
const MAX_OWN_BYTES = 64 * 1024;

const HEADER = 0;
const VALUE = 1;
const ENTRIES = 2;
/** Comparing the first entry with those of several kept responses whose first entry has its header. */
const CHOOSING = 3;

/** Wire types of values the matcher copies: varint, 64-bit, 32-bit (groups are left to the layout). */
const PLAIN_WIRE_TYPES: ReadonlySet<number> = new Set([0, 1, 5]);

const OWN = 0;
const KEPT = 1;

/**
 * Reads a `DiscoveryResponse` as it arrives, looking for a state sent again: a response whose
 * entries are, byte for byte and in order, those of a kept response of the stream (the last of
 * some type), with any version, nonce or other top-level fields. Top-level field headers and
 * values other than entries are read and copied (a few bytes); each entry's tag and length are
 * checked against the kept entry at its place, and from there the bytes are compared with the kept
 * response's a chunk at a time, over every entry that follows with nothing between them. The kept
 * response is the one whose first entry the response's first agrees with (copied while it agrees
 * with several; the first of them when their first entries are the same). Nothing of the size of the response is allocated, so a state sent again costs a
 * comparison of its bytes.
 *
 * The first byte that is not what the kept response holds at its place ends the matching: the
 * reader then copies the response as any other, the bytes taken so far written from the kept
 * response and from what was copied here. So does anything the matcher does not read itself
 * (groups, a misplaced wire type, more than {@link MAX_OWN_BYTES} of other fields): the layout
 * reads, and judges, those.
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
  /** What was taken, in order: triples of where (OWN or KEPT), start and end. */
  private readonly pieces: number[] = [];
  private mode = HEADER;
  /** Where the field header being read begins in `own`, or -1 between fields. */
  private headerStart = -1;
  /** The field whose value is being copied, its value's start in `own`, the bytes left to copy. */
  private field = 0;
  private valueStart = 0;
  private valueLeft = 0;
  /** Whether the value being copied is a varint (copied until its last byte). */
  private varint = false;
  /** Entries of the response taken so far (each the kept one at its place). */
  private entries = 0;
  /** While comparing entries: where in `base`, up to where, and the entry after those. */
  private at = 0;
  private runEnd = 0;
  private runNext = 0;
  private versionInfo = '';
  private typeUrl = '';
  private nonce = '';
  /**
   * Set once the bytes stopped being what the matcher reads (a field it leaves to the layout, an
   * entry no kept response has): it takes nothing more, and the response is not complete.
   */
  private stopped = false;

  constructor(
    /** The stream's kept responses, any of which this one may repeat. */
    private readonly kept: readonly ResponseLayout[],
    private readonly handlers: ResentResponseHandlers,
  ) {}

  take(chunk: Uint8Array, from: number, to: number): number {
    let at = from;
    while (at < to && !this.stopped) {
      if (this.mode === ENTRIES) {
        const n = this.agreeing(chunk, at, to);
        if (n === 0) {
          this.stopped = true;
          break;
        }
        this.piece(KEPT, this.at, this.at + n);
        this.at += n;
        at += n;
        if (this.at === this.runEnd) this.endRun();
      } else if (this.mode === CHOOSING) {
        const n = Math.min(to - at, this.firstLength - this.chosen);
        const agree = this.choices.filter((c) =>
          c.holds(firstValueStart(c) + this.chosen, chunk, at, at + n),
        );
        // Copied, as they agree with more than one kept response at different places.
        if (agree.length === 0 || !this.copy(chunk, at, at + n)) {
          this.stopped = true;
          break;
        }
        at += n;
        this.chosen += n;
        this.choices = agree;
        if (agree.length === 1 || this.chosen === this.firstLength) this.choose(agree[0] as ResponseLayout);
      } else if (this.mode === VALUE) {
        const n = this.varint ? varintBytes(chunk, at, to) : Math.min(to - at, this.valueLeft);
        if (!this.copy(chunk, at, at + n)) {
          this.stopped = true;
          break;
        }
        at += n;
        this.valueLeft -= n;
        const ended = this.varint ? (chunk[at - 1] as number) < 0x80 : this.valueLeft === 0;
        if (ended) this.endValue();
      } else {
        if (this.headerStart < 0) this.headerStart = this.ownLength;
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
      this.entries === base.count &&
      this.typeUrl === base.typeUrl &&
      this.handlers.isKept(base)
    );
  }

  deliver(): void {
    const base = this.base as ResponseLayout;
    this.handlers.resent(base, { versionInfo: this.versionInfo, typeUrl: this.typeUrl, nonce: this.nonce });
  }

  copyTaken(target: Uint8Array): void {
    let at = 0;
    const p = this.pieces;
    for (let i = 0; i < p.length; i += 3) {
      const start = p[i + 1] as number;
      const end = p[i + 2] as number;
      if (p[i] === OWN) target.set(this.own.subarray(start, end), at);
      else (this.base as ResponseLayout).copyRange(start, end, target, at);
      at += end - start;
    }
  }

  /**
   * Reads the field header in `own` from `headerStart`, once whole: goes on to its value, or to
   * comparing the entry it begins. False when the matching ends here (a field left to the layout).
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
    if (field === 2) return this.startEntry(headerStart);
    this.field = field;
    this.valueStart = this.ownLength;
    this.varint = wireType === 0;
    this.valueLeft = wireType === 1 ? 8 : wireType === 5 ? 4 : length;
    if (!this.varint && this.ownLength + this.valueLeft > MAX_OWN_BYTES) return false;
    this.mode = VALUE;
    if (!this.varint && this.valueLeft === 0) this.endValue();
    return true;
  }

  /** An entry's header was read (in `own` from `headerStart`): its bytes are compared from here on. */
  private startEntry(headerStart: number): boolean {
    const k = this.entries;
    const sameHeader = (layout: ResponseLayout): boolean =>
      k < layout.count &&
      layout.entryHeaderLength(k) === this.ownLength - headerStart &&
      layout.holds(layout.entryStart(k), this.own, headerStart, this.ownLength);
    if (this.base !== undefined) {
      if (!sameHeader(this.base)) return false;
      this.compareWith(this.base, 0);
      return true;
    }
    this.choices = this.kept.filter(sameHeader);
    const first = this.choices[0];
    if (first === undefined) return false;
    this.firstLength = first.entryEnd(0) - firstValueStart(first);
    this.chosen = 0;
    if (this.choices.length === 1) this.choose(first);
    else this.mode = CHOOSING;
    return true;
  }

  /** The first entry agrees with `base`'s (the bytes taken so far): compared with it from here on. */
  private choose(base: ResponseLayout): void {
    this.choices = [];
    this.compareWith(base, this.chosen);
  }

  /**
   * Compares the entry being read, `done` bytes past its header, and those after it, with
   * `base`'s at its place.
   */
  private compareWith(base: ResponseLayout, done: number): void {
    const k = this.entries;
    this.base = base;
    this.at = base.entryStart(k) + base.entryHeaderLength(k) + done;
    const run = base.runFrom(k);
    this.runEnd = run.end;
    this.runNext = run.next;
    this.mode = ENTRIES;
    if (this.at === this.runEnd) this.endRun();
  }

  /** How many bytes of `chunk` from `from` (before `to`, within the run) `base` holds at their place: all, or 0. */
  private agreeing(chunk: Uint8Array, from: number, to: number): number {
    const n = Math.min(to - from, this.runEnd - this.at);
    return (this.base as ResponseLayout).holds(this.at, chunk, from, from + n) ? n : 0;
  }

  private endRun(): void {
    this.entries = this.runNext;
    this.mode = HEADER;
  }

  private endValue(): void {
    this.mode = HEADER;
    if (this.field !== 1 && this.field !== 4 && this.field !== 5) return;
    const text = this.own.toString('utf8', this.valueStart, this.ownLength);
    if (this.field === 1) this.versionInfo = text;
    else if (this.field === 4) this.typeUrl = text;
    else this.nonce = text;
  }

  /** Copies `chunk[from, to)` into `own`; false, copying nothing, past {@link MAX_OWN_BYTES}. */
  private copy(chunk: Uint8Array, from: number, to: number): boolean {
    const end = this.ownLength + (to - from);
    if (end > MAX_OWN_BYTES) return false;
    if (end > this.own.byteLength) {
      const grown = Buffer.allocUnsafe(Math.min(MAX_OWN_BYTES, Math.max(end, 2 * this.own.byteLength)));
      this.own.copy(grown, 0, 0, this.ownLength);
      this.own = grown;
    }
    this.own.set(chunk.subarray(from, to), this.ownLength);
    this.piece(OWN, this.ownLength, end);
    this.ownLength = end;
    return true;
  }

  private piece(where: number, start: number, end: number): void {
    const p = this.pieces;
    const last = p.length - 3;
    if (last >= 0 && p[last] === where && p[last + 2] === start) p[last + 2] = end;
    else p.push(where, start, end);
  }
}

/** Where the value of `layout`'s first entry begins (after its tag and length). */
function firstValueStart(layout: ResponseLayout): number {
  return layout.entryStart(0) + layout.entryHeaderLength(0);
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

/** Bytes from `at` up to and including the last byte of the varint going on there, or to `to`. */
function varintBytes(chunk: Uint8Array, at: number, to: number): number {
  let i = at;
  while (i < to && (chunk[i] as number) >= 0x80) i++;
  return Math.min(i + 1, to) - at;
}
