import type { ReadList } from '../core/chunked-list.js';
import type { ConfigResource } from '../core/resource.js';
import type { HoldReason } from './config-snapshot.js';
import type { SourcePolicy } from './source-rules.js';
import type { WindowRecord } from './update-guards.js';

/**
 * What one source last contributed, in a form that outlives the process: the objects it sent
 * (before its access rules, so a restart under edited rules re-admits them), the kinds its upstream
 * had answered, and an update its guards hold. Restoring it yields the same served state the source
 * had. Self-contained per source, so a store can keep each record as one value (a file, a key).
 */
export interface SourceRecord {
  /** The source's configured name and type; a record is restored only into the same pair. */
  readonly source: string;
  readonly type: string;
  /** The upstream's revision of `resources`. */
  readonly revision: string;
  /** When the source last synced with its upstream (ms since the epoch); absent if it never did. */
  readonly lastSyncMs?: number;
  /** When this record was taken (ms since the epoch). */
  readonly savedMs: number;
  /** True once the upstream answered every kind; otherwise only `answeredKinds` are known. */
  readonly complete: boolean;
  readonly answeredKinds: readonly string[];
  /**
   * What the source sent, as it sent it (before its rules and provenance). Must not be altered.
   * The ledger's records share the chunks of the lists the source sent: two records a change
   * apart share all but the chunks it fell in.
   */
  readonly resources: ReadList<ConfigResource>;
  readonly held?: HeldRecord;
  /** The rules the source ran under; absent in records of earlier releases. */
  readonly rules?: RecordedRules;
  /** Who took the record and what it knew of etcd's then; absent where no etcd is configured. */
  readonly origin?: RecordOrigin;
  /**
   * The guards' deletion window (see `DeletionWindow`), so a restart judges deletions from the
   * same peak; absent before the source's first deleting update, and in records of earlier releases.
   */
  readonly deletionWindow?: WindowRecord;
}

/**
 * Which process took a record, and the revision of the source's record in etcd it knew of then:
 * what orders a replica's own record against the fleet's without comparing two machines' clocks.
 */
export interface RecordOrigin {
  /** The process (host name and process id). */
  readonly replica: string;
  /** etcd's cluster and the revision of the source's record there; absent when none was known. */
  readonly etcd?: { readonly cluster: string; readonly revision: number };
}

/**
 * What a source admitted and how its guards judged, as recorded: enough to go on serving what it
 * served, and to judge its removal, once it is no longer configured.
 */
export interface RecordedRules extends Pick<
  SourcePolicy,
  'priority' | 'allow' | 'deny' | 'keepOnEmpty' | 'maxDeleteRatio' | 'minDeletes' | 'confirmAfterMs'
> {
  readonly defaultNamespace: string;
}

/** An update the guards hold: the state the source asked for, not yet applied. */
export interface HeldRecord {
  readonly reason: HoldReason;
  readonly sinceMs: number;
  readonly deletions: number;
  readonly total: number;
  /** Kinds the held state replaces; absent when it replaces the source's whole state. */
  readonly kinds?: readonly string[];
  readonly resources: readonly ConfigResource[];
  readonly revision: string;
  /** Reason `emptied-kind`: the kinds held alone. */
  readonly emptiedKinds?: readonly string[];
}

/**
 * Where the merge keeps its records. Calls are cheap notifications: the store decides when and
 * how to write (coalescing changes), calling `read` at that time for the source's latest record.
 */
export interface SourceRecordStore {
  /**
   * The source's record changed; `read` returns its latest version when called. A store that
   * writes it at once returns a promise that resolves when a record at least this new is kept (or
   * its write failed: the store reports and retries it); it never rejects. The merge serves the
   * change once it resolves, or after a bound. `upstream`: the change carries what the source's
   * upstream sent (a state, an update settled or confirmed), not only a rule edited or an expiry;
   * a store shared by replicas orders records by it.
   */
  changed(source: string, read: () => SourceRecord, upstream: boolean): Promise<void> | void;
  /** The source left the configuration: its record is forgotten. */
  removed(source: string): void;
}
