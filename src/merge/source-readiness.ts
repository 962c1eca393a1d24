import type { SourceRecord } from './source-record.js';

/**
 * Which kinds one source can answer for: those its upstream answered in this process, and those
 * the persisted record it started from covered. A source is complete once its upstream answered
 * every kind it may deliver (or sent a state covering all kinds), and serves all once it is
 * complete or restored from a complete record. `kinds` (the kinds the source may deliver,
 * undefined for "any kind") is a parameter because a reload may change it.
 */
export class SourceReadiness {
  private readonly answered = new Set<string>();
  private answeredAll = false;
  /** What the persisted record this source started from covered; undefined when it started empty. */
  private restored:
    { readonly at: Date; readonly all: boolean; readonly kinds: ReadonlySet<string> } | undefined;

  /** Notes the kinds a state from the upstream answered (undefined: every kind); true if that is news. */
  answer(kinds: ReadonlySet<string> | undefined): boolean {
    if (kinds === undefined) {
      if (this.answeredAll) return false;
      this.answeredAll = true;
      return true;
    }
    const known = this.answered.size;
    for (const kind of kinds) this.answered.add(kind);
    return this.answered.size !== known;
  }

  /** Notes what a persisted record covered. */
  restoreFrom(record: SourceRecord): void {
    this.restored = {
      at: new Date(record.savedMs),
      all: record.complete,
      kinds: new Set(record.answeredKinds),
    };
  }

  /** When the record this source started from was saved; undefined when it started empty. */
  get restoredAt(): Date | undefined {
    return this.restored?.at;
  }

  /** Whether the upstream answered every kind in `kinds` (a complete live state). */
  complete(kinds: ReadonlySet<string> | undefined): boolean {
    if (this.answeredAll) return true;
    if (kinds === undefined) return false;
    for (const kind of kinds) if (!this.answered.has(kind)) return false;
    return true;
  }

  /** Whether the source has something to serve for a kind: answered by its upstream, or restored. */
  knows(kind: string): boolean {
    if (this.answeredAll || this.answered.has(kind)) return true;
    return this.restored !== undefined && (this.restored.all || this.restored.kinds.has(kind));
  }

  /** Whether the source serves a complete state: synced, or restored from a complete record. */
  servesAll(kinds: ReadonlySet<string> | undefined): boolean {
    if (this.complete(kinds) || this.restored?.all === true) return true;
    if (kinds === undefined) return false;
    for (const kind of kinds) if (!this.knows(kind)) return false;
    return true;
  }

  /**
   * What a record of this source says it covers: complete when synced or restored from a
   * complete record, and every kind answered here or restored, sorted. A new array each call.
   */
  coverage(kinds: ReadonlySet<string> | undefined): { complete: boolean; answeredKinds: string[] } {
    return {
      complete: this.complete(kinds) || this.restored?.all === true,
      answeredKinds: [...new Set([...this.answered, ...(this.restored?.kinds ?? [])])].sort(),
    };
  }
}
