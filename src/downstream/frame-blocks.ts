import { ChunkedList, type ReadList } from '../core/chunked-list.js';
import type { ConfigResource } from '../core/resource.js';

/** A run of consecutive objects of a served list and their framed bytes, concatenated. */
interface Block {
  readonly members: readonly ConfigResource[];
  readonly bytes: Buffer;
}

/** Blocks hold this many objects on average (where names hash to 0 modulo it, a block ends). */
const AVERAGE_OBJECTS = 128;
/** No block holds more, whatever the names. */
const MAX_OBJECTS = 1024;
/**
 * An object whose body is this large is a chunk of its own, its framed bytes as they are: copied
 * into a block, it would be copied again with every change of a neighbour.
 */
const ALONE_BYTES = 64 * 1024;

/** Where the framed bytes of objects come from (the encoder). */
export interface FramedSource {
  /** The framed `resources` entry of an object; must not be altered. */
  framed(r: ConfigResource): Uint8Array;
  /**
   * Told that a block just built holds `r`'s framed bytes from `offset` on (`length` bytes, equal
   * to `framed(r)` byte for byte), so the source can keep them there instead of in memory of their
   * own.
   */
  rehome?(r: ConfigResource, block: Uint8Array, offset: number, length: number): void;
  /**
   * `r`'s framed bytes when the source has them, else how many they will take: `frameInto` then
   * writes them straight into the block that holds them, keeping them there, instead of into
   * memory of their own to be copied. A source with `plan` has `frameInto`.
   */
  plan?(r: ConfigResource): Uint8Array | Plan;
  frameInto?(r: ConfigResource, plan: Plan, block: Buffer, offset: number): void;
}

/** The bytes an object not encoded yet will take (see {@link FramedSource.plan}). */
interface Plan {
  readonly length: number;
}

/** Counters for benchmarks and the debug endpoint. */
export interface BlockCounters {
  /** Blocks concatenated (each copies the bytes of its objects once). */
  blocksBuilt: number;
  /** Bytes copied into blocks. */
  bytesCopied: number;
  /** Objects of served lists walked to find their blocks (a list's unchanged stretches are not). */
  objectsWalked: number;
}

/** The chunks last returned for a served list, and the position in it where each starts. */
interface LastChunks {
  readonly list: ReadList<ConfigResource>;
  readonly chunks: readonly Buffer[];
  readonly starts: readonly number[];
}

/**
 * Whether a block ends after `r`, from an FNV-1a of `namespace/name`: where blocks end depends on
 * names only, never on positions. Hashed on every call: a name hashes in about the time a kept
 * answer is looked up, and nothing is kept per object.
 */
function endsBlock(r: ConfigResource): boolean {
  let h = 0x811c9dc5;
  const text = r.namespace;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ 0x2f, 0x01000193);
  const name = r.name;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return (h >>> 0) % AVERAGE_OBJECTS === 0;
}

