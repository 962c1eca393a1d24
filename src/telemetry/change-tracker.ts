import type { SourceSnapshotEvent } from '../core/source-event.js';
import type { ConfigSnapshot } from '../merge/config-snapshot.js';

/** One state a source delivered, followed from its arrival to every istiod's ACK. Immutable. */
export interface UpstreamChange {
  /** Unique for the life of the tracker. */
  readonly id: number;
  readonly source: string;
  /** The upstream's version of the state (content hash, commit, `version_info`). */
  readonly revision: string;
  readonly objects: number;
  /** Kinds the state replaces; absent means every kind. */
  readonly kinds: ReadonlySet<string> | undefined;
  /** Clock reading at arrival, in milliseconds. */
  readonly arrivedAt: number;
  readonly traceparent?: string;
}

/** What one build made of one change: the kinds whose served content it altered (maybe none). */
export interface MergedChange {
  readonly change: UpstreamChange;
  readonly kinds: ReadonlySet<string>;
  /** Generation of the snapshot that carries the change. */
  readonly generation: number;
}

/** A change credited to a client's push of one kind. */
export interface CreditedChange {
  readonly change: UpstreamChange;
  /** The kind of the push that carries it. */
  readonly kind: string;
}

/** What a push carries: its changes, and how long after the build it went out (if it follows one). */
export interface PushOutcome {
  readonly changes: readonly CreditedChange[];
  readonly sinceBuildMs: number | undefined;
}

/** The outcome of a client's ACK: the changes it completes and how long after the response went out. */
export interface AckOutcome {
  readonly kind: string | undefined;
  readonly changes: readonly CreditedChange[];
  readonly now: number;
}

/** The part of a client identity the tracker keys on (structurally an ADS `ClientIdentity`). */
export interface TrackedClient {
  readonly streamId: number;
}

/** A change of one kind, stamped with the snapshot generation that first served it. */
interface KindEntry {
  readonly generation: number;
  readonly change: UpstreamChange;
}

interface InFlight {
  readonly version: string;
  readonly generation: number;
  readonly changes: readonly CreditedChange[];
}

interface TypeProgress {
  /** Changes of generations up to this one have been credited to the client for this type. */
  creditedGeneration: number;
  inFlight?: InFlight;
}

interface ClientProgress {
  /** Generation current when the client connected: older changes are not the client's to converge on. */
  readonly since: number;
  readonly types: Map<string, TypeProgress>;
}

export interface ChangeTrackerOptions {
  /** The registry key of the kind a type URL carries; undefined for MeshConfig and unknown type URLs. */
  readonly kindOf: (typeUrl: string) => string | undefined;
  /** Monotonic milliseconds. Default `performance.now`. */
  readonly now?: () => number;
  /** Changes remembered per kind for clients that have not ACKed them yet. Default 256. */
  readonly maxPerKind?: number;
  /** Changes older than this are forgotten. Default 15 minutes. */
  readonly maxAgeMs?: number;
}

/**
 * Follows upstream changes through the merge to each istiod's ACK, from hook calls alone.
 *
 * A change arrives with a source event and waits for the next build. The build stamps it with
 * the snapshot generation and the kinds whose served version actually changed (a change that
 * altered nothing is dropped there). A push to a client for a kind carries every change of that
 * kind newer than what the client already ACKed and not older than its connection; the ACK of
 * that very version completes them. A NACK leaves them pending for the next push. A change a
 * client's view filters out is credited at that client's next push of the kind.
 *
 * Memory is bounded: per kind at most `maxPerKind` changes, none older than `maxAgeMs`.
 */
export class ChangeTracker {
  private readonly now: () => number;
  private readonly maxPerKind: number;
  private readonly maxAgeMs: number;
  private nextId = 1;
  private pending: UpstreamChange[] = [];
  private generation = 0;
  private builtAt = 0;
  private readonly versions = new Map<string, string>();
  private readonly byKind = new Map<string, KindEntry[]>();
  private readonly clients = new Map<number, ClientProgress>();

  constructor(private readonly options: ChangeTrackerOptions) {
    this.now = options.now ?? (() => performance.now());
    this.maxPerKind = options.maxPerKind ?? 256;
    this.maxAgeMs = options.maxAgeMs ?? 15 * 60_000;
  }

  /** Generation of the last snapshot seen. */
  get currentGeneration(): number {
    return this.generation;
  }

  /** Clock reading when the last snapshot was seen. */
  get lastBuildAt(): number {
    return this.builtAt;
  }

  /** A source delivered a state: it waits for the next build. */
  arrive(source: string, event: SourceSnapshotEvent): UpstreamChange {
    const change: UpstreamChange = {
      id: this.nextId++,
      source,
      revision: event.revision,
      objects: event.resources.length,
      kinds: event.kinds,
      arrivedAt: this.now(),
      ...(event.traceparent === undefined ? {} : { traceparent: event.traceparent }),
    };
    this.pending.push(change);
    return change;
  }

