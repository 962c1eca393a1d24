import type { Observable } from '../core/rx.js';
import type { MeshmuxError } from '../core/errors.js';
import type { ChunkedList } from '../core/chunked-list.js';
import type { ConfigResource } from '../core/resource.js';
import type { SourceState } from '../core/source-event.js';
import type { RejectionReason } from './source-rules.js';

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
  /**
   * The same objects in chunks (the merge's snapshots carry them; `resources` is then built from
   * them when first read): what reads a kind after every change reads this, which the snapshot
   * before shares except where the change fell.
   */
  readonly list?: ChunkedList<ConfigResource>;
  /**
   * The revision of each source holding objects of this kind, in configuration order, as of that
   * source's last event that changed what it holds of this kind (an event that re-sends the same
   * objects under a new revision leaves it alone). Lets the serving side tell clients which
   * upstream states a response was built from without changing anything when content does not.
   */
  readonly sourceRevisions?: readonly string[];
  /**
   * What changed since the kind's previous snapshot, when the merge knows it without a walk: lets
   * views and telemetry follow a one-object change in O(changed) instead of comparing both
   * lists whole. Absent after a bulk change or a gap (the kind had no objects).
   */
  readonly changes?: KindChanges;
  /**
   * Names this snapshot object among every kind snapshot of the process (a new one for any change,
   * even of instances only), so a change set can say exactly which snapshot it leads from.
   */
  readonly serial?: number;
}

/**
 * The difference between two snapshots of a kind: objects no longer served (or replaced) and
 * objects newly served (or replacing), each sorted by namespace then name. A replaced object is in
 * both lists, as its old and its new instance.
 */
export interface KindChanges {
  /** The `serial` of the snapshot these changes lead from. */
  readonly from: number;
  readonly removed: readonly ConfigResource[];
  readonly added: readonly ConfigResource[];
}

/** An object a source sent that its rules kept out. */
export interface Rejection {
  readonly source: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly reason: RejectionReason;
}

/** One object involved in a conflict. */
export interface ConflictParty {
  readonly source: string;
  readonly priority: number;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /** Whether istiods receive this object. */
  readonly served: boolean;
}

/** Conflict categories. `same-key` is one object defined by several sources; the rest are semantic. */
export type ConflictType =
  'same-key' | 'service-entry-host' | 'gateway-host' | 'destination-rule-host' | 'sidecar-default';

/** Something istiod would resolve silently, made visible. */
export interface Conflict {
  readonly type: ConflictType;
  /** What the parties share: `kind|namespace/name` for same-key, otherwise the host, gateway or namespace. */
  readonly subject: string;
  /** How it was resolved: by priority, by configuration order (equal priorities), or by serving all parties. */
  readonly resolution: 'priority' | 'config-order' | 'served-all';
  readonly parties: readonly ConflictParty[];
}

/**
 * Every reason a guard may hold an update back. A closed set: it labels metrics. `emptied-kind`:
 * a listing takes every object of a kind the source held several of, or cuts a kind by more than
 * `minDeletes` and `maxDeleteRatio` of its objects (the kinds held alone); `removed`: the source
 * left the configuration while holding objects the guards would not let go at once; `rules`:
 * edited access rules would withdraw as much.
 */
export const HOLD_REASONS = ['empty', 'mass-delete', 'emptied-kind', 'removed', 'rules'] as const;

/** Why a guard holds an update back (one of `HOLD_REASONS`). */
export type HoldReason = (typeof HOLD_REASONS)[number];

/** An update a guard holds back, as reported. */
export interface HeldReport {
  readonly reason: HoldReason;
  readonly since: Date;
  readonly deletions: number;
  readonly total: number;
  /** Names the held update: equal on every replica holding the same one. */
  readonly digest: string;
  /**
   * Reason `emptied-kind`: the kinds held alone, which the update would take every object of or
   * cut, when judged in this process.
   */
  readonly emptiedKinds?: readonly string[];
}

/** What the merge knows about one source, for readiness and the debug pages. */
export interface SourceReport {
  readonly name: string;
  readonly type: string;
  readonly priority: number;
  readonly state: SourceState;
  /** True once the source has delivered one complete state in this process. */
  readonly everSynced: boolean;
  /** Whether the merge waits for this source before serving the kinds it may hold. */
  readonly required: boolean;
  /** When the state it serves was restored from a persisted record, the time that record was taken. */
  readonly restoredFrom?: Date;
  /** Kinds the source may hold that it can serve nothing for yet: neither answered nor restored. */
  readonly missingKinds: readonly string[];
  readonly revision: string;
  readonly lastSyncTime?: Date;
  readonly lastError?: MeshmuxError;
  readonly staleSince?: Date;
  /** An update held by the empty-state or mass-deletion guard. */
  readonly held?: HeldReport;
  /** Objects per kind the source currently contributes (after its rules, before precedence). */
  readonly counts: Readonly<Record<string, number>>;
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
  readonly rejections: readonly Rejection[];
}

/** One immutable view of the merged config. */
export interface ConfigSnapshot {
  /** Increases with every snapshot built. */
  readonly generation: number;
  /** Hash of every kind version. */
  readonly version: string;
  /** Kinds present in the merge; a kind no source holds is absent (serve it as empty). */
  readonly kinds: ReadonlyMap<string, KindSnapshot>;
  /**
   * True once every source the merge waits for serves a complete state: synced with its upstream,
   * or restored from its persisted record.
   */
  readonly ready: boolean;
  /**
   * Whether a kind may be answered: every source that may hold it has answered it or restored it
   * (sources with `required: false` are waited for only until the startup budget passes).
   */
  readyFor(kind: string): boolean;
  /** Names of the sources the merge still waits for (neither synced nor restored). */
  readonly waitingFor: readonly string[];
  /** True once the startup budget (`syncTimeout`) has passed. */
  readonly budgetPassed: boolean;
  readonly sources: readonly SourceReport[];
  readonly conflicts: readonly Conflict[];
}

/**
 * Read-only access to the merged config. `snapshots$` replays the current snapshot to every new
 * subscriber, then emits each new one; it never errors.
 */
export interface SnapshotReader {
  current(): ConfigSnapshot;
  readonly snapshots$: Observable<ConfigSnapshot>;
}
