/** Bytes compared in one call when looking for where two ranges stop agreeing. */
const CHUNK = 64 * 1024;

/**
 * Parts a group holds at most. A rope made of another shares that one's groups where it takes
 * them whole, so making it costs a look at each group and a copy of the parts of the few groups
 * it cuts, not a copy of every part: a kept response whose objects changed one at a time over days
 * is one part per object.
 */
const GROUP_PARTS = 128;

/** Views of bytes side by side, and where each ends among the group's bytes. */
interface Group {
  readonly parts: readonly Buffer[];
  readonly ends: readonly number[];
}

/**
 * Bytes read as one range of offsets, laid end to end from views of several buffers that are never
 * written again: a kept response made of the last one's bytes and the few its successor changed,
 * each object's bytes where its response first brought them. The views are held in groups; reads
 * go forward mostly, so the part found last, then the one after it, is tried first.
 */
export class ByteRope {
  readonly size: number;
  readonly partCount: number;
  private readonly groups: readonly Group[];
  /** Where each group begins among the rope's bytes, then the size. */
  private readonly starts: readonly number[];
  /** The part found last: its group, its place in the group, where it begins and ends in the rope. */
  private g = 0;
  private p = 0;
  private from = 0;
  private to = 0;

  /** `starts`: where each group begins, then the size (one more number than groups). */
  constructor(groups: readonly Group[], starts: readonly number[]) {
    this.groups = groups;
    this.starts = starts;
    this.size = starts[groups.length] as number;
    let parts = 0;
    for (const group of groups) parts += group.parts.length;
    this.partCount = parts;
    this.to = groups.length > 0 ? ((groups[0] as Group).ends[0] as number) : 0;
  }

  static of(bytes: Buffer): ByteRope {
    return new ByteRope([{ parts: [bytes], ends: [bytes.byteLength] }], [0, bytes.byteLength]);
  }

  /**
   * The part that holds all of `[start, end)` (start < end ≤ size), or undefined when the range
   * spans several; {@link partStart} is then where that part begins among the rope's bytes.
   */
  partHolding(start: number, end: number): Buffer | undefined {
    const part = this.find(start);
    return end <= this.to ? part : undefined;
  }

  /** Where the part {@link partHolding} returned last begins among the rope's bytes. */
  get partStart(): number {
    return this.from;
  }

  /** `[start, end)` as one view: of its part, or copied when it spans several. */
  view(start: number, end: number): Buffer {
    if (start === end) return EMPTY;
    const part = this.partHolding(start, end);
    if (part !== undefined) return part.subarray(start - this.from, end - this.from);
    const copy = Buffer.allocUnsafeSlow(end - start);
    this.copy(start, end, copy, 0);
    return copy;
  }

  /** Copies `[start, end)` into `target` at `at`. */
  copy(start: number, end: number, target: Uint8Array, at: number): void {
    if (start >= end) return;
    let part = this.find(start);
    let pos = start;
    for (;;) {
      const n = Math.min(end, this.to) - pos;
      const own = pos - this.from;
      target.set(part.subarray(own, own + n), at + (pos - start));
      pos += n;
      if (pos >= end) return;
      part = this.next();
    }
  }

  /** Whether the bytes from `at` on are `other[from, to)` (the rope holds that many from `at`). */
  equals(at: number, other: Uint8Array, from: number, to: number): boolean {
    if (at + (to - from) > this.size) return false;
    if (from >= to) return true;
    let part = this.find(at);
    let pos = at;
    let i = from;
    for (;;) {
      const n = Math.min(to - i, this.to - pos);
      const own = pos - this.from;
      if (part.compare(other, i, i + n, own, own + n) !== 0) return false;
      pos += n;
      i += n;
      if (i >= to) return true;
      part = this.next();
    }
  }

  /** How many bytes of `other` from `from` agree with the rope's from `at`, at most `length`. */
  agreeing(at: number, other: Uint8Array, from: number, length: number): number {
    if (length <= 0) return 0;
    let part = this.find(at);
    let done = 0;
    for (;;) {
      const pos = at + done;
      const n = Math.min(length - done, this.to - pos);
      const agree = firstDifference(other, from + done, part, pos - this.from, n);
      done += agree;
      if (agree < n || done >= length) return done;
      part = this.next();
    }
  }

