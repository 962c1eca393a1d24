import type { MeshmuxError } from '../core/errors.js';
import { makeResource, type ConfigResource } from '../core/resource.js';
import type {
  SourceDescriptor,
  SourceEvent,
  SourceSnapshotEvent,
  SourceState,
} from '../core/source-event.js';
import type { Rejection, SourceReport } from './config-snapshot.js';
import { SourceAcl, type SourcePolicy } from './source-rules.js';

/** Annotation naming the source an object was served from. */
export const SOURCE_ANNOTATION = 'meshmux.io/source';
/** Annotation carrying the source's own version of the object (upstream version, or content hash). */
export const SOURCE_VERSION_ANNOTATION = 'meshmux.io/source-version';

/** The objects of one kind a source holds, keyed by `namespace/name`. Never mutated once published. */
export type KindState = ReadonlyMap<string, ConfigResource>;

/** A change of one kind in one source: what it held before and holds now. */
export interface KindChange {
  readonly kind: string;
  readonly before: KindState;
  readonly after: KindState;
  /**
   * Set when the ledger found the change by identity, without scanning both states: the keys
   * whose object differs. Then `before` holds only those keys' previous objects and `after` is the
   * ledger's live state, to be read before the ledger's next change.
   */
  readonly changed?: ReadonlySet<string>;
}

/** A kind's change found by identity: keys to drop and annotated objects to put, applied in place. */
interface KindDelta {
  readonly removed: ReadonlySet<string>;
  readonly upserts: ReadonlyMap<string, ConfigResource>;
}

/** Why an update is held back instead of applied. */
export type HoldReason = 'empty' | 'mass-delete';

/** An update held by the safety guards, waiting for confirmation or time. */
export interface HeldUpdate {
  readonly reason: HoldReason;
  readonly since: Date;
  /** Objects it would delete, and how many the source holds. */
  readonly deletions: number;
  readonly total: number;
}

const EMPTY: KindState = new Map();

/** An event after the access rules: admitted objects and what was sent, per covered kind. */
interface Admitted {
  readonly next: Map<string, KindState>;
  readonly raw: Map<string, readonly ConfigResource[]>;
  readonly full: boolean;
  /** Kinds admitted by the fast path, as deltas of the committed state (absent from `next`). */
  readonly deltas: Map<string, KindDelta>;
  /** Per kind: the instances sent, in order, for the next event's fast path. */
  readonly sent: Map<string, readonly ConfigResource[]>;
}

/** `namespace/name`: how a ledger keys the objects of one kind. */
function keyOf(r: ConfigResource): string {
  return `${r.namespace}/${r.name}`;
}

/**
 * The last good state of one source, after its access rules. A snapshot event replaces the
 * covered kinds, unless a guard holds it (a full state that empties the source, or one deleting
 * too much at once); a status event never removes objects, so a stale source keeps serving.
 * Admitted objects carry provenance annotations, built once per object version.
 */
export class SourceLedger {
  private state: SourceState = 'connecting';
  private everSynced = false;
  private revision = '';
  private lastSyncTime: Date | undefined;
  private lastError: MeshmuxError | undefined;
  private staleSince: Date | undefined;
  private errors: readonly MeshmuxError[] = [];
  private warnings: readonly MeshmuxError[] = [];
  private rejected: readonly Rejection[] = [];
  private readonly byKind = new Map<string, KindState>();
  private total = 0;
  private held: { update: HeldUpdate; events: SourceSnapshotEvent[] } | undefined;
  private acl: SourceAcl;
  /** What the source last sent per kind, before its rules: re-admitted when the rules change. */
  private readonly raw = new Map<string, readonly ConfigResource[]>();
  /** Annotated objects by the identity of what the source sent, so unchanged objects are not rebuilt. */
  private annotated = new Map<
    string,
    { readonly version: string; readonly sourceVersion: string; readonly out: ConfigResource }
  >();
  private readonly byInput = new WeakMap<ConfigResource, ConfigResource>();
  /**
   * Per kind, the instances the committed state was admitted from. Sources re-send unchanged
   * objects as the same instances, so the next state of the world is compared by identity and
   * only what differs is touched (see `admitByIdentity`): a one-object change to a 50k-object
   * source costs set lookups, not a rebuilt map. Cleared whenever the rules change.
   */
  private readonly sentByKind = new Map<string, readonly ConfigResource[]>();
  /** Kinds with rejections in the committed state; the fast path leaves those to the full path. */
  private rejectedKinds: ReadonlySet<string> = new Set();