  /**
   * A snapshot was published: every waiting change is settled. Returns each with the kinds it
   * altered, and the kinds whose served version changed in this build.
   */
  build(snapshot: ConfigSnapshot): { merged: MergedChange[]; changedKinds: ReadonlySet<string> } {
    const now = this.now();
    const changedKinds = new Set<string>();
    for (const [kind, k] of snapshot.kinds) {
      if (this.versions.get(kind) !== k.version) changedKinds.add(kind);
    }
    for (const kind of this.versions.keys()) if (!snapshot.kinds.has(kind)) changedKinds.add(kind);
    this.versions.clear();
    for (const [kind, k] of snapshot.kinds) this.versions.set(kind, k.version);
    this.generation = snapshot.generation;
    this.builtAt = now;

    const merged = this.pending.map((change) => {
      const kinds = new Set(
        [...changedKinds].filter((k) => change.kinds === undefined || change.kinds.has(k)),
      );
      for (const kind of kinds) this.remember(kind, { generation: snapshot.generation, change });
      return { change, kinds, generation: snapshot.generation };
    });
    this.pending = [];
    this.forgetOld(now);
    return { merged, changedKinds };
  }

  /** A build published nothing: the waiting changes altered nothing. Returns them. */
  unchanged(): UpstreamChange[] {
    const dropped = this.pending;
    this.pending = [];
    return dropped;
  }

  connect(client: TrackedClient): void {
    this.clients.set(client.streamId, { since: this.generation, types: new Map() });
  }

  /** The client is gone: returns the changes its unanswered pushes carried. */
  disconnect(client: TrackedClient): CreditedChange[] {
    const progress = this.clients.get(client.streamId);
    this.clients.delete(client.streamId);
    if (progress === undefined) return [];
    return [...progress.types.values()].flatMap((t) => t.inFlight?.changes ?? []);
  }

  /**
   * A response went out: returns the changes it carries to this client and, when it follows a
   * build made while the client was connected, the time since that build. A response still
   * awaiting its ACK for the same type is superseded (its changes ride on this one).
   */
  push(client: TrackedClient, typeUrl: string, version: string): PushOutcome {
    const progress = this.clients.get(client.streamId);
    if (progress === undefined) return { changes: [], sinceBuildMs: undefined };
    let type = progress.types.get(typeUrl);
    if (type === undefined) {
      type = { creditedGeneration: progress.since };
      progress.types.set(typeUrl, type);
    }
    const kind = this.options.kindOf(typeUrl);
    const changes: CreditedChange[] = [];
    const entries = kind === undefined ? undefined : this.byKind.get(kind);
    if (kind !== undefined && entries !== undefined) {
      // Entries are kept in the order of their builds: the client's are a run from the first
      // newer than what it was credited with, found by halving rather than by a walk of all
      // `maxPerKind` on every push to every client.
      for (let i = firstNewer(entries, type.creditedGeneration); i < entries.length; i++) {
        const e = entries[i] as KindEntry;
        if (e.generation > this.generation) break;
        changes.push({ change: e.change, kind });
      }
    }
    type.inFlight = { version, generation: this.generation, changes };
    const sinceBuildMs = this.generation > progress.since ? this.now() - this.builtAt : undefined;
    return { changes, sinceBuildMs };
  }

  /** The client ACKed `version`: the changes of the matching push are complete. */
  ack(client: TrackedClient, typeUrl: string, version: string): AckOutcome {
    const kind = this.options.kindOf(typeUrl);
    const type = this.clients.get(client.streamId)?.types.get(typeUrl);
    const inFlight = type?.inFlight;
    if (type === undefined || inFlight === undefined || inFlight.version !== version) {
      return { kind, changes: [], now: this.now() };
    }
    type.creditedGeneration = Math.max(type.creditedGeneration, inFlight.generation);
    delete type.inFlight;
    return { kind, changes: inFlight.changes, now: this.now() };
  }

  /** The client rejected the response: its changes stay pending for the next push. Returns them. */
  nack(client: TrackedClient, typeUrl: string): CreditedChange[] {
    const type = this.clients.get(client.streamId)?.types.get(typeUrl);
    const changes = type?.inFlight?.changes ?? [];
    if (type !== undefined) delete type.inFlight;
    return [...changes];
  }

  private remember(kind: string, entry: KindEntry): void {
    let list = this.byKind.get(kind);
    if (list === undefined) {
      list = [];
      this.byKind.set(kind, list);
    }
    list.push(entry);
    if (list.length > this.maxPerKind) list.splice(0, list.length - this.maxPerKind);
  }

  private forgetOld(now: number): void {
    for (const [kind, list] of this.byKind) {
      const keep = list.findIndex((e) => now - e.change.arrivedAt <= this.maxAgeMs);
      if (keep === -1) this.byKind.delete(kind);
      else if (keep > 0) list.splice(0, keep);
    }
  }
}

/** The index of the first of `entries` (in non-decreasing generations) built after `generation`. */
function firstNewer(entries: readonly KindEntry[], generation: number): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((entries[mid] as KindEntry).generation > generation) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
