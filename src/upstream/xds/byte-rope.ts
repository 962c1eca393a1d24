/** Bytes compared in one call when looking for where two ranges stop agreeing. */
const CHUNK = 64 * 1024;

/**
 * Bytes read as one range of offsets, laid end to end from views of several buffers that are never
 * written again: a kept response made of the last one's bytes and the few its successor changed,
 * each object's bytes where its response first brought them. Reads go forward mostly, so the part
 * found last is tried first.
 */
export class ByteRope {
  /** The views, in order, and where each begins among the rope's bytes (then the size). */
  private readonly parts: readonly Buffer[];
  private readonly starts: readonly number[];
  /** The part the last look-up found. */
  private last = 0;

  /** `starts`: where each part begins, then the size (one more number than parts). */
  constructor(parts: readonly Buffer[], starts: readonly number[]) {
    this.parts = parts;
    this.starts = starts;
  }

  static of(bytes: Buffer): ByteRope {
    return new ByteRope([bytes], [0, bytes.byteLength]);
  }

  get size(): number {
    return this.starts[this.parts.length] as number;
  }

  get partCount(): number {
    return this.parts.length;
  }

  /** Part `p`, and where it begins among the rope's bytes. */
  part(p: number): Buffer {
    return this.parts[p] as Buffer;
  }

  partStart(p: number): number {
    return this.starts[p] as number;
  }

  /** The part holding offset `at` (0 ≤ at < size). */
  partAt(at: number): number {
    const starts = this.starts;
    const last = this.last;
    if ((starts[last] as number) <= at && at < (starts[last + 1] as number)) return last;
    if (at >= (starts[last + 1] as number) && at < (starts[last + 2] ?? -1)) return (this.last = last + 1);
    let low = 0;
    let high = this.parts.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >>> 1;
      if ((starts[middle] as number) <= at) low = middle;
      else high = middle - 1;
    }
    return (this.last = low);
  }

  /** The part that holds all of `[start, end)` (start < end), or -1 when it spans several. */
  partHolding(start: number, end: number): number {
    const p = this.partAt(start);
    return end <= (this.starts[p + 1] as number) ? p : -1;
  }

  /** `[start, end)` as one view: of its part, or copied when it spans several. */
  view(start: number, end: number): Buffer {
    if (start === end) return EMPTY;
    const p = this.partHolding(start, end);
    if (p >= 0) {
      const from = start - (this.starts[p] as number);
      return (this.parts[p] as Buffer).subarray(from, from + (end - start));
    }
    const copy = Buffer.allocUnsafeSlow(end - start);
    this.copy(start, end, copy, 0);
    return copy;
  }

  /** Copies `[start, end)` into `target` at `at`. */
  copy(start: number, end: number, target: Uint8Array, at: number): void {
    let pos = start;
    while (pos < end) {
      const p = this.partAt(pos);
      const partStart = this.starts[p] as number;
      const n = Math.min(end, this.starts[p + 1] as number) - pos;
      const from = pos - partStart;
      target.set((this.parts[p] as Buffer).subarray(from, from + n), at + (pos - start));
      pos += n;
    }
  }

  /** Whether the bytes from `at` on are `other[from, to)` (the rope holds that many from `at`). */
  equals(at: number, other: Uint8Array, from: number, to: number): boolean {
    if (at + (to - from) > this.size) return false;
    let pos = at;
    let i = from;
    while (i < to) {
      const p = this.partAt(pos);
      const n = Math.min(to - i, (this.starts[p + 1] as number) - pos);
      const own = pos - (this.starts[p] as number);
      if ((this.parts[p] as Buffer).compare(other, i, i + n, own, own + n) !== 0) return false;
      pos += n;
      i += n;
    }
    return true;
  }

  /** How many bytes of `other` from `from` agree with the rope's from `at`, at most `length`. */
  agreeing(at: number, other: Uint8Array, from: number, length: number): number {
    let done = 0;
    while (done < length) {
      const pos = at + done;
      const p = this.partAt(pos);
      const n = Math.min(length - done, (this.starts[p + 1] as number) - pos);
      const own = pos - (this.starts[p] as number);
      const agree = firstDifference(other, from + done, this.parts[p] as Buffer, own, n);
      done += agree;
      if (agree < n) return done;
    }
    return done;
  }

  /**
   * Whether `[start, end)` holds the bytes of `other` from `otherStart` on. Parts that are views
   * of the same memory are equal without a comparison.
   */
  sameAs(start: number, end: number, other: ByteRope, otherStart: number): boolean {
    if (otherStart + (end - start) > other.size) return false;
    let pos = start;
    let otherPos = otherStart;
    while (pos < end) {
      const p = this.partAt(pos);
      const q = other.partAt(otherPos);
      const n = Math.min(end - pos, (this.starts[p + 1] as number) - pos, other.partEnd(q) - otherPos);
      const a = this.parts[p] as Buffer;
      const b = other.parts[q] as Buffer;
      const aFrom = pos - (this.starts[p] as number);
      const bFrom = otherPos - (other.starts[q] as number);
      const sameMemory = a.buffer === b.buffer && a.byteOffset + aFrom === b.byteOffset + bFrom;
      if (!sameMemory && a.compare(b, bFrom, bFrom + n, aFrom, aFrom + n) !== 0) return false;
      pos += n;
      otherPos += n;
    }
    return true;
  }

  /** Adds `[start, end)` to `builder`, as views of this rope's parts. */
  appendTo(builder: RopeBuilder, start: number, end: number): void {
    let pos = start;
    while (pos < end) {
      const p = this.partAt(pos);
      const n = Math.min(end, this.starts[p + 1] as number) - pos;
      const from = pos - (this.starts[p] as number);
      builder.push((this.parts[p] as Buffer).subarray(from, from + n));
      pos += n;
    }
  }

  private partEnd(p: number): number {
    return this.starts[p + 1] as number;
  }
}