  constructor(
    public descriptor: SourceDescriptor,
    private rules: SourcePolicy,
    /** Position in the configuration; breaks priority ties (earlier wins). */
    public order: number,
  ) {
    this.acl = new SourceAcl(rules);
  }

  get policy(): SourcePolicy {
    return this.rules;
  }

  /**
   * Replaces the source's rules (configuration reload) and re-admits what it last sent under them;
   * returns the kinds that changed. Guards do not apply: the operator asked for the change.
   */
  setPolicy(policy: SourcePolicy): KindChange[] {
    this.rules = policy;
    this.acl = new SourceAcl(policy);
    // Identity says nothing about admission under new rules: re-admit everything the full way.
    this.sentByKind.clear();
    const resources = [...this.raw.values()].flat();
    return this.commit(
      this.admit({
        type: 'snapshot',
        resources,
        revision: this.revision,
        errors: this.errors,
        warnings: this.warnings,
      }),
    );
  }

  /** Removes every object (the source left the configuration); returns the kinds that changed. */
  clear(): KindChange[] {
    const changes = [...this.byKind].map(([kind, before]) => ({ kind, before, after: EMPTY }));
    this.byKind.clear();
    this.raw.clear();
    this.sentByKind.clear();
    this.total = 0;
    return changes;
  }

  /** Every kind the source holds, with its objects. */
  entries(): IterableIterator<[string, KindState]> {
    return this.byKind.entries();
  }

  /** Applies one event at `now`; returns the kinds it changed. */
  apply(event: SourceEvent, now: Date): KindChange[] {
    if (event.type === 'status') {
      this.state = event.state;
      if (event.error !== undefined) this.lastError = event.error;
      if (event.state === 'stale' || event.state === 'failing') this.staleSince ??= now;
      else this.staleSince = undefined;
      return [];
    }
    this.staleSince = undefined;
    this.revision = event.revision;
    this.errors = event.errors;
    this.warnings = event.warnings;
    this.lastSyncTime = now;
    this.everSynced = true;
    this.state = 'synced';
    const next = this.admit(event);
    const pending = this.held === undefined ? [] : this.held.events;
    const guard = this.guard(next);
    if (guard !== undefined) {
      const since = this.held?.update.since ?? now;
      this.held = { update: { ...guard, since }, events: [...pending, event] };
      return [];
    }
    this.held = undefined;
    return this.commit(next);
  }

  /** Applies a held update (operator confirmation or `confirmAfter`); returns the kinds it changed. */
  release(): KindChange[] {
    const held = this.held;
    if (held === undefined) return [];
    this.held = undefined;
    const changes = new Map<string, KindChange>();
    for (const event of held.events) {
      // The full path only: changes are folded per kind below, which needs whole states.
      for (const c of this.commit(this.admit(event, false))) {
        const first = changes.get(c.kind);
        changes.set(c.kind, { kind: c.kind, before: first?.before ?? c.before, after: c.after });
      }
    }
    return [...changes.values()];
  }

  /** Drops every object once the source has been stale past `maxStale`; returns the kinds it changed. */
  expire(now: Date): KindChange[] {
    const max = this.rules.maxStaleMs;
    if (
      max === undefined ||
      this.staleSince === undefined ||
      now.getTime() - this.staleSince.getTime() < max
    ) {
      return [];
    }
    const changes = [...this.byKind].map(([kind, before]) => ({ kind, before, after: EMPTY }));
    this.byKind.clear();
    this.sentByKind.clear();
    this.total = 0;
    this.annotated.clear();
    return changes;
  }

