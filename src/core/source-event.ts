import type { MeshmuxError } from './errors.js';
import type { ReadList } from './chunked-list.js';
import type { ConfigResource } from './resource.js';

/** Where a source stands; transitions are reported as `status` events. */
export type SourceState =
  /** Not yet synced since start (or since a restart of its transport). */
  | 'connecting'
  /**
   * Serves the state it had persisted before this process started, and has not synced with its
   * upstream since: the last good state, kept until the upstream answers. Set by the merge when
   * it restores that state; a source never emits it (it only speaks of its own upstream).
   */
  | 'restored'
  /** Holds a complete, current view of its upstream. */
  | 'synced'
  /** Lost its upstream; its last good state is still served. */
  | 'stale'
  /** Cannot reach or read its upstream and never had a good state. */
  | 'failing';

/**
 * A source's full state (or its full state for some kinds). The merge replaces that source's
 * previous state for the covered kinds with `resources`, so omitting an object deletes it. A kind
 * listed in `kinds` counts as answered by the upstream: a source lists only kinds it has heard about,
 * never one whose upstream stayed silent.
 */
export interface SourceSnapshotEvent {
  readonly type: 'snapshot';
  /** Kinds (registry keys) this event replaces; absent means every kind. */
  readonly kinds?: ReadonlySet<string>;
  /**
   * The objects, each already validated and encoded: an array, or chunks a streaming source edits
   * change by change (a list of one kind one object apart from the last shares all chunks but one
   * with it). Must not be altered.
   */
  readonly resources: ReadList<ConfigResource>;
  /** The upstream's version of this state (content hash, commit, MCP version_info). */
  readonly revision: string;
  /**
   * Kinds this state lists afresh from its upstream (a Kubernetes relist) rather than following
   * edits it saw: an object a listing lacks may be missing because the upstream is not ready, so a
   * kind a listing empties is held (see `update-guards.ts`). Every state of an `xds`, `mcp` or
   * `mcp-sink` source is a listing of its kinds, whatever this says.
   */
  readonly listed?: ReadonlySet<string>;
  /**
   * Kinds, not in `kinds`, that the upstream says it does not serve (a Kubernetes group or CRD
   * it answers 404 for): answered, so the source can be complete without them, but nothing of
   * them is replaced. What the source holds of such a kind (from before, or restored) stays:
   * only a state that lists the kind can take its objects away.
   */
  readonly unserved?: ReadonlySet<string>;
  /** Objects rejected in this state; each names where and why. Must not be altered. */
  readonly errors: readonly MeshmuxError[];
  /** Things skipped or repaired (unknown kinds, pruned fields). Must not be altered. */
  readonly warnings: readonly MeshmuxError[];
  /**
   * W3C `traceparent` the upstream sent with this state (e.g. gRPC metadata), if any: the trace
   * of this change then continues the upstream's trace.
   */
  readonly traceparent?: string;
}

/** A change of the source's state. `error` is set for `stale` and `failing`. */
export interface SourceStatusEvent {
  readonly type: 'status';
  readonly state: SourceState;
  readonly error?: MeshmuxError;
}

export type SourceEvent = SourceSnapshotEvent | SourceStatusEvent;

/** Static facts about a configured source, shared by upstream, merge and the debug pages. */
export interface SourceDescriptor {
  /** Unique among the configured sources. */
  readonly name: string;
  /** `file`, `xds`, `mcp`, `git`, `zookeeper`, ... */
  readonly type: string;
  /** Namespace for documents that carry none. */
  readonly defaultNamespace: string;
  /** Kinds (registry keys) the source can ever deliver; absent means any. Readiness waits only on these. */
  readonly kinds?: ReadonlySet<string>;
}