  /**
   * Whether `[start, end)` holds the bytes of `other` from `otherStart` on. Parts that are views
   * of the same memory are equal without a comparison.
   */
  sameAs(start: number, end: number, other: ByteRope, otherStart: number): boolean {
    if (otherStart + (end - start) > other.size) return false;
    if (start >= end) return true;
    if (other === this)
      return this.equals(start, this.view(otherStart, otherStart + (end - start)), 0, end - start);
    let a = this.find(start);
    let b = other.find(otherStart);
    let pos = start;
    let otherPos = otherStart;
    for (;;) {
      const n = Math.min(end - pos, this.to - pos, other.to - otherPos);
      const aFrom = pos - this.from;
      const bFrom = otherPos - other.from;
      const sameMemory = a.buffer === b.buffer && a.byteOffset + aFrom === b.byteOffset + bFrom;
      if (!sameMemory && a.compare(b, bFrom, bFrom + n, aFrom, aFrom + n) !== 0) return false;
      pos += n;
      otherPos += n;
      if (pos >= end) return true;
      if (pos === this.to) a = this.next();
      if (otherPos === other.to) b = other.next();
    }
  }

  /** Adds `[start, end)` to `builder`, as views of this rope's parts: whole groups as they are. */
  appendTo(builder: RopeBuilder, start: number, end: number): void {
    if (start >= end) return;
    let part = this.find(start);
    let pos = start;
    for (;;) {
      const group = this.groups[this.g] as Group;
      const groupEnd = this.starts[this.g + 1] as number;
      if (this.p === 0 && pos === this.from && groupEnd <= end) {
        builder.pushGroup(group, groupEnd - pos);
        pos = groupEnd;
        if (pos >= end) return;
        part = this.find(pos);
        continue;
      }
      const n = Math.min(end, this.to) - pos;
      builder.push(n === part.byteLength ? part : part.subarray(pos - this.from, pos - this.from + n));
      pos += n;
      if (pos >= end) return;
      part = this.next();
    }
  }

  /** Finds the part holding `at` (0 ≤ at < size). */
  private find(at: number): Buffer {
    if (at >= this.from && at < this.to) return (this.groups[this.g] as Group).parts[this.p] as Buffer;
    if (at >= this.to && at < this.size) {
      const part = this.next();
      if (at < this.to) return part;
    }
    const starts = this.starts;
    let low = 0;
    let high = this.groups.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >>> 1;
      if ((starts[middle] as number) <= at) low = middle;
      else high = middle - 1;
    }
    const group = this.groups[low] as Group;
    const within = at - (starts[low] as number);
    const ends = group.ends;
    let first = 0;
    let last = ends.length - 1;
    while (first < last) {
      const middle = (first + last) >>> 1;
      if ((ends[middle] as number) > within) last = middle;
      else first = middle + 1;
    }
    this.g = low;
    this.p = first;
    this.from = (starts[low] as number) + (first === 0 ? 0 : (ends[first - 1] as number));
    this.to = (starts[low] as number) + (ends[first] as number);
    return group.parts[first] as Buffer;
  }

  /** The part after the one found last (there is one). */
  private next(): Buffer {
    let group = this.groups[this.g] as Group;
    if (this.p + 1 < group.parts.length) this.p++;
    else {
      this.g++;
      this.p = 0;
      group = this.groups[this.g] as Group;
    }
    this.from = this.to;
    this.to = (this.starts[this.g] as number) + (group.ends[this.p] as number);
    return group.parts[this.p] as Buffer;
  }
}

/**
 * Builds a {@link ByteRope} from views and groups pushed in order: views adjacent in memory become
 * one, and groups of a few parts are joined with their neighbours.
 */
export class RopeBuilder {
  private readonly groups: Group[] = [];
  private readonly starts: number[] = [0];
  private size = 0;
  /** The group being filled. */
  private parts: Buffer[] = [];
  private ends: number[] = [];
  private filled = 0;

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
      this.filled += view.byteLength;
      this.ends[last] = this.filled;
      return;
    }
    if (this.parts.length >= GROUP_PARTS) this.seal();
    this.parts.push(view);
    this.filled += view.byteLength;
    this.ends.push(this.filled);
  }

  /** Adds a whole group (of `bytes` bytes) of another rope: shared, unless it is small or fits the one being filled. */
  pushGroup(group: Group, bytes: number): void {
    const count = group.parts.length;
    if (count < GROUP_PARTS / 2 || (this.parts.length > 0 && this.parts.length + count <= GROUP_PARTS)) {
      for (const part of group.parts) this.push(part);
      return;
    }
    this.seal();
    this.groups.push(group);
    this.size += bytes;
    this.starts.push(this.size);
  }

  build(): ByteRope {
    this.seal();
    if (this.groups.length === 0) return ByteRope.of(EMPTY);
    return new ByteRope(this.groups, this.starts);
  }

  private seal(): void {
    if (this.parts.length === 0) return;
    this.groups.push({ parts: this.parts, ends: this.ends });
    this.size += this.filled;
    this.starts.push(this.size);
    this.parts = [];
    this.ends = [];
    this.filled = 0;
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
