/** Items a chunk is cut to when a list is built, and the most an insertion lets one grow to. */
const CHUNK = 512;
const MAX_CHUNK = 2 * CHUNK;

const EMPTY_CHUNKS: readonly (readonly never[])[] = Object.freeze([]);
const NO_STARTS = new Int32Array(0);

/**
 * A list read by place and in order, whatever keeps it: an array, or a {@link ChunkedList}. Must
 * not be altered by whoever reads it.
 */
export interface ReadList<T> extends Iterable<T> {
  readonly length: number;
  /** The item at `index`, or undefined outside the list. */
  at(index: number): T | undefined;
}

/** Items two lists hold in the same chunks: `a`'s from `from`, `b`'s from `to`, `length` of them. */
export interface SharedRun {
  readonly from: number;
  readonly to: number;
  readonly length: number;
}

/**
 * Where two lists differ between the chunks they share: the first list's items `was` from
 * `wasFrom` on stand where the second holds `now` from `nowFrom` on.
 */
export interface UnsharedStretch<T> {
  readonly wasFrom: number;
  readonly was: readonly T[];
  readonly nowFrom: number;
  readonly now: readonly T[];
}

/**
 * An immutable list kept as chunks of a few hundred items, so that a list one item apart from
 * another shares every chunk but one with it: inserting or removing an item copies that chunk
 * and the chunks' index (some 5 KB for a list of 50k), where an array would be copied whole.
 * A list of tens of thousands of items copied at every change of one of them is as many large
 * arrays, which V8 keeps in its large-object space until a full collection of the heap.
 *
 * Reading by index is cheapest in order: the chunk last read is looked at first.
 */
export class ChunkedList<T> {
  /** The chunk {@link at} read last (a cache; the list does not change). */
  private last = 0;

  private constructor(
    private readonly chunks: readonly (readonly T[])[],
    /** Where each chunk starts in the list. */
    private readonly starts: Int32Array,
    readonly length: number,
  ) {}

  /** The list with nothing in it. */
  static empty<T>(): ChunkedList<T> {
    return new ChunkedList<T>(EMPTY_CHUNKS, NO_STARTS, 0);
  }

  /** `items` as one chunk, not copied: the caller hands over an array it never changes. */
  static wrapping<T>(items: readonly T[]): ChunkedList<T> {
    return items.length === 0
      ? ChunkedList.empty()
      : new ChunkedList([items], Int32Array.of(0), items.length);
  }

  /** The items of `items` that `keep` accepts, in order, cut into chunks. */
  static filtered<T>(items: Iterable<T>, keep: (item: T) => boolean = keepAll): ChunkedList<T> {
    // Every item of an array: its chunks are slices of it, each copied as one block.
    if (keep === keepAll && Array.isArray(items)) {
      const all = items as readonly T[];
      const slices: T[][] = [];
      for (let i = 0; i < all.length; i += CHUNK) slices.push(all.slice(i, i + CHUNK));
      return ChunkedList.ofChunks(slices);
    }
    const chunks: T[][] = [];
    let chunk: T[] = [];
    const take = (item: T): void => {
      if (!keep(item)) return;
      chunk.push(item);
      if (chunk.length === CHUNK) {
        chunks.push(chunk);
        chunk = [];
      }
    };
    // An array by index, a chunked list by its chunks: no iterator step per item.
    if (Array.isArray(items)) for (let i = 0; i < items.length; i++) take(items[i] as T);
    else if (items instanceof ChunkedList) (items as ChunkedList<T>).forEach(take);
    else for (const item of items) take(item);
    if (chunk.length > 0) chunks.push(chunk);
    return ChunkedList.ofChunks(chunks);
  }

  /**
   * The items of `lists`, one list after the other, sharing their chunks (an array among them is
   * taken as one chunk, not copied: the caller hands over arrays it never changes).
   */
  static joined<T>(lists: readonly ReadList<T>[]): ChunkedList<T> {
    if (lists.length === 1 && lists[0] instanceof ChunkedList) return lists[0] as ChunkedList<T>;
    const chunks: (readonly T[])[] = [];
    for (const list of lists) {
      if (list instanceof ChunkedList)
        for (const chunk of (list as ChunkedList<T>).chunks) chunks.push(chunk);
      else if (list.length > 0) chunks.push(list as readonly T[]);
    }
    return ChunkedList.ofChunks(chunks);
  }