/** Builds a {@link ByteRope} from views pushed in order; views adjacent in memory become one. */
export class RopeBuilder {
  private readonly parts: Buffer[] = [];
  private readonly starts: number[] = [0];
  private size = 0;

  push(view: Buffer): void {
    if (view.byteLength === 0) return;
    const last = this.parts.length - 1;
    const before = this.parts[last];
    if (
      before !== undefined &&
      before.buffer === view.buffer &&
      before.byteOffset + before.byteLength === view.byteOffset
    ) {
      this.parts[last] = Buffer.from(before.buffer, before.byteOffset, before.byteLength + view.byteLength);
    } else this.parts.push(view);
    this.size += view.byteLength;
    this.starts[this.parts.length] = this.size;
  }

  build(): ByteRope {
    if (this.parts.length === 0) return ByteRope.of(EMPTY);
    return new ByteRope(this.parts, this.starts);
  }
}

const EMPTY = Buffer.alloc(0);

/**
 * How many bytes from `aStart` in `a` and `bStart` in `b` agree, at most `length`: compared a
 * chunk at a time, then by halves inside the chunk that differs.
 */
export function firstDifference(
  a: Uint8Array,
  aStart: number,
  b: Buffer,
  bStart: number,
  length: number,
): number {
  let n = 0;
  while (n < length) {
    const step = Math.min(CHUNK, length - n);
    if (b.compare(a, aStart + n, aStart + n + step, bStart + n, bStart + n + step) === 0) {
      n += step;
      continue;
    }
    let low = n;
    let high = n + step;
    while (high - low > 64) {
      const middle = low + ((high - low) >>> 1);
      if (b.compare(a, aStart + low, aStart + middle, bStart + low, bStart + middle) === 0) low = middle;
      else high = middle;
    }
    while (low < high && a[aStart + low] === b[bStart + low]) low++;
    return low;
  }
  return length;
}
