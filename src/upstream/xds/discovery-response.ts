import { WireCursor } from '../../wire/wire-cursor.js';
import { WIRE_LENGTH_DELIMITED } from '../../wire/wire-types.js';

/** One `google.protobuf.Any` of a response's `resources`; `value` is a view into the response's bytes. */
export interface ResponseEntry {
  readonly typeUrl: string;
  readonly value: Uint8Array;
}

function expectLengthDelimited(field: number, wireType: number, where: string): void {
  if (wireType !== WIRE_LENGTH_DELIMITED) {
    throw new Error(`${where} field ${field} has wire type ${wireType}, expected ${WIRE_LENGTH_DELIMITED}`);
  }
}

/** Objects compared in one range before falling back to one comparison per object. */
const RUN = 512;

/**
 * Where each part of an `envoy.service.discovery.v3.DiscoveryResponse` lies, found by walking its
 * top-level fields only: the strings a state-of-the-world client acts on, and per entry of
 * `resources` the offsets of its field and of its `Any`. Nothing inside an entry is read until
 * asked for ({@link entry}), so a reader can tell which entries are byte for byte those of the
 * previous response (one comparison over a run of them, see {@link commonPrefix}) and read only
 * the rest. Fields other than 1, 2, 4 and 5 are skipped.
 *
 * A layout reads the message in place (a view the transport lends, valid while it is read); one
 * kept for comparing with the next response takes over the transport's buffer the message lies
 * in ({@link adoptBytes}), or copies its bytes into a buffer of its own ({@link keepBytes}); the
 * next kept layout of the same type hands that buffer back to the transport, or reuses it. The
 * memory a reader holds is thus allocated once, not once per response: a response kept until the
 * next one would otherwise be a large buffer outliving the young generation, which only a full
 * collection of the heap frees.
 */
export class ResponseLayout {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Entries of `resources`. */
  readonly count: number;
  private bytes: Buffer;
  /** Whether `bytes` is the layout's own buffer, not the message it was read from. */
  private owned = false;
  /**
   * Per entry `i`, at `3i`, `3i + 1` and `3i + 2`: where its tag begins, and where the `Any` it
   * carries begins and ends. May be longer than needed (reused between layouts).
   */
  readonly offsets: Int32Array<ArrayBuffer>;
  /** The last type URL read by {@link entry}, by its bytes' position, to share one string. */
  private lastType = { start: 0, end: -1, text: '' };

  /**
   * Throws on bytes that are not a well-formed message at the top level (overruns, wrong wire
   * types). `offsets`: an array to write the offsets into (one no longer used, from an earlier
   * layout), replaced by a larger one when the message holds more entries.
   */
  constructor(message: Uint8Array, offsets: Int32Array<ArrayBuffer> = new Int32Array(3 * 64)) {
    this.bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
    const cursor = new WireCursor(this.bytes);
    const limit = this.bytes.byteLength;
    let versionInfo = '';
    let typeUrl = '';
    let nonce = '';
    let at3 = offsets;
    let count = 0;
    while (cursor.pos < limit) {
      const at = cursor.pos;
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
        if (3 * count + 3 > at3.length) at3 = grown(at3);
        at3[3 * count] = at;
        at3[3 * count + 1] = cursor.start;
        at3[3 * count + 2] = cursor.end;
        count++;
      } else {
        const text = this.bytes.toString('utf8', cursor.start, cursor.end);
        if (field === 1) versionInfo = text;
        else if (field === 4) typeUrl = text;
        else nonce = text;
      }
    }
    this.versionInfo = versionInfo;
    this.typeUrl = typeUrl;
    this.nonce = nonce;
    this.count = count;
    this.offsets = at3;
  }

  /**
   * Copies the layout's bytes out of the message it was read from into `store` (the buffer of a
   * layout of the same type that is no longer used), or into a new buffer when `store` is too small
   * or far too large. Returns nothing.
   */
  keepBytes(store: Buffer | undefined): void {
    if (this.owned) return;
    const size = this.bytes.byteLength;
    const fits = store !== undefined && store.byteLength >= size && store.byteLength <= 2 * size + 65536;
    // A little room to grow before the next allocation.
    const target = fits ? store : Buffer.allocUnsafeSlow(size + (size >>> 4));
    this.bytes.copy(target, 0);
    this.bytes = target.subarray(0, size);
    this.owned = true;
  }

  /**
   * Takes `buffer`, which the layout's bytes are a view of (the transport's reassembly buffer,
   * handed over), as the layout's own: nothing is copied. Returns false, changing nothing, when
   * the bytes do not lie in it.
   */
  adoptBytes(buffer: Buffer): boolean {
    if (this.owned || buffer.buffer !== this.bytes.buffer) return false;
    this.owned = true;
    return true;
  }

  /**
   * The layout's own buffer, for the next layout of its type to keep its bytes in: this layout
   * must not be used afterwards. Undefined when it holds none.
   */
  releaseBytes(): Buffer | undefined {
    if (!this.owned) return undefined;
    const buffer = Buffer.from(this.bytes.buffer);
    this.owned = false;
    return buffer;
  }

  /**
   * Entry `i` (0 ≤ i < count), its `Any` walked in place. Throws when the `Any` is not well formed;
   * its fields other than 1 and 2 are skipped.
   */
  entry(i: number): ResponseEntry {
    const bytes = this.bytes;
    const end = this.offsets[3 * i + 2] as number;
    const cursor = new WireCursor(bytes);
    cursor.pos = this.offsets[3 * i + 1] as number;
    let valueStart = 0;
    let valueEnd = 0;
    let typeUrl = '';
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
      } else if (sameRange(bytes, cursor.start, cursor.end, this.lastType.start, this.lastType.end)) {
        typeUrl = this.lastType.text;
      } else {
        typeUrl = bytes.toString('utf8', cursor.start, cursor.end);
        this.lastType = { start: cursor.start, end: cursor.end, text: typeUrl };
      }
    }
    return { typeUrl, value: bytes.subarray(valueStart, valueEnd) };
  }

  /** Whether entry `i` of this response and entry `j` of `other` are the same bytes. */
  sameEntry(i: number, other: ResponseLayout, j: number): boolean {
    return this.sameRun(i, other, j, 1);
  }

  /**
   * How many entries from the start are byte for byte those of `other` at the same places, at
   * most `max`. One comparison per run of entries; per entry only inside the run that differs.
   */
  commonPrefix(other: ResponseLayout, max: number): number {
    let n = 0;
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
    const start = this.offsets[3 * i] as number;
    const end = this.offsets[3 * (i + run - 1) + 2] as number;
    const otherStart = other.offsets[3 * j] as number;
    const otherEnd = other.offsets[3 * (j + run - 1) + 2] as number;
    if (end - start !== otherEnd - otherStart) return false;
    return this.bytes.compare(other.bytes, otherStart, otherEnd, start, end) === 0;
  }
}

function grown(array: Int32Array): Int32Array<ArrayBuffer> {
  const next = new Int32Array(Math.max(48, array.length * 2));
  next.set(array);
  return next;
}

/** Whether two ranges of `bytes` hold the same bytes. */
function sameRange(bytes: Uint8Array, a: number, aEnd: number, b: number, bEnd: number): boolean {
  if (aEnd - a !== bEnd - b) return false;
  for (let i = 0; i < aEnd - a; i++) if (bytes[a + i] !== bytes[b + i]) return false;
  return true;
}
