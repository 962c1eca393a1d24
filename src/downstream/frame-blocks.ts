import { ChunkedList, type ReadList } from '../core/chunked-list.js';
import { firstAtOrAfter } from '../core/first-at-or-after.js';
import { compareByName, type ConfigResource } from '../core/resource.js';

/**
 * A run of consecutive objects of a served list and their framed bytes, concatenated: in one
 * buffer for a block built whole, in pieces for one spliced from an earlier block (see
 * {@link FrameBlocks}). Pieces end at objects' ends.
 */
interface Block {
  readonly members: readonly ConfigResource[];
  readonly pieces: readonly Buffer[];
  /** Per piece, the index in `members` of its first object. */
  readonly firsts: readonly number[];
  /** Where each member's framed bytes end, counted over the pieces joined (`members.length` entries). */
  readonly ends: Uint32Array;
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

/**
 * A block spliced from an earlier one has at most this many pieces; one that would have more is
 * built whole instead (its objects copied once more), so a response's chunks stay few.
 */
const MAX_PIECES = 5;

/** Counters for benchmarks and the debug endpoint. */
export interface BlockCounters {
  /** Blocks concatenated (each copies the bytes of its objects once). */
  blocksBuilt: number;
  /** Blocks spliced from an earlier block and the bytes of the objects that changed in it. */
  blocksSpliced: number;
  /** Blocks another served list had built or spliced, taken as they are (no byte copied). */
  blocksShared: number;
  /** Bytes copied into blocks (of a spliced block, only its changed objects'). */
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

/** A served list's blocks, by their first object and by their last. */
interface KeptBlocks {
  readonly byFirst: WeakMap<ConfigResource, Block>;
  readonly byLast: WeakMap<ConfigResource, Block>;
}

/** Objects' framed bytes in one buffer, and where each ends in it. */
interface FramedRun {
  readonly bytes: Buffer;
  readonly ends: Uint32Array;
}

/**
 * A stretch of a spliced block: members `start..end-1` of a kept block, or (no block) that many
 * objects framed anew, the next of a splice's new objects.
 */
interface Run {
  readonly block: Block | undefined;
  readonly start: number;
  end: number;
}

/** Adds `r` to a splice's new objects, in the run of new objects it extends or a new one; returns the pieces added. */
function addFresh(runs: Run[], fresh: ConfigResource[], r: ConfigResource): number {
  fresh.push(r);
  const last = runs[runs.length - 1];
  if (last !== undefined && last.block === undefined) {
    last.end++;
    return 0;
  }
  runs.push({ block: undefined, start: 0, end: 1 });
  return 1;
}

/** A block as a splice puts it together. */
interface BlockParts {
  readonly members: ConfigResource[];
  readonly pieces: Buffer[];
  readonly firsts: number[];
  readonly ends: Uint32Array;
}

/**
 * Puts `block`'s members `a..b-1` into `into` from its member `at` on, as views of the pieces
 * they lie in, their bytes counted on from `size`; returns the size with theirs.
 */
function take(block: Block, a: number, b: number, into: BlockParts, at: number, size: number): number {
  let k = 0;
  while (k + 1 < block.pieces.length && (block.firsts[k + 1] as number) <= a) k++;
  for (let m = a; m < b; k++) {
    const pieceFirst = block.firsts[k] as number;
    const pieceEnd = Math.min(b, block.firsts[k + 1] ?? block.members.length);
    const base = pieceFirst === 0 ? 0 : (block.ends[pieceFirst - 1] as number);
    const startByte = (m === 0 ? 0 : (block.ends[m - 1] as number)) - base;
    const endByte = (block.ends[pieceEnd - 1] as number) - base;
    into.pieces.push((block.pieces[k] as Buffer).subarray(startByte, endByte));
    into.firsts.push(at + (m - a));
    for (let j = m; j < pieceEnd; j++) {
      into.members[at + (j - a)] = block.members[j] as ConfigResource;
      size += (block.ends[j] as number) - (j === 0 ? 0 : (block.ends[j - 1] as number));
      into.ends[at + (j - a)] = size;
    }
    m = pieceEnd;
  }
  return size;
}

/** How many of `block`'s pieces hold some of its members `a..b-1`. */
function piecesOver(block: Block, a: number, b: number): number {
  if (a >= b) return 0;
  let n = 0;
  for (let k = 0; k < block.pieces.length; k++) {
    const first = block.firsts[k] as number;
    const end = block.firsts[k + 1] ?? block.members.length;
    if (first < b && end > a) n++;
  }
  return n;
}

/**
 * Blocks of every served list by their first object and by their last, held weakly: a block no
 * list serves any more is let go, and with it the memory its pieces lie in.
 */
interface SharedBlocks {
  readonly byFirst: WeakMap<ConfigResource, WeakRef<Block>>;
  readonly byLast: WeakMap<ConfigResource, WeakRef<Block>>;
}

/** Whether `block`'s members are `resources[from..)` and end by `to`. */
function fits(block: Block, resources: ReadList<ConfigResource>, from: number, to: number): boolean {
  const end = from + block.members.length;
  return end <= to && sameMembers(block.members, resources, from, end);
}

/** Drops `block` from `kept` under its first and its last object, where it is still kept. */
function forgetBlock(kept: KeptBlocks, block: Block): void {
  const first = block.members[0];
  const last = block.members[block.members.length - 1];
  if (first !== undefined && kept.byFirst.get(first) === block) kept.byFirst.delete(first);
  if (last !== undefined && kept.byLast.get(last) === block) kept.byLast.delete(last);
}

/** Appends `block`'s pieces to `out`, and to `starts` where each starts in a list it begins at `at` of. */
function pushBlock(block: Block, at: number, out: Buffer[], starts: number[]): void {
  for (let k = 0; k < block.pieces.length; k++) {
    out.push(block.pieces[k] as Buffer);
    starts.push(at + (block.firsts[k] as number));
  }
}

/**
 * The `resources` part of a response as a few large buffers instead of one, each cached while
 * its objects stay the same. Block boundaries follow the objects' names (content-defined, like
 * rsync's rolling chunks), so adding or removing one object changes one block, not every block
 * after it. A changed block is spliced: the runs of objects it still shares with the block kept
 * before are views of that block's memory, and only its new objects are copied, into one buffer.
 * A one-object change to a 50k-object view copies that object's bytes, not its block's ~80 KB:
 * under churn, blocks copied anew were nearly all the memory the server allocated outside its
 * heap, and what started its full collections. A block is built whole again once splices would
 * leave it in more than a few pieces, so responses stay a few chunks per block.
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
  /** Per served list: blocks by their last object (see {@link splice}). */
  private readonly byLast = new Map<string, WeakMap<ConfigResource, Block>>();
  /**
   * Every list's blocks, for a list whose objects run as another's do (views admitting whole
   * namespaces, say): it takes that list's blocks where its objects are theirs, or splices its own
   * from them, instead of copying the same objects' bytes again.
   */
  private readonly shared: SharedBlocks = { byFirst: new WeakMap(), byLast: new WeakMap() };
  readonly counters: BlockCounters = {
    blocksBuilt: 0,
    blocksSpliced: 0,
    blocksShared: 0,
    bytesCopied: 0,
    objectsWalked: 0,
  };

