import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

/** A marking reported longer ago than this is taken as ended, should its end go unreported. */
const MARKING_STALE_MS = 10_000;

/**
 * V8's collections of the heap as node reports them: how many full ones (each a marking of the
 * whole heap, the costly kind on a large heap) and young ones since counting started, and whether
 * a marking of the old generation is under way, from the report that it started to the report of
 * the full collection that ends it. Node reports collections a few milliseconds after they happen
 * (to observers, between turns of the event loop): a read may miss the last few milliseconds, and
 * the first moments of a marking go unseen.
 */
export class HeapCollections {
  full = 0;
  young = 0;
  private markingSince: number | undefined;
  private observer: PerformanceObserver | undefined;

  /** Starts watching (once); returns this. */
  start(): this {
    if (this.observer !== undefined) return this;
    this.observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) this.note(entry);
    });
    this.observer.observe({ entryTypes: ['gc'] });
    return this;
  }

  stop(): void {
    this.observer?.disconnect();
    this.observer = undefined;
    this.markingSince = undefined;
  }

  get marking(): boolean {
    return this.markingSince !== undefined && performance.now() - this.markingSince < MARKING_STALE_MS;
  }

  private note(entry: PerformanceEntry): void {
    const kind = (entry as { readonly detail?: { readonly kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) {
      this.markingSince = entry.startTime;
    } else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
      this.full++;
      this.markingSince = undefined;
    } else if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
      this.young++;
    }
  }
}

let shared: HeapCollections | undefined;

/** The process's one {@link HeapCollections}, started on first use and watching for good. */
export function heapCollections(): HeapCollections {
  shared ??= new HeapCollections().start();
  return shared;
}