  /** When the source turned stale or failing; undefined while synced or connecting. */
  get staleSinceTime(): Date | undefined {
    return this.staleSince;
  }

  get heldUpdate(): HeldUpdate | undefined {
    return this.held?.update;
  }

  /** This source's admitted objects of one kind. Must not be altered. */
  kind(kind: string): KindState {
    return this.byKind.get(kind) ?? EMPTY;
  }

  get synced(): boolean {
    return this.everSynced;
  }

  /** The revision of the last state the source delivered (empty before the first). */
  get lastRevision(): string {
    return this.revision;
  }

  /** Whether this source may ever hold objects of the kind (its declared kinds and its rules). */
  mayContribute(kind: string): boolean {
    if (this.descriptor.kinds !== undefined && !this.descriptor.kinds.has(kind)) return false;
    return this.acl.mayContribute(kind);
  }

  report(): SourceReport {
    const counts: Record<string, number> = {};
    for (const [kind, list] of this.byKind) counts[kind] = list.size;
    return {
      name: this.descriptor.name,
      type: this.descriptor.type,
      priority: this.rules.priority,
      state: this.state,
      everSynced: this.everSynced,
      revision: this.revision,
      ...(this.lastSyncTime === undefined ? {} : { lastSyncTime: this.lastSyncTime }),
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
      ...(this.staleSince === undefined ? {} : { staleSince: this.staleSince }),
      ...(this.held === undefined ? {} : { held: this.held.update }),
      counts,
      errors: this.errors,
      warnings: this.warnings,
      rejections: this.rejected,
    };
  }

  /** The per-kind state an event yields after the access rules, with duplicates resolved. */
  private admit(event: SourceSnapshotEvent, byIdentity = true): Admitted {
    const next = new Map<string, KindState>();
    const deltas = new Map<string, KindDelta>();
    const sent = new Map<string, readonly ConfigResource[]>();
    const raw = new Map<string, readonly ConfigResource[]>();
    const single = event.kinds?.size === 1 ? event.kinds.values().next().value : undefined;
    if (single !== undefined && byIdentity) {
      // The common case, one kind per upstream response: the source's own list is kept as is and
      // compared by identity, without even reading the objects it shares with the last one.
      const delta = this.admitByIdentity(single, event.resources);
      if (delta !== undefined) {
        raw.set(single, event.resources);
        sent.set(single, event.resources);
        deltas.set(single, delta);
        return { next, raw, full: false, deltas, sent };
      }
    }
    for (const kind of event.kinds ?? []) raw.set(kind, []);
    if (event.kinds === undefined) for (const kind of this.byKind.keys()) raw.set(kind, []);
    for (const r of event.resources) {
      if (event.kinds !== undefined && !event.kinds.has(r.kind)) continue;
      const rawList = raw.get(r.kind) as ConfigResource[] | undefined;
      if (rawList === undefined) raw.set(r.kind, [r]);
      else rawList.push(r);
    }
    const rejected: Rejection[] = [];
    for (const [kind, list] of raw) {
      sent.set(kind, list);
      const delta = byIdentity ? this.admitByIdentity(kind, list) : undefined;
      if (delta !== undefined) {
        deltas.set(kind, delta);
        continue;
      }
      const state = new Map<string, ConfigResource>();
      for (const r of list) {
        const reason = this.acl.unrestricted ? undefined : this.acl.check(r);
        if (reason !== undefined) {
          rejected.push({
            source: this.descriptor.name,
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
            reason,
          });
          continue;
        }
        const key = keyOf(r);
        if (state.has(key)) {
          // The later definition wins, as the source's own order says; the clash is reported.
          rejected.push({
            source: this.descriptor.name,
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
            reason: 'duplicate-in-source',
          });
        }
        state.set(key, this.withProvenance(r));
      }
      next.set(kind, state);
    }
    if (event.kinds === undefined) this.rejected = rejected;
    else {
      const keep = this.rejected.filter((x) => !event.kinds?.has(x.kind));
      this.rejected = [...keep, ...rejected];
    }
    return { next, raw, full: event.kinds === undefined, deltas, sent };
  }

