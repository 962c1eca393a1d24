import type { Logger } from './logger.js';
import type { Observable, Subscription } from './rx.js';
import { heapCollector } from './young-collections.js';

/**
 * The `--initial-old-space-size` among node's own arguments (megabytes), the last one given;
 * undefined when there is none. V8 reads either spelling, dashes or underscores.
 */
export function initialOldSpaceMb(nodeArgs: readonly string[]): number | undefined {
  let mb: number | undefined;
  for (const arg of nodeArgs) {
    const given = /^--initial[-_]old[-_]space[-_]size=(\d+)$/.exec(arg)?.[1];
    if (given !== undefined) mb = Number(given);
  }
  return mb;
}

/**
 * One full collection of the heap, soon after the merged state is first ready, when node was
 * started with `--initial-old-space-size` (as `npm start` and the image start meshmux); nothing
 * otherwise. Returns the subscription that waits for it, if any.
 *
 * Why: V8 sizes the room of the old generation from its first collections. Left to itself, it
 * starts marking the whole heap at some 12 MB, again at 20-odd MB and again at some 90 MB while a
 * start reads a large mesh, each time for a heap that is nearly all alive, and each marking slows
 * the start: at 100k objects, starts were 0.1–0.15 s quicker on Node 20 and some 0.3 s on Node 24
 * without them. Given an initial size, V8 marks nothing before the old generation reaches it, but
 * then keeps that room until its first full collection: the collection run here, once everything
 * the start read is in place, sizes it from the heap then alive, as V8 would have.
 */
export function collectOnceReady(
  snapshots: Observable<{ readonly ready: boolean }>,
  log: Logger,
  nodeArgs: readonly string[] = process.execArgv,
): Subscription | undefined {
  const initialMb = initialOldSpaceMb(nodeArgs);
  if (initialMb === undefined) return undefined;
  let seen = false;
  const waiting: Subscription = snapshots.subscribe((s) => {
    if (seen || !s.ready) return;
    seen = true;
    // After the turn that published the snapshot: whoever waits for it sees it first (and the
    // subscription exists by then, however soon the first ready state came).
    setImmediate(() => {
      waiting.unsubscribe();
      const collect = heapCollector();
      if (collect === undefined) return;
      const started = performance.now();
      collect();
      log.info(
        {
          ms: Math.round(performance.now() - started),
          heapMb: Math.round(process.memoryUsage().heapUsed / 1e5) / 10,
          initialOldSpaceMb: initialMb,
        },
        'first full collection of the heap after the start',
      );
    });
  });
  return waiting;
}
