import type { SourceRecord, SourceRecordStore } from '../merge/source-record.js';

/**
 * A store that hands every record to several stores (the local folder and etcd): each writes on
 * its own schedule, and one that fails never holds the other back.
 */
export class TeeRecordStore implements SourceRecordStore {
  constructor(private readonly stores: readonly SourceRecordStore[]) {}

  changed(source: string, read: () => SourceRecord): void {
    for (const store of this.stores) store.changed(source, read);
  }

  removed(source: string): void {
    for (const store of this.stores) store.removed(source);
  }
}
