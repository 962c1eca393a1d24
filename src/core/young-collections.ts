import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { heapCollections } from './heap-collections.js';

/**
 * Runs a collection of V8's young generation after network input: at the end of a message once
 * `everyBytes` were read since the last one (see {@link YoungCollections.received}).
 *
 * Why: node's HTTP/2 reads each socket read into a new 64 KiB ArrayBuffer, and a large upstream
 * response is hundreds of them. They die as soon as their bytes are copied out, but only a young
 * collection frees them, and a process that allocates little else (a one-object change among 50k)
 * goes many responses without one. Meanwhile V8 counts the external memory allocated since its
 * last full collection against the old generation's limit, so every response of 10 MB eats 10 MB
 * of the headroom and starts a marking of the whole heap (100–200 ms of main thread on a heap of
 * 150 MB) every change or two. A young collection right after the bytes are read costs about a
 * millisecond and gives the headroom back.
 *
 * Not while V8 marks the old generation: in node 24's V8, young and full collections do not
 * overlap, and a young collection asked for during a marking finishes that marking at once, in one
 * pause of the main thread (80–160 ms on a heap of 150 MB) instead of in steps beside it (node 20's
 * runs a scavenge). The full collection that ends the marking frees the young generation too.
 */
export class YoungCollections {
  private since = 0;
  /** Collections run so far; a benchmark counter. */
  runs = 0;
  /** Collections left out because V8 was marking; a benchmark counter. */
  skipped = 0;

  constructor(
    /** Runs one young collection; undefined where none can be asked for (nothing is done then). */
    private readonly collect: (() => void) | undefined,
    private readonly everyBytes: number,
    /** Whether V8 is marking the old generation now. */
    private readonly marking: () => boolean = () => false,
  ) {}

  /**
   * Notes `bytes` read from the network and let go of by the caller. Collects at the end of a
   * message (`atBoundary`) once the bytes noted since the last collection reach the threshold, and
   * inside a message once they reach twice it: with a threshold of 4 MB, a response of 6 MB costs
   * one collection, after its last chunk, and one of 17 MB two, inside it (its last MB is counted
   * towards the next).
   *
   * Why inside a message at all: node 24's V8 can schedule a marking of the whole heap while the
   * chunks arrive (a task that starts it as soon as the main thread is free, inside the message).
   * The chunks of a whole state allocated since the last collection (17 MB on a large mesh, when an
   * upstream sends its state again) are enough to fill the room V8 leaves after a full collection
   * of a heap that grows slowly; a collection every 8 MB keeps them under it.
   */
  received(bytes: number, atBoundary = true): void {
    if (this.collect === undefined) return;
    this.since += bytes;
    if (this.since < (atBoundary ? this.everyBytes : 2 * this.everyBytes)) return;
    this.since = 0;
    if (this.marking()) {
      this.skipped++;
      return;
    }
    this.runs++;
    this.collect();
  }
}

/** Network input between two young collections, bytes: a few times node's 64 KiB reads. */
const EVERY_BYTES = 4 * 1024 * 1024;

let shared: YoungCollections | undefined;

/** The process's one {@link YoungCollections}, created on first use. */
export function youngCollections(): YoungCollections {
  if (shared === undefined) {
    const collect = youngCollectionFunction();
    const watch = collect === undefined ? undefined : heapCollections();
    shared = new YoungCollections(collect, EVERY_BYTES, () => watch?.marking === true);
  }
  return shared;
}

/**
 * V8's collector, or undefined when it offers none: called bare it runs a full collection, with
 * `{ type: 'minor' }` a young one. V8 exposes it only to contexts created while `--expose-gc` is
 * set: the flag is set for the time it takes to create one context and read its `gc`, then
 * cleared, so no other context gets it (and a process started with the flag keeps its own `gc`).
 */
export function heapCollector(): ((options?: { type: 'minor' }) => void) | undefined {
  const existing = (globalThis as { gc?: unknown }).gc;
  if (typeof existing === 'function') return existing as (options?: { type: 'minor' }) => void;
  try {
    setFlagsFromString('--expose-gc');
    const exposed: unknown = runInNewContext('gc');
    return typeof exposed === 'function' ? (exposed as (options?: { type: 'minor' }) => void) : undefined;
  } catch {
    return undefined;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

/** Whether node was started with V8 sweeping array buffers within each collection already. */
const SWEEPS_WITHIN = process.execArgv.includes('--no-concurrent-array-buffer-sweeping');

/**
 * A function that runs a young collection, or undefined when V8 offers none. The array buffers the
 * collection finds dead are freed before it returns, instead of on a helper thread some
 * milliseconds later.
 *
 * Why: V8 counts the array-buffer bytes allocated since its last full collection against the old
 * generation's limit until their sweep is finalized, and checks that limit as each collection
 * ends. After a full collection of a heap that grows slowly it leaves room for a tenth of the live
 * heap, and the HTTP/2 chunks of a whole upstream state (17 MB on a large mesh), found dead by
 * this collection but not yet swept, would fill it: the check would start a marking of the whole
 * heap (some 200 ms of CPU on a heap of 110 MB, for a resync that costs 40 ms without it). The
 * setting is V8's, for the process: it is on for this collection only, so V8's own collections
 * keep sweeping beside the main thread (a full collection's sweep of every buffer would add some 6
 * ms to its pause on a large mesh). Node 24's V8 can also schedule a marking while the bytes
 * arrive, before any collection at the end of a message: see {@link YoungCollections.received}.
 */
export function youngCollectionFunction(): (() => void) | undefined {
  const gc = heapCollector();
  if (gc === undefined) return undefined;
  return () => {
    if (!SWEEPS_WITHIN) sweepWithin(true);
    try {
      gc({ type: 'minor' });
    } finally {
      if (!SWEEPS_WITHIN) sweepWithin(false);
    }
  };
}

function sweepWithin(on: boolean): void {
  try {
    setFlagsFromString(on ? '--no-concurrent-array-buffer-sweeping' : '--concurrent-array-buffer-sweeping');
  } catch {
    // A V8 without the setting sweeps as it does: only the collections' cost depends on it.
  }
}