  /**
   * The fast path of admission: when the rules admit everything and the committed state of the
   * kind has no rejections, the new list is compared by identity with the list the committed
   * state came from. Sources re-send unchanged objects as the same instances in the same order,
   * so a walk in step finds the few that differ with pointer comparisons alone. Returns undefined
   * when the full path must decide (first state, rules, duplicates).
   */
  private admitByIdentity(kind: string, list: readonly ConfigResource[]): KindDelta | undefined {
    const previous = this.sentByKind.get(kind);
    if (previous === undefined || !this.acl.unrestricted || this.rejectedKinds.has(kind)) return undefined;
    const diff = diffByIdentity(previous, list);
    const before = this.kind(kind);
    const removed = new Set<string>();
    for (const r of diff.vanished) removed.add(keyOf(r));
    const upserts = new Map<string, ConfigResource>();
    for (const r of diff.added) {
      // Another kind in the list: the full path sorts the list out.
      if (r.kind !== kind) return undefined;
      const key = keyOf(r);
      // Two objects under one key: the full path reports the duplicate.
      if (upserts.has(key) || (before.has(key) && !removed.has(key))) return undefined;
      upserts.set(key, this.withProvenance(r));
    }
    return { removed, upserts };
  }

  private guard(admitted: Admitted): Omit<HeldUpdate, 'since'> | undefined {
    if (this.total === 0) return undefined;
    let deletions = 0;
    let after = this.total;
    for (const [kind, list] of admitted.next) {
      const before = this.kind(kind);
      for (const key of before.keys()) if (!list.has(key)) deletions++;
      after += list.size - before.size;
    }
    for (const [kind, { removed, upserts }] of admitted.deltas) {
      const before = this.kind(kind);
      for (const key of removed) {
        if (!upserts.has(key)) {
          deletions++;
          after--;
        }
      }
      for (const key of upserts.keys()) if (!before.has(key)) after++;
    }
    if (after === 0 && this.rules.keepOnEmpty) return { reason: 'empty', deletions, total: this.total };
    if (deletions > this.rules.minDeletes && deletions > this.rules.maxDeleteRatio * this.total) {
      return { reason: 'mass-delete', deletions, total: this.total };
    }
    return undefined;
  }

  private commit({ next, raw, full, deltas, sent }: Admitted): KindChange[] {
    if (full) this.raw.clear();
    for (const [kind, list] of raw) {
      if (list.length === 0) this.raw.delete(kind);
      else this.raw.set(kind, list);
    }
    if (full) this.sentByKind.clear();
    for (const [kind, list] of sent) {
      if (list.length === 0) this.sentByKind.delete(kind);
      else this.sentByKind.set(kind, list);
    }
    this.rejectedKinds = new Set(this.rejected.map((r) => r.kind));
    const changes: KindChange[] = [];
    for (const [kind, after] of next) {
      const before = this.kind(kind);
      if (sameState(before, after)) continue;
      changes.push({ kind, before, after });
      for (const key of before.keys()) if (!after.has(key)) this.annotated.delete(`${kind}|${key}`);
      this.total += after.size - before.size;
      if (after.size === 0) this.byKind.delete(kind);
      else this.byKind.set(kind, after);
    }
    for (const [kind, { removed, upserts }] of deltas) {
      if (removed.size === 0 && upserts.size === 0) continue;
      // Applied in place: the live state is only ever read through changes applied at once.
      let state = this.byKind.get(kind) as Map<string, ConfigResource> | undefined;
      if (state === undefined) this.byKind.set(kind, (state = new Map()));
      const before = new Map<string, ConfigResource>();
      const changed = new Set<string>();
      for (const key of [...removed, ...upserts.keys()]) {
        const old = state.get(key);
        if (old !== undefined && !before.has(key)) before.set(key, old);
        changed.add(key);
      }
      const sizeBefore = state.size;
      for (const key of removed) {
        state.delete(key);
        if (!upserts.has(key)) this.annotated.delete(`${kind}|${key}`);
      }
      for (const [key, r] of upserts) state.set(key, r);
      this.total += state.size - sizeBefore;
      if (state.size === 0) this.byKind.delete(kind);
      changes.push({ kind, before, after: state, changed });
    }
    return changes;
  }