  /** Served lists with blocks kept (a list's blocks are kept until it is forgotten). */
  get lists(): number {
    return this.byList.size;
  }

  /** Drops the blocks of a served list (its view is gone). */
  forget(listKey: string): void {
    this.byList.delete(listKey);
    this.byLast.delete(listKey);
    this.last.delete(listKey);
  }

  /** The buffers whose concatenation is every framed object of `resources`, in order. */
  chunks(listKey: string, resources: ReadList<ConfigResource>, source: FramedSource): Buffer[] {
    let blocks = this.byList.get(listKey);
    if (blocks === undefined) this.byList.set(listKey, (blocks = new WeakMap()));
    let byLast = this.byLast.get(listKey);
    if (byLast === undefined) this.byLast.set(listKey, (byLast = new WeakMap()));
    const kept: KeptBlocks = { byFirst: blocks, byLast };
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
        this.walk(kept, resources, at, (last.starts[first] as number) + shift, source, out, starts);
        for (; first < end; first++) {
          out.push(last.chunks[first] as Buffer);
          starts.push((last.starts[first] as number) + shift);
        }
        at = endOf(end - 1) + shift;
      }
    }
    this.walk(kept, resources, at, resources.length, source, out, starts);
    this.last.set(listKey, { list: resources, chunks: out, starts });
    return out;
  }

  /**
   * Appends to `out` the chunks of `resources[from..to)`, and to `starts` where each starts: the
   * blocks kept for stretches of them, new ones for the rest (the last ending at `to`).
   */
  private walk(
    kept: KeptBlocks,
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
        const known = this.keptAt(kept, r, resources, i, to);
        if (known !== undefined) {
          const end = i + known.members.length;
          pushBlock(known, i, out, starts);
          walked += end - i - 1;
          start = end;
          i = end - 1;
          continue;
        }
      }
      if (r.body.byteLength >= ALONE_BYTES) {
        if (start < i) pushBlock(this.block(kept, resources, start, i, source), start, out, starts);
        const bytes = source.framed(r);
        out.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
        starts.push(i);
        start = i + 1;
        continue;
      }
      const last = i === to - 1 || i + 1 - start >= MAX_OBJECTS || endsBlock(r);
      if (!last) continue;
      pushBlock(this.block(kept, resources, start, i + 1, source), start, out, starts);
      start = i + 1;
    }
    this.counters.objectsWalked += walked;
  }

  /**
   * The block kept for `resources` from `from` on (`r`, ending by `to`): this list's, else one
   * another list holds, which becomes this list's too (in place of its own there).
   */
  private keptAt(
    kept: KeptBlocks,
    r: ConfigResource,
    resources: ReadList<ConfigResource>,
    from: number,
    to: number,
  ): Block | undefined {
    const own = kept.byFirst.get(r);
    if (own !== undefined && fits(own, resources, from, to)) return own;
    const other = this.shared.byFirst.get(r)?.deref();
    if (other === undefined || other === own || !fits(other, resources, from, to)) return undefined;
    const last = other.members[other.members.length - 1] as ConfigResource;
    const back = kept.byLast.get(last);
    if (own !== undefined) forgetBlock(kept, own);
    if (back !== undefined) forgetBlock(kept, back);
    kept.byFirst.set(r, other);
    kept.byLast.set(last, other);
    this.counters.blocksShared++;
    return other;
  }

  /**
   * The block of `resources[from..to)`: the one kept for them, one spliced from the block kept
   * for them before a change (this list's, else another list's around the same objects), or a
   * new one.
   */
  private block(
    kept: KeptBlocks,
    resources: ReadList<ConfigResource>,
    from: number,
    to: number,
    source: FramedSource,
  ): Block {
    const first = resources.at(from) as ConfigResource;
    const last = resources.at(to - 1) as ConfigResource;
    const known = kept.byFirst.get(first);
    if (known !== undefined && sameMembers(known.members, resources, from, to)) return known;
    // The blocks these objects were in before the change: found by their first object and by
    // their last, whichever a change left in place (a block whose first and last objects both
    // changed is found by neither, and built whole).
    const back = kept.byLast.get(last);
    let block =
      known === undefined && back === undefined
        ? undefined
        : this.splice(known, back, resources, from, to, source);
    if (block === undefined) {
      const front = this.shared.byFirst.get(first)?.deref();
      const end = this.shared.byLast.get(last)?.deref();
      if ((front !== undefined && front !== known) || (end !== undefined && end !== back))
        block = this.splice(front, end, resources, from, to, source);
    }
    block ??= this.built(resources, from, to, source);
    // The blocks replaced are forgotten under both their keys: an object still served would
    // otherwise keep a block no response holds, and the memory its pieces lie in, for as long.
    if (known !== undefined) forgetBlock(kept, known);
    if (back !== undefined) forgetBlock(kept, back);
    kept.byFirst.set(first, block);
    kept.byLast.set(last, block);
    const ref = new WeakRef(block);
    this.shared.byFirst.set(first, ref);
    this.shared.byLast.set(last, ref);
    return block;
  }

  /**
   * `resources[from..to)` as pieces of the blocks kept for them before a change (`front`, whose
   * first object is theirs, and `back`, whose last is: one block, or two a removal joined) for
   * every run of objects they still hold, and views of one new buffer for the objects between,
   * when the pieces stay few: a change to an object of a block copies that object's bytes, not its
   * neighbours'. The old pieces are views of the memory the kept blocks lie in, which stays as long
   * as they do.
   */
  private splice(
    front: Block | undefined,
    back: Block | undefined,
    resources: ReadList<ConfigResource>,
    from: number,
    to: number,
    source: FramedSource,
  ): Block | undefined {
    const olds =
      front === undefined ? [back as Block] : back === undefined || back === front ? [front] : [front, back];
    // Both sides are in served order (namespace, then name): walked side by side, an object of
    // both is kept where it lies, any other is new, and an old one missing was removed.
    const runs: Run[] = [];
    const fresh: ConfigResource[] = [];
    let b = 0;
    let j = 0;
    let pieces = 0;
    for (let i = from; i < to;) {
      const r = resources.at(i) as ConfigResource;
      const old = olds[b];
      const o = old?.members[j];
      if (old === undefined || o === undefined) {
        if (old !== undefined) {
          b++;
          j = 0;
          continue;
        }
        // Past every kept block: the rest is new.
        pieces += addFresh(runs, fresh, r);
        i++;
        continue;
      }
      if (o === r) {
        const last = runs[runs.length - 1];
        if (last !== undefined && last.block === old && last.end === j) last.end = j + 1;
        else {
          runs.push({ block: old, start: j, end: j + 1 });
          pieces++;
        }
        i++;
        j++;
        continue;
      }
      const order = compareByName(r, o);
      if (order >= 0) j++;
      if (order <= 0) {
        pieces += addFresh(runs, fresh, r);
        i++;
      }
      // Pieces only add up from here: a splice already over the bound is given up at once.
      if (pieces > MAX_PIECES) return undefined;
    }
    if (fresh.length === to - from) return undefined;
    // Pieces counted by runs; a run of old members over several of their block's pieces is that many.
    for (const run of runs)
      if (run.block !== undefined) pieces += piecesOver(run.block, run.start, run.end) - 1;
    if (pieces > MAX_PIECES) return undefined;
    const middle = fresh.length === 0 ? undefined : this.framed(fresh, source);
    const into: BlockParts = {
      members: new Array<ConfigResource>(to - from),
      pieces: [],
      firsts: [],
      ends: new Uint32Array(to - from),
    };
    let at = 0;
    let size = 0;
    let next = 0;
    for (const run of runs) {
      if (run.block !== undefined) {
        size = take(run.block, run.start, run.end, into, at, size);
        at += run.end - run.start;
        continue;
      }
      // New objects: a view of the new buffer.
      const bytes = (middle as FramedRun).bytes;
      const ends = (middle as FramedRun).ends;
      const startByte = next === 0 ? 0 : (ends[next - 1] as number);
      const endByte = ends[next + run.end - run.start - 1] as number;
      into.pieces.push(bytes.subarray(startByte, endByte));
      into.firsts.push(at);
      for (let k = next; k < next + run.end - run.start; k++, at++) {
        into.members[at] = fresh[k] as ConfigResource;
        size += (ends[k] as number) - (k === 0 ? 0 : (ends[k - 1] as number));
        into.ends[at] = size;
      }
      next += run.end - run.start;
    }
    this.counters.blocksSpliced++;
    return into;
  }

  /** A new block of `resources[from..to)`, its objects' framed bytes copied into one buffer. */
  private built(resources: ReadList<ConfigResource>, from: number, to: number, source: FramedSource): Block {
    const members = new Array<ConfigResource>(to - from);
    for (let k = 0; k < members.length; k++) members[k] = resources.at(from + k) as ConfigResource;
    const { bytes, ends } = this.framed(members, source);
    this.counters.blocksBuilt++;
    return { members, pieces: [bytes], firsts: [0], ends };
  }

  /** The framed bytes of `members` copied into one new buffer, and where each ends in it. */
  private framed(members: readonly ConfigResource[], source: FramedSource): FramedRun {
    // Indexed loops, no closure per object: a view's blocks are first built mostly before the
    // code is optimized.
    const count = members.length;
    const parts = new Array<Uint8Array | Plan>(count);
    const ends = new Uint32Array(count);
    let size = 0;
    for (let k = 0; k < count; k++) {
      const r = members[k] as ConfigResource;
      const part = source.plan === undefined ? source.framed(r) : source.plan(r);
      parts[k] = part;
      size += part instanceof Uint8Array ? part.byteLength : part.length;
      ends[k] = size;
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
    this.counters.bytesCopied += size;
    return { bytes, ends };
  }
}
