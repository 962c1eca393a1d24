import type { Observable } from 'rxjs';
import type { MeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';
import type { SourceState } from '../core/source-event.js';

/** The content version of a kind that no source holds. */
export const EMPTY_KIND_VERSION = 'empty';

/** Every object of one kind, as served. Immutable. */
export interface KindSnapshot {
  /** Registry key of the kind. */
  readonly kind: string;
  /** Content-derived: equal on every replica for equal content, unchanged when content is. */
  readonly version: string;
  /**
   * Increases whenever `version` changes, even back to an older content; caches of encoded
   * responses key on it so a response is never reused across a change.
   */
  readonly generation: number;
  /** Sorted by namespace, then name. Must not be altered. */
  readonly resources: readonly ConfigResource[];
}

/** What the merge knows about one source, for readiness and the debug pages. */
export interface SourceReport {
  readonly name: string;
  readonly type: string;
  readonly state: SourceState;
  /** True once the source has delivered one complete state. */
  readonly everSynced: boolean;
  readonly revision: string;
  readonly lastSyncTime?: Date;
  readonly lastError?: MeshmuxError;
  /** Objects per kind the source currently contributes (before precedence). */
  readonly counts: Readonly<Record<string, number>>;
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
}

/** One immutable view of the merged config. */
export interface ConfigSnapshot {
  /** Increases with every snapshot built. */
  readonly generation: number;
  /** Hash of every kind version. */
  readonly version: string;
  /** Kinds present in the merge; a kind no source holds is absent (serve it as empty). */
  readonly kinds: ReadonlyMap<string, KindSnapshot>;
  /** False until every source synced once or the startup budget passed. */
  readonly ready: boolean;
  /** Names of sources that have not synced yet (reported while the budget is running or after it). */
  readonly waitingFor: readonly string[];
  readonly sources: readonly SourceReport[];
}

/**
 * Read-only access to the merged config. `snapshots$` replays the current snapshot to every new
 * subscriber, then emits each new one; it never errors.
 */
export interface SnapshotReader {
  current(): ConfigSnapshot;
  readonly snapshots$: Observable<ConfigSnapshot>;
}
