import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

/**
 * Collections of V8's heap since {@link CollectionCounts.start}: full ones (each a marking of the
 * whole heap, the costly kind on a large heap) and young ones. Node reports them a little after
 * they end, so a read may miss the last few milliseconds' collections.
 */
export class CollectionCounts {
  full = 0;
  young = 0;
  private observer: PerformanceObserver | undefined;

  /** Starts counting (once); returns this. */
  start(): this {
    if (this.observer !== undefined) return this;
    this.observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) this.count(entry);
    });
    this.observer.observe({ entryTypes: ['gc'] });
    return this;
  }

  stop(): void {
    this.observer?.disconnect();
    this.observer = undefined;
  }

  private count(entry: PerformanceEntry): void {
    const kind = (entry as { readonly detail?: { readonly kind?: number } }).detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) this.full++;
    else if (kind === constants.NODE_PERFORMANCE_GC_MINOR) this.young++;
  }
}