  private static ofChunks<T>(chunks: readonly (readonly T[])[]): ChunkedList<T> {
    const starts = new Int32Array(chunks.length);
    let length = 0;
    chunks.forEach((c, i) => {
      starts[i] = length;
      length += c.length;
    });
    return new ChunkedList(chunks, starts, length);
  }

  /** The item at `index`, or undefined outside the list. */
  at(index: number): T | undefined {
    if (index < 0 || index >= this.length) return undefined;
    let c = this.last;
    const start = this.starts[c] as number;
    if (index < start || index >= start + (this.chunks[c] as readonly T[]).length) {
      c = this.chunkOf(index);
      this.last = c;
    }
    return (this.chunks[c] as readonly T[])[index - (this.starts[c] as number)];
  }

  /** Where `item` itself (this instance) is in the list, or -1: a walk of the chunks, no copy. */
  indexOf(item: T): number {
    const chunks = this.chunks;
    for (let c = 0; c < chunks.length; c++) {
      const at = (chunks[c] as readonly T[]).indexOf(item);
      if (at >= 0) return (this.starts[c] as number) + at;
    }
    return -1;
  }

  /**
   * Where `item` is, or would go, in a list sorted by `compare`: the first index whose item is not
   * before it.
   */
  position(item: T, compare: (a: T, b: T) => number): number {
    const chunks = this.chunks;
    // The first chunk whose last item is not before `item`.
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = chunks[mid] as readonly T[];
      if (compare(chunk[chunk.length - 1] as T, item) < 0) lo = mid + 1;
      else hi = mid;
    }
    if (lo === chunks.length) return this.length;
    const chunk = chunks[lo] as readonly T[];
    let a = 0;
    let b = chunk.length;
    while (a < b) {
      const mid = (a + b) >>> 1;
      if (compare(chunk[mid] as T, item) < 0) a = mid + 1;
      else b = mid;
    }
    return (this.starts[lo] as number) + a;
  }

  /** The list with `item` inserted at `index` (0 ≤ index ≤ length). */
  inserted(index: number, item: T): ChunkedList<T> {
    if (index < 0 || index > this.length) throw new RangeError(`index ${index} outside 0..${this.length}`);
    if (this.chunks.length === 0) return ChunkedList.ofChunks([[item]]);
    // At the end of a chunk rather than the start of the next: appending stays in the last one.
    const c = index === this.length ? this.chunks.length - 1 : this.chunkOf(index);
    const chunk = this.chunks[c] as readonly T[];
    const at = index - (this.starts[c] as number);
    return this.spliceChunk(c, cut([...chunk.slice(0, at), item, ...chunk.slice(at)]), 1);
  }

  /** The list without the item at `index` (0 ≤ index < length). */
  removed(index: number): ChunkedList<T> {
    if (index < 0 || index >= this.length)
      throw new RangeError(`index ${index} outside 0..${this.length - 1}`);
    const c = this.chunkOf(index);
    const chunk = this.chunks[c] as readonly T[];
    const at = index - (this.starts[c] as number);
    return this.spliceChunk(c, cut([...chunk.slice(0, at), ...chunk.slice(at + 1)]), -1);
  }

  /** The list with the item at `index` (0 ≤ index < length) replaced by `item`. */
  replaced(index: number, item: T): ChunkedList<T> {
    if (index < 0 || index >= this.length)
      throw new RangeError(`index ${index} outside 0..${this.length - 1}`);
    const c = this.chunkOf(index);
    const chunk = [...(this.chunks[c] as readonly T[])];
    chunk[index - (this.starts[c] as number)] = item;
    return this.spliceChunk(c, cut(chunk), 0);
  }

  /**
   * The items of `a` and of `b` outside the chunks both share, each list's in its order: where two
   * lists one derived from the other differ, found without reading the chunks a change left alone
   * (see {@link unsharedStretches}). The chunks left out hold the same instances in both lists, so
   * what is only in one of them by identity, or by key for lists sorted by one, is what is only in
   * one of these. Lists not both in chunks share nothing: each is given whole.
   */
  static unshared<T>(a: ReadList<T>, b: ReadList<T>): [readonly T[], readonly T[]] {
    const stretches = ChunkedList.unsharedStretches(a, b);
    if (stretches.length === 1) {
      const only = stretches[0] as UnsharedStretch<T>;
      return [only.was, only.now];
    }
    const was: T[] = [];
    const now: T[] = [];
    for (const s of stretches) {
      for (let i = 0; i < s.was.length; i++) was.push(s.was[i] as T);
      for (let i = 0; i < s.now.length; i++) now.push(s.now[i] as T);
    }
    return [was, now];
  }

  /**
   * Where `a` and `b` differ, stretch by stretch, in the order of both: the items between the
   * chunk instances both hold in the same order (taken greedily: each chunk of `b` that `a` holds
   * after the last one matched). A change to a list in chunks copies the chunks it falls in and
   * shares every other, so a few changes anywhere in a list of 50k cost a few chunks here, not
   * the items between the first change and the last. Lists not both in chunks are one stretch,
   * each whole (an array as it is).
   */
  static unsharedStretches<T>(a: ReadList<T>, b: ReadList<T>): UnsharedStretch<T>[] {
    if (!(a instanceof ChunkedList && b instanceof ChunkedList)) {
      if (a.length === 0 && b.length === 0) return [];
      return [{ wasFrom: 0, was: asArray(a), nowFrom: 0, now: asArray(b) }];
    }
    const x = a as ChunkedList<T>;
    const y = b as ChunkedList<T>;
    const inA = new Map<readonly T[], number>();
    for (let c = x.chunks.length - 1; c >= 0; c--) inA.set(x.chunks[c] as readonly T[], c);
    const stretches: UnsharedStretch<T>[] = [];
    let ca = 0;
    let cb = 0;
    while (ca < x.chunks.length || cb < y.chunks.length) {
      if (ca < x.chunks.length && cb < y.chunks.length && x.chunks[ca] === y.chunks[cb]) {
        ca++;
        cb++;
        continue;
      }
      // The next chunk of `b` that `a` holds from `ca` on; none: both lists to their ends.
      let nextA = x.chunks.length;
      let nextB = cb;
      for (; nextB < y.chunks.length; nextB++) {
        const at = inA.get(y.chunks[nextB] as readonly T[]);
        if (at !== undefined && at >= ca) {
          nextA = at;
          break;
        }
      }
      stretches.push({
        wasFrom: x.startOf(ca),
        was: x.itemsOfChunks(ca, nextA),
        nowFrom: y.startOf(cb),
        now: y.itemsOfChunks(cb, nextB),
      });
      ca = nextA;
      cb = nextB;
    }
    return stretches;
  }

  /**
   * The arrays `list` is the concatenation of: a chunked list's chunks, an array as its only one
   * (none when empty), a list kept any other way copied into one. Must not be altered.
   */
  static chunksOf<T>(list: ReadList<T>): readonly (readonly T[])[] {
    if (list instanceof ChunkedList) return (list as ChunkedList<T>).chunks;
    return list.length === 0 ? EMPTY_CHUNKS : [asArray(list)];
  }

  /**
   * The stretches of items `b` holds in the same chunk instances as `a` (consecutive chunks of
   * both taken together), in `b`'s order: where `a`'s items from `from` on are `b`'s from `to` on,
   * for `length` items, found without reading any item. None for lists not both in chunks.
   */
  static sharedRuns<T>(a: ReadList<T>, b: ReadList<T>): SharedRun[] {
    if (!(a instanceof ChunkedList && b instanceof ChunkedList)) return [];
    const inA = new Map<readonly T[], number>();
    (a as ChunkedList<T>).chunks.forEach((chunk, c) => inA.set(chunk, c));
    const runs: SharedRun[] = [];
    let lastA = -2;
    let lastB = -2;
    (b as ChunkedList<T>).chunks.forEach((chunk, c) => {
      const ca = inA.get(chunk);
      if (ca === undefined) return;
      const run = runs[runs.length - 1];
      if (run !== undefined && ca === lastA + 1 && c === lastB + 1)
        runs[runs.length - 1] = { ...run, length: run.length + chunk.length };
      else runs.push({ from: a.starts[ca] as number, to: b.starts[c] as number, length: chunk.length });
      lastA = ca;
      lastB = c;
    });
    return runs;
  }

  /** Where chunk `c` starts; the list's length for `c` past its last chunk. */
  private startOf(c: number): number {
    return c < this.chunks.length ? (this.starts[c] as number) : this.length;
  }

  /** The items of chunks `from` to `to` (excluded), in an array of their own. */
  private itemsOfChunks(from: number, to: number): T[] {
    return joined(from === 0 && to === this.chunks.length ? this.chunks : this.chunks.slice(from, to));
  }

  /** Every item, in order, in an array of their own. */
  toArray(): T[] {
    return joined(this.chunks);
  }

  /** Calls `visit` with every item, in order: no iterator step to allocate per item. */
  forEach(visit: (item: T) => void): void {
    const chunks = this.chunks;
    for (let c = 0; c < chunks.length; c++) {
      const chunk = chunks[c] as readonly T[];
      for (let i = 0; i < chunk.length; i++) visit(chunk[i] as T);
    }
  }

  *[Symbol.iterator](): Iterator<T> {
    for (const chunk of this.chunks) yield* chunk;
  }

  /** The list with chunk `c` replaced by `by`, its length moved by `delta`. */
  private spliceChunk(c: number, by: readonly (readonly T[])[], delta: number): ChunkedList<T> {
    const chunks = [...this.chunks.slice(0, c), ...by, ...this.chunks.slice(c + 1)];
    const starts = new Int32Array(chunks.length);
    starts.set(this.starts.subarray(0, c));
    let at = this.starts[c] as number;
    for (let i = c; i < chunks.length; i++) {
      starts[i] = at;
      at += (chunks[i] as readonly T[]).length;
    }
    return new ChunkedList(chunks, starts, this.length + delta);
  }

  /** The chunk holding `index` (0 ≤ index < length). */
  private chunkOf(index: number): number {
    const starts = this.starts;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if ((starts[mid] as number) <= index) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
}

