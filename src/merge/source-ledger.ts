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
  private readonly acl: SourceAcl;
  /** Annotated objects by the identity of what the source sent, so unchanged objects are not rebuilt. */
  private annotated = new Map<string, { readonly base: string; readonly out: ConfigResource }>();
  private readonly byInput = new WeakMap<ConfigResource, ConfigResource>();

  constructor(
    readonly descriptor: SourceDescriptor,
    readonly policy: SourcePolicy,
    /** Position in the configuration; breaks priority ties (earlier wins). */
    readonly order: number,
  ) {
    this.acl = new SourceAcl(policy);
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
      for (const c of this.commit(this.admit(event))) {
        const first = changes.get(c.kind);
        changes.set(c.kind, { kind: c.kind, before: first?.before ?? c.before, after: c.after });
      }
    }
    return [...changes.values()];
  }

  /** Drops every object once the source has been stale past `maxStale`; returns the kinds it changed. */
  expire(now: Date): KindChange[] {
    const max = this.policy.maxStaleMs;
    if (
      max === undefined ||
      this.staleSince === undefined ||
      now.getTime() - this.staleSince.getTime() < max
    ) {
      return [];
    }
    const changes = [...this.byKind].map(([kind, before]) => ({ kind, before, after: EMPTY }));
    this.byKind.clear();
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
      priority: this.policy.priority,
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
  private admit(event: SourceSnapshotEvent): Map<string, Map<string, ConfigResource>> {
    const next = new Map<string, Map<string, ConfigResource>>();
    for (const kind of event.kinds ?? []) next.set(kind, new Map());
    if (event.kinds === undefined) for (const kind of this.byKind.keys()) next.set(kind, new Map());
    const rejected: Rejection[] = [];
    for (const r of event.resources) {
      if (event.kinds !== undefined && !event.kinds.has(r.kind)) continue;
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
      let list = next.get(r.kind);
      if (list === undefined) next.set(r.kind, (list = new Map<string, ConfigResource>()));
      const key = `${r.namespace}/${r.name}`;
      if (list.has(key)) {
        // The later definition wins, as the source's own order says; the clash is reported.
        rejected.push({
          source: this.descriptor.name,
          kind: r.kind,
          namespace: r.namespace,
          name: r.name,
          reason: 'duplicate-in-source',
        });
      }
      list.set(key, this.withProvenance(r));
    }
    if (event.kinds === undefined) this.rejected = rejected;
    else {
      const keep = this.rejected.filter((x) => !event.kinds?.has(x.kind));
      this.rejected = [...keep, ...rejected];
    }
    return next;
  }

  private guard(next: Map<string, Map<string, ConfigResource>>): Omit<HeldUpdate, 'since'> | undefined {
    if (this.total === 0) return undefined;
    let deletions = 0;
    let after = this.total;
    for (const [kind, list] of next) {
      const before = this.kind(kind);
      for (const key of before.keys()) if (!list.has(key)) deletions++;
      after += list.size - before.size;
    }
    if (after === 0 && this.policy.keepOnEmpty) return { reason: 'empty', deletions, total: this.total };
    if (deletions > this.policy.minDeletes && deletions > this.policy.maxDeleteRatio * this.total) {
      return { reason: 'mass-delete', deletions, total: this.total };
    }
    return undefined;
  }

  private commit(next: Map<string, Map<string, ConfigResource>>): KindChange[] {
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
    const sourceVersion = r.origin.upstreamVersion ?? r.version;
    const id = `${r.kind}|${r.namespace}/${r.name}`;
    const base = `${r.version}|${sourceVersion}|${r.createTime.seconds}.${r.createTime.nanos}`;
    const cached = this.annotated.get(id);
    if (cached?.base === base) return cached.out;
    const out = makeResource({
      ...r,
      annotations: {
        ...r.annotations,
        [SOURCE_ANNOTATION]: this.descriptor.name,
        [SOURCE_VERSION_ANNOTATION]: sourceVersion,
      },
    });
    this.annotated.set(id, { base, out });
    return out;
  }
}

function sameState(a: KindState, b: KindState): boolean {
  if (a.size !== b.size) return false;
  for (const [key, r] of a) if (b.get(key) !== r) return false;
  return true;
}
