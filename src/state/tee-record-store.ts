import type { SourceRecord, SourceRecordStore } from '../merge/source-record.js';

/**
 * A store that hands every record to several stores (the local folder and etcd): each writes on
 * its own schedule, and one that fails never holds the other back.
 */
export class TeeRecordStore implements SourceRecordStore {
  constructor(private readonly stores: readonly SourceRecordStore[]) {}

  /** Resolves once every store that writes at once has kept the change. */
  changed(source: string, read: () => SourceRecord, upstream: boolean): Promise<void> | void {
    const kept: Promise<void>[] = [];
    for (const store of this.stores) {
      const done = store.changed(source, read, upstream);
      if (done !== undefined) kept.push(done);
    }
    if (kept.length > 0) return Promise.all(kept).then(() => undefined);
  }

  removed(source: string): void {
    for (const store of this.stores) store.removed(source);
  }
}