/** `list`'s items in an array: the list itself when it is one. */
export function asArray<T>(list: ReadList<T>): readonly T[] {
  return Array.isArray(list) ? (list as readonly T[]) : [...list];
}

/** {@link ChunkedList.filtered}'s test by default: every item. */
function keepAll(): boolean {
  return true;
}

/** Chunks joined per call to `concat` (a call's arguments are bounded). */
const JOIN_CHUNKS = 1024;

/**
 * The items of `chunks` in one new array: `concat` copies each chunk's elements as one block and
 * sizes the result once, some three times quicker than a `push` per item, which grows the array
 * step by step (a list of 100k items: 3.6 against 11.7 ms).
 */
function joined<T>(chunks: readonly (readonly T[])[]): T[] {
  const none: T[] = [];
  if (chunks.length <= JOIN_CHUNKS) return none.concat(...chunks);
  // Joined a thousand chunks at a time, then the joins joined.
  const parts: T[][] = [];
  for (let c = 0; c < chunks.length; c += JOIN_CHUNKS) parts.push(joined(chunks.slice(c, c + JOIN_CHUNKS)));
  return joined(parts);
}

/**
 * `items` as the chunks that replace an edited one: itself while it is no longer than
 * {@link MAX_CHUNK} (none when empty), else cut into chunks of {@link CHUNK} (an edit to a list
 * wrapped whole, or a chunk grown past its bound).
 */
function cut<T>(items: T[]): T[][] {
  if (items.length === 0) return [];
  if (items.length <= MAX_CHUNK) return [items];
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK));
  return out;
}