  private withProvenance(r: ConfigResource): ConfigResource {
    // Sources that re-send unchanged objects usually re-send the same instances: a WeakMap hit is the cheap path.
    const same = this.byInput.get(r);
    if (same !== undefined) return same;
    const out = this.annotate(r);
    this.byInput.set(r, out);
    return out;
  }

  private annotate(r: ConfigResource): ConfigResource {
    // An object that already names its source came through another meshmux: its provenance is the
    // original source's, and passing it through keeps versions identical along a chain.
    if (r.annotations[SOURCE_ANNOTATION] !== undefined) return r;
    const sourceVersion = r.origin.upstreamVersion ?? r.version;
    const id = `${r.kind}|${r.namespace}/${r.name}`;
    const cached = this.annotated.get(id);
    if (
      cached !== undefined &&
      cached.version === r.version &&
      cached.sourceVersion === sourceVersion &&
      cached.out.createTime.seconds === r.createTime.seconds &&
      cached.out.createTime.nanos === r.createTime.nanos
    ) {
      return cached.out;
    }
    const out = makeResource({
      ...r,
      annotations: {
        ...r.annotations,
        [SOURCE_ANNOTATION]: this.descriptor.name,
        [SOURCE_VERSION_ANNOTATION]: sourceVersion,
      },
    });
    this.annotated.set(id, { version: r.version, sourceVersion, out });
    return out;
  }
}

function sameState(a: KindState, b: KindState): boolean {
  if (a.size !== b.size) return false;
  for (const [key, r] of a) if (b.get(key) !== r) return false;
  return true;
}

/** How far a walk in step looks ahead to re-align two lists after a difference. */
const REALIGN_WINDOW = 16;

/**
 * The instances only in `before` and only in `after`. Walks both lists in step, re-aligning
 * within a small window after each difference (O(n) pointer comparisons when the order is kept);
 * when the lists do not re-align, falls back to sets.
 */
function diffByIdentity(
  before: readonly ConfigResource[],
  after: readonly ConfigResource[],
): { added: ConfigResource[]; vanished: ConfigResource[] } {
  const added: ConfigResource[] = [];
  const vanished: ConfigResource[] = [];
  let i = 0;
  let j = 0;
  while (i < after.length && j < before.length) {
    if (after[i] === before[j]) {
      i++;
      j++;
      continue;
    }
    let aligned = false;
    for (let d = 1; d <= REALIGN_WINDOW && !aligned; d++) {
      for (let a = 0; a <= d; a++) {
        const b = d - a;
        if (i + a < after.length && j + b < before.length && after[i + a] === before[j + b]) {
          for (let k = 0; k < a; k++) added.push(after[i + k] as ConfigResource);
          for (let k = 0; k < b; k++) vanished.push(before[j + k] as ConfigResource);
          i += a;
          j += b;
          aligned = true;
          break;
        }
      }
    }
    if (!aligned) {
      const was = new Set(before.slice(j));
      const now = new Set(after.slice(i));
      for (const r of after.slice(i)) if (!was.has(r)) added.push(r);
      for (const r of before.slice(j)) if (!now.has(r)) vanished.push(r);
      return { added, vanished };
    }
  }
  for (; i < after.length; i++) added.push(after[i] as ConfigResource);
  for (; j < before.length; j++) vanished.push(before[j] as ConfigResource);
  return { added, vanished };
}