/** The first index of `sorted` (ascending) whose value is `value` or more; its length if none. */
function firstAtOrAfter(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function sameMembers(
  members: readonly ConfigResource[],
  list: ReadList<ConfigResource>,
  from: number,
  to: number,
): boolean {
  if (members.length !== to - from) return false;
  for (let i = from; i < to; i++) if (members[i - from] !== list.at(i)) return false;
  return true;
}

/**
 * The `resources` part of a response as a few large buffers instead of one, each cached while
 * its objects stay the same. Block boundaries follow the objects' names (content-defined, like
 * rsync's rolling chunks), so adding or removing one object changes one block, not every block
 * after it: a one-object change to a 50k-object view copies ~80 KB, not the whole response,
 * and no single copy is long enough to stall the event loop.
 */
export class FrameBlocks {
  /** Per served list (view and kind): blocks by their first object. */
  private readonly byList = new Map<string, WeakMap<ConfigResource, Block>>();
  /**
   * Per served list, the chunks last returned: a list edited from the last one (a view's list
   * after a change, sharing every list chunk but those the change fell in) keeps the chunks of
   * every stretch it shares, without walking them.
   */
  private readonly last = new Map<string, LastChunks>();
  readonly counters: BlockCounters = { blocksBuilt: 0, bytesCopied: 0, objectsWalked: 0 };

  /** Served lists with blocks kept (a list's blocks are kept until it is forgotten). */
  get lists(): number {
    return this.byList.size;
  }

  /** Drops the blocks of a served list (its view is gone). */
  forget(listKey: string): void {
    this.byList.delete(listKey);
    this.last.delete(listKey);
  }

  /** The buffers whose concatenation is every framed object of `resources`, in order. */
  chunks(listKey: string, resources: ReadList<ConfigResource>, source: FramedSource): Buffer[] {
    let blocks = this.byList.get(listKey);
    if (blocks === undefined) this.byList.set(listKey, (blocks = new WeakMap()));
    const out: Buffer[] = [];
    const starts: number[] = [];
    const last = this.last.get(listKey);
    let at = 0;
    if (last !== undefined) {
      // Where this list holds the last one's items in the same chunks, the last chunks lying
      // wholly among those items are this list's too (a chunk is the bytes of its objects,
      // whichever list holds them): taken as they are, and only the objects between are walked.
      const endOf = (k: number): number => last.starts[k + 1] ?? last.list.length;
      for (const run of ChunkedList.sharedRuns(last.list, resources)) {
        let first = firstAtOrAfter(last.starts, run.from);
        let end = first;
        while (end < last.chunks.length && endOf(end) <= run.from + run.length) end++;
        const shift = run.to - run.from;
        if (first === end || (last.starts[first] as number) + shift < at) continue;
        this.walk(blocks, resources, at, (last.starts[first] as number) + shift, source, out, starts);
        for (; first < end; first++) {
          out.push(last.chunks[first] as Buffer);
          starts.push((last.starts[first] as number) + shift);
        }
        at = endOf(end - 1) + shift;
      }
    }
    this.walk(blocks, resources, at, resources.length, source, out, starts);
    this.last.set(listKey, { list: resources, chunks: out, starts });
    return out;
  }

  /**
   * Appends to `out` the chunks of `resources[from..to)`, and to `starts` where each starts: the
   * blocks kept for stretches of them, new ones for the rest (the last ending at `to`).
   */
  private walk(
    blocks: WeakMap<ConfigResource, Block>,
    resources: ReadList<ConfigResource>,
    from: number,
    to: number,
    source: FramedSource,
    out: Buffer[],
    starts: number[],
  ): void {
    let start = from;
    let walked = 0;
    for (let i = from; i < to; i++) {
      const r = resources.at(i) as ConfigResource;
      walked++;
      if (i === start) {
        // A block kept for the objects from here on is taken whole, its members compared by
        // identity instead of hashing each one's name again: any cut into runs of consecutive
        // objects frames the same bytes, and this one keeps the blocks of an unchanged stretch.
        const known = blocks.get(r);
        const end = known === undefined ? 0 : i + known.members.length;
        if (known !== undefined && end <= to && sameMembers(known.members, resources, i, end)) {
          out.push(known.bytes);
          starts.push(i);
          walked += end - i - 1;
          start = end;
          i = end - 1;
          continue;
        }
      }
      if (r.body.byteLength >= ALONE_BYTES) {
        if (start < i) {
          out.push(this.block(blocks, resources, start, i, source));
          starts.push(start);
        }
        const bytes = source.framed(r);
        out.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
        starts.push(i);
        start = i + 1;
        continue;
      }
      const last = i === to - 1 || i + 1 - start >= MAX_OBJECTS || endsBlock(r);
      if (!last) continue;
      out.push(this.block(blocks, resources, start, i + 1, source));
      starts.push(start);
      start = i + 1;
    }
    this.counters.objectsWalked += walked;
  }

  /** The block of `resources[from..to)`: the one kept for them, or a new one. */
  private block(
    blocks: WeakMap<ConfigResource, Block>,
    resources: ReadList<ConfigResource>,
    from: number,
    to: number,
    source: FramedSource,
  ): Buffer {
    const first = resources.at(from) as ConfigResource;
    const known = blocks.get(first);
    if (known !== undefined && sameMembers(known.members, resources, from, to)) return known.bytes;
    // Indexed loops, no closure per object: a view's blocks are first built mostly before the
    // code is optimized.
    const count = to - from;
    const members = new Array<ConfigResource>(count);
    const parts = new Array<Uint8Array | Plan>(count);
    let size = 0;
    for (let k = 0; k < count; k++) {
      const r = resources.at(from + k) as ConfigResource;
      const part = source.plan === undefined ? source.framed(r) : source.plan(r);
      members[k] = r;
      parts[k] = part;
      size += part instanceof Uint8Array ? part.byteLength : part.length;
    }
    // Memory of its own, not a slice of Node's shared pool: what `rehome` and `frameInto` are
    // told of keeps the memory it lies in alive.
    const bytes = Buffer.allocUnsafeSlow(size);
    let at = 0;
    for (let k = 0; k < count; k++) {
      const r = members[k] as ConfigResource;
      const p = parts[k] as Uint8Array | Plan;
      if (p instanceof Uint8Array) {
        bytes.set(p, at);
        source.rehome?.(r, bytes, at, p.byteLength);
        at += p.byteLength;
      } else {
        if (source.frameInto === undefined)
          throw new Error('a framed source that plans must frame into blocks');
        source.frameInto(r, p, bytes, at);
        at += p.length;
      }
    }
    this.counters.blocksBuilt++;
    this.counters.bytesCopied += size;
    blocks.set(first, { members, bytes });
    return bytes;
  }
}
