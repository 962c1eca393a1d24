import { resourceKey, timestampFromDate, type ConfigResource, type Timestamp } from '../../core/resource.js';

/**
 * The creation time of each object, fixed when a source first sees it, so reading an object again
 * (an edit, a new commit, a restart of the watch) never changes its `createTime`: istiod orders
 * conflicting objects by it. One per source run.
 */
export class FirstSeenTimes {
  private readonly times = new Map<string, Timestamp>();

  /**
   * The `createTimeFor` of a read: the time an object was first seen, or `now()` (called only for
   * an object never seen) for a new one.
   */
  createTimeFor(now: () => Date): (kind: string, namespace: string, name: string) => Timestamp {
    return (kind, namespace, name) => {
      const key = resourceKey({ kind, namespace, name });
      let ts = this.times.get(key);
      if (ts === undefined) this.times.set(key, (ts = timestampFromDate(now())));
      return ts;
    };
  }

  /** Forgets every object but `live`, so the map stays as large as what is served. */
  retainOnly(live: readonly ConfigResource[]): void {
    const keep = new Set(live.map(resourceKey));
    for (const key of this.times.keys()) if (!keep.has(key)) this.times.delete(key);
  }
}
