import { isDeepStrictEqual } from 'node:util';
import { ChunkedList, type ReadList } from '../core/chunked-list.js';
import type { MeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';
import type {
  SourceDescriptor,
  SourceEvent,
  SourceSnapshotEvent,
  SourceState,
} from '../core/source-event.js';
import type { HoldReason, Rejection, SourceReport } from './config-snapshot.js';
import { diffByIdentity } from './identity-diff.js';
import { KindStateView } from './kind-state-view.js';
import { Provenance } from './provenance.js';
import { linesDigest } from '../core/content-digest.js';
import type { RecordedRules, SourceRecord } from './source-record.js';
import { SourceReadiness } from './source-readiness.js';
import { SourceAcl, type SourcePolicy } from './source-rules.js';
import { foldDigest, foldEvent, foldIn, partFold, type UpdateFold } from './update-fold.js';
import {
  appliesAtOnce,
  DeletionWindow,
  guardVerdict,
  type HeldUpdate,
  type KindLoss,
  kindsHeldAlone,
  type UpdateEffect,
} from './update-guards.js';

export { SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION } from './provenance.js';
export type { HeldUpdate } from './update-guards.js';
export type { HoldReason };
/**
 * The objects of one kind a source holds, keyed by `namespace/name`. Read-only to whoever holds
 * it; what a ledger hands out is either never altered again or a `KindStateView` that throws once
 * the ledger altered the state behind it.
 */
export type KindState = ReadonlyMap<string, ConfigResource>;

/** A change of one kind in one source: what it held before and holds now. */
export interface KindChange {
  readonly kind: string;
  readonly before: KindState;
  /** A view of the ledger's state of the kind: to be read before the ledger's next change. */
  readonly after: KindState;
  /**
   * Set when the ledger found the change by identity, without scanning both states: the keys
   * whose object differs. Then `before` holds only those keys' previous objects.
   */
  readonly changed?: ReadonlySet<string>;
}

/** A kind's change found by identity: keys to drop and annotated objects to put, applied in place. */
interface KindDelta {
  readonly removed: ReadonlySet<string>;
  readonly upserts: ReadonlyMap<string, ConfigResource>;
}

/** One kind's committed objects, and the token of the views handed out for them. */
interface KindSlot {
  readonly state: Map<string, ConfigResource>;
  token: { valid: boolean };
}

const EMPTY: KindState = new Map();

/** An event after the access rules: admitted objects and what was sent, per covered kind. */
interface Admitted {
  readonly next: Map<string, Map<string, ConfigResource>>;
  readonly raw: Map<string, ReadList<ConfigResource>>;
  readonly full: boolean;
  /** Kinds admitted by the fast path, as deltas of the committed state (absent from `next`). */
  readonly deltas: Map<string, KindDelta>;
  /** Per kind: the instances sent, in order, for the next event's fast path. */
  readonly sent: Map<string, ReadList<ConfigResource>>;
  /** Whether the event lists `kind` afresh from its upstream (see `SourceSnapshotEvent.listed`). */
  readonly lists: (kind: string) => boolean;
}

/** Source types every state of which is their upstream's whole answer for its kinds (state of the world). */
const LISTING_TYPES: ReadonlySet<string> = new Set(['xds', 'mcp', 'mcp-sink']);

const NO_KINDS: ReadonlySet<string> = new Set();

/** `namespace/name`: how a ledger keys the objects of one kind (the object's own key string). */
function keyOf(r: ConfigResource): string {
  return r.key;
}

/**
 * The last good state of one source, after its access rules. A snapshot event replaces the
 * covered kinds, unless a guard holds it (a full state that empties the source, or one deleting
 * too much at once; see `update-guards.ts`); a status event never removes objects, so a stale
 * source keeps serving. Admitted objects carry provenance annotations (see `provenance.ts`).
 * Which kinds the source can answer for is its `SourceReadiness`.
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
  private readonly byKind = new Map<string, KindSlot>();
  private total = 0;
  /**
   * `restoredKinds`: a hold read from a record of an earlier release, which names a kind held
   * alone `mass-delete` without its kinds: the kinds its update empties, for `hold` to tell a
   * hold that goes on from a new one.
   */
  private held: { update: HeldUpdate; fold: UpdateFold; restoredKinds?: readonly string[] } | undefined;
  /** A deleting update waiting for the rest of the source's update until `due` (ms). */
  private pending: { fold: UpdateFold; due: number } | undefined;
  private readonly readiness = new SourceReadiness();
  /** Whether this ledger started from a persisted record. */
  private restored = false;
  /** Whether the source left the configuration (see `retire`). */
  private retiredFlag = false;
  /** What deletions are judged from (see `DeletionWindow`). */
  private readonly deletions = new DeletionWindow();
  /** Access rules a guard holds back (see `setPolicy`), with the policy they belong to. */
  private heldRules: { policy: SourcePolicy; update: HeldUpdate } | undefined;
  /**
   * Moves whenever what `record()` returns changes in substance: the objects held, the kinds
   * known, the held update. A source re-sending the same state leaves it alone.
   */
  private recordChanges = 0;
  private acl: SourceAcl;
  /** What the source last sent per kind, before its rules: re-admitted when the rules change. */
  private readonly raw = new Map<string, ReadList<ConfigResource>>();
  private readonly provenance: Provenance;
  /**
   * Per kind, the instances the committed state was admitted from. Sources re-send unchanged
   * objects as the same instances, so the next state of the world is compared by identity and
   * only what differs is touched (see `admitByIdentity`): a one-object change to a 50k-object
   * source costs set lookups, not a rebuilt map. Cleared whenever the rules change.
   */
  private readonly sentByKind = new Map<string, ReadList<ConfigResource>>();
  /** Kinds with rejections in the committed state; the fast path leaves those to the full path. */
  private rejectedKinds: ReadonlySet<string> = new Set();

  constructor(
    public descriptor: SourceDescriptor,
    private rules: SourcePolicy,
    /** Position in the configuration; breaks priority ties (earlier wins). */
    public order: number,
  ) {
    this.acl = new SourceAcl(rules);
    // Sources are matched by name across reloads: the name a ledger annotates with never changes.
    this.provenance = new Provenance(descriptor.name);
  }

  get policy(): SourcePolicy {
    return this.rules;
  }

  /**
   * Replaces the source's rules (configuration reload, or a restart under edited rules) and
   * re-admits what it last sent under them; returns the kinds that changed. Access rules under
   * which the source would lose more than its guards let one update delete are held instead
   * (reason `rules`): the rest of the policy applies, and what the rules in force admit stays
   * served until the change is released (`release`), or a later policy names the rules in force
   * again.
   */
  setPolicy(policy: SourcePolicy, now: Date): KindChange[] {
    // The record carries the rules: a restart that no longer configures the source serves by them.
    if (!isDeepStrictEqual(policy, this.rules)) this.recordChanges++;
    if (sameAccess(policy, this.rules)) {
      this.heldRules = undefined;
      this.rules = policy;
      return [];
    }
    const inForce = { acl: this.acl, rejected: this.rejected };
    const next = this.admitUnder(new SourceAcl(policy));
    // Rules that withdraw a kind whole (a `deny` of it) are an operator's edit, not a lost kind.
    const verdict = guardVerdict(
      { ...this.effect(next), emptiedKinds: [], listedLosses: [] },
      this.total,
      this.rules,
    );
    if (verdict !== undefined) {
      this.acl = inForce.acl;
      this.rejected = inForce.rejected;
      // Everything but what the source may hold applies now.
      this.rules = withAccessOf(policy, this.rules);
      this.heldRules = {
        policy,
        update: {
          ...verdict,
          reason: 'rules',
          since: this.heldRules?.update.since ?? now,
          digest: linesDigest(['rules', JSON.stringify([policy.allow ?? null, policy.deny ?? null])]),
        },
      };
      return [];
    }
    return this.putInForce(policy, next);
  }

  /** Makes `policy` the rules in force with what the source sent admitted under them (`admitted`). */
  private putInForce(policy: SourcePolicy, admitted: Admitted): KindChange[] {
    this.heldRules = undefined;
    this.rules = policy;
    const before = this.total;
    const changes = this.commit(admitted);
    // What the new rules withdraw is not the source's to lose; rules that admit what the old ones
    // did leave the window as it was, and a held wear-down judged against what it held before.
    if (this.total < before) this.deletions.lower(before - this.total);
    return changes;
  }

  /** What the source last sent, admitted under `acl` (which stays in force). */
  private admitUnder(acl: SourceAcl): Admitted {
    this.acl = acl;
    // Identity says nothing about admission under new rules: re-admit everything the full way.
    this.sentByKind.clear();
    return this.admit({
      type: 'snapshot',
      resources: this.sentObjects((r) => r),
      revision: this.revision,
      errors: this.errors,
      warnings: this.warnings,
    });
  }

  /**
   * The source left the configuration: its upstream is no longer heard, and letting its objects go
   * is an update like any other, judged by its guards against what it holds. Either every object
   * is dropped at once (the kinds that changed are returned), or the removal is held (reason
   * `removed`, replacing any update held or settling) and the objects stay served until it is
   * confirmed (`release`) or the source is configured again (`reinstate`).
   */
  retire(now: Date): KindChange[] {
    this.retiredFlag = true;
    this.pending = undefined;
    const fold = foldIn(undefined, {
      type: 'snapshot',
      resources: [],
      revision: this.revision,
      errors: [],
      warnings: [],
    });
    const effect = { deletions: this.total, after: 0, emptiesKind: this.total > 0, emptiedKinds: [] };
    const verdict = guardVerdict(effect, this.total, this.rules);
    if (verdict === undefined) {
      this.held = undefined;
      return this.dropAll();
    }
    this.held = {
      update: { ...verdict, reason: 'removed', since: now, digest: foldDigest(fold) },
      fold,
    };
    return [];
  }

  /**
   * Kinds the source holds objects of that its descriptor no longer lets it deliver (an edit
   * narrowed its `kinds`): its upstream will never answer them again. Empty for a source of any kind.
   */
  kindsLeftOut(): Set<string> {
    const out = new Set<string>();
    const kinds = this.descriptor.kinds;
    if (kinds === undefined) return out;
    for (const [kind, slot] of this.byKind) if (slot.state.size > 0 && !kinds.has(kind)) out.add(kind);
    return out;
  }

  /**
   * Lets the objects of `kinds` go, as an update of the source that empties those kinds: judged by
   * its guards like any other (it may settle, or be held), so an edit that narrows a source's kinds
   * withdraws no more than its upstream could in one update. Returns the kinds that changed.
   */
  dropKinds(kinds: ReadonlySet<string>, now: Date): KindChange[] {
    return this.apply(
      {
        type: 'snapshot',
        kinds,
        resources: [],
        revision: this.revision,
        errors: this.errors,
        warnings: this.warnings,
      },
      now,
    );
  }

  /** Whether the source left the configuration and holds objects until its removal is confirmed. */
  get retired(): boolean {
    return this.retiredFlag;
  }

  /**
   * The source is configured again while its removal is held: the removal is forgotten, and the
   * objects stay served until its upstream's next state is judged as usual.
   */
  reinstate(): void {
    if (!this.retiredFlag) return;
    this.retiredFlag = false;
    if (this.held?.update.reason === 'removed') this.held = undefined;
  }

  /** Whether the source contributes any object. */
  get holdsObjects(): boolean {
    return this.total > 0;
  }

  /** Every kind the source holds, with a view of its objects (read before the ledger's next change). */
  *entries(): IterableIterator<[string, KindState]> {
    for (const [kind, slot] of this.byKind) yield [kind, new KindStateView(slot.state, slot.token)];
  }

  /**
   * Applies one event at `now`; returns the kinds it changed. An update that would delete much (or
   * empty a kind) is not applied at once: it waits `settleMs` for the rest of the source's update
   * (see `settleDue`, then `settle`), and the guards judge the whole of it against the committed
   * state, so a source emptied one kind at a time is held as one update.
   */
  apply(event: SourceEvent, now: Date): KindChange[] {
    if (event.type === 'status') {
      if (event.error !== undefined) this.lastError = event.error;
      // A restored source keeps saying so until its upstream has answered in full.
      const keepRestored =
        this.restored && !this.everSynced && event.state !== 'stale' && event.state !== 'synced';
      if (!keepRestored) this.state = event.state;
      if (event.state === 'stale' || event.state === 'failing') this.staleSince ??= now;
      else if (!keepRestored) this.staleSince = undefined;
      return [];
    }
    this.revision = event.revision;
    this.errors = event.errors;
    this.warnings = event.warnings;
    if (this.readiness.answer(event.kinds)) this.recordChanges++;
    if (event.unserved !== undefined && this.readiness.answer(event.unserved)) this.recordChanges++;
    if (this.readiness.complete(this.descriptor.kinds)) {
      this.staleSince = undefined;
      this.lastSyncTime = now;
      this.everSynced = true;
      this.state = 'synced';
    }
    if (this.held !== undefined) {
      // Beside kinds held alone, an update that applies at once does so as any other would,
      // compared by identity, not re-admitted with the whole source (a hold may last hours).
      const beside = this.besideHeld(event);
      if (beside !== undefined) {
        const next = this.admit(beside);
        const { effect, total } = this.judged(this.effect(next), now);
        if (appliesAtOnce(effect, total, this.rules)) return this.commit(next);
      }
      return this.judge(foldIn(this.held.fold, event), now);
    }
    if (this.pending !== undefined) {
      this.pending = { fold: foldIn(this.pending.fold, event), due: this.pending.due };
      return [];
    }
    const next = this.admit(event);
    const { effect, total } = this.judged(this.effect(next), now);
    if (appliesAtOnce(effect, total, this.rules)) return this.commit(next);
    if (this.rules.settleMs > 0) {
      this.pending = { fold: foldIn(undefined, event), due: now.getTime() + this.rules.settleMs };
      return [];
    }
    return this.judge(foldIn(undefined, event), now, next);
  }

  /**
   * `event` without the kinds held alone that it answers empty again, when it changes none of
   * them; undefined when it changes one, is a whole state, or no kinds are held alone.
   */
  private besideHeld(event: SourceSnapshotEvent): SourceSnapshotEvent | undefined {
    const held = this.held;
    const kinds = event.kinds;
    if (held === undefined || held.update.reason !== 'emptied-kind' || kinds === undefined) return undefined;
    const answered = [...held.fold.kinds.keys()].filter((kind) => kinds.has(kind));
    if (answered.length === 0) return event;
    // A kind the configuration no longer names goes as its guards let it (see `dropKinds`).
    const configured = this.descriptor.kinds;
    if (configured !== undefined && answered.some((kind) => !configured.has(kind))) return undefined;
    if (answered.some((kind) => (held.fold.kinds.get(kind)?.length ?? 0) > 0)) return undefined;
    for (let i = 0; i < event.resources.length; i++)
      if (answered.includes((event.resources.at(i) as ConfigResource).kind)) return undefined;
    const others = new Set([...kinds].filter((kind) => !answered.includes(kind)));
    const { listed: _listed, ...rest } = event;
    const listed = [...(event.listed ?? [])].filter((kind) => others.has(kind));
    return { ...rest, kinds: others, ...(listed.length === 0 ? {} : { listed: new Set(listed) }) };
  }

  /** A number that moves whenever the source's record changes in substance (see `recordChanges`). */
  get recordVersion(): number {
    return this.recordChanges;
  }

  /** When a waiting update is due to be judged (ms); undefined when none waits. */
  get settleDue(): number | undefined {
    return this.pending?.due;
  }

  /**
   * Judges the waiting update: applies it, or holds it. Returns the kinds it changed. The caller's
   * timer says when (a timer may fire a millisecond before the wall clock agrees it is due).
   */
  settle(now: Date): KindChange[] {
    const pending = this.pending;
    if (pending === undefined) return [];
    this.pending = undefined;
    return this.judge(pending.fold, now);
  }

  /**
   * Applies the folded update unless a guard holds it (then it replaces any held one). Kinds a
   * listing takes whole are held alone where the rest of the update passes the guards on its own
   * (see {@link holdKinds}).
   */
  private judge(fold: UpdateFold, now: Date, admitted?: Admitted): KindChange[] {
    const next = admitted ?? this.admit(foldEvent(fold), false);
    const whole = this.effect(next);
    const alone = whole.after > 0 ? kindsHeldAlone(whole, this.rules) : [];
    if (alone.length > 0) {
      const changes = this.holdKinds(fold, alone, whole.listedLosses ?? [], now);
      if (changes !== undefined) return changes;
    }
    const { effect, total } = this.judged(whole, now);
    const verdict = guardVerdict(effect, total, this.rules);
    if (verdict !== undefined) {
      this.hold(verdict, fold, now);
      return [];
    }
    if (this.held !== undefined) this.recordChanges++;
    this.held = undefined;
    return this.commit(next);
  }

  /**
   * Holds the kinds `kinds` (those a listing takes whole, and any it empties beside them: an
   * upstream losing kinds loses them together) and applies the rest of `fold`, judged by the
   * guards on its own: the source's other kinds keep following their upstream while those wait
   * for confirmation, and each later update is judged folded into the held kinds. Undefined when
   * the fold updates no other kind, or the rest is itself held: then the fold is judged whole.
   */
  private holdKinds(
    fold: UpdateFold,
    kinds: readonly string[],
    losses: readonly KindLoss[],
    now: Date,
  ): KindChange[] | undefined {
    const known = new Set([...this.byKind.keys(), ...this.raw.keys()]);
    const { part, rest } = partFold(fold, new Set(kinds), known);
    if (rest === undefined) return undefined;
    const admitted = this.admit(foldEvent(rest), false);
    const { effect, total } = this.judged(this.effect(admitted), now);
    if (guardVerdict(effect, total, this.rules) !== undefined) return undefined;
    const changes = this.commit(admitted);
    let deletions = 0;
    for (const kind of kinds)
      deletions += losses.find((loss) => loss.kind === kind)?.deletions ?? this.stateOf(kind).size;
    this.hold({ reason: 'emptied-kind', deletions, total: this.total, emptiedKinds: kinds }, part, now);
    return changes;
  }

  /**
   * Holds `fold` for `verdict`. A hold that goes on keeps its start, from which `confirmAfter`
   * counts, so an upstream that keeps changing what it would delete is still applied in time: a
   * hold of the whole update, whatever its reason, after one of the whole update; kinds held
   * alone after the same kinds or more. A hold of the whole update after kinds held alone (the
   * rest of the source now deleting too much), or of kinds not held before, starts now.
   */
  private hold(verdict: Omit<HeldUpdate, 'since' | 'digest'>, fold: UpdateFold, now: Date): void {
    const was = this.held?.update;
    const kinds = verdict.reason === 'emptied-kind' ? (verdict.emptiedKinds ?? []) : undefined;
    const wasKinds = was?.reason === 'emptied-kind' ? (was.emptiedKinds ?? []) : this.held?.restoredKinds;
    const goesOn =
      was !== undefined &&
      (kinds === undefined
        ? wasKinds === undefined
        : wasKinds !== undefined && kinds.every((kind) => wasKinds.includes(kind)));
    this.held = {
      update: { ...verdict, since: goesOn ? was.since : now, digest: foldDigest(fold) },
      fold,
    };
    this.recordChanges++;
  }

  /** Applies a held update (operator confirmation or `confirmAfter`); returns the kinds it changed. */
  release(): KindChange[] {
    const held = this.held;
    if (held === undefined) return this.releaseRules();
    this.held = undefined;
    this.recordChanges++;
    if (this.retiredFlag) return this.dropAll();
    const before = this.total;
    const changes = this.commit(this.admit(foldEvent(held.fold), false));
    // Kinds held alone: what was confirmed is their objects, not what the rest of the source's
    // updates deleted meanwhile, which still counts against the next ones.
    if (held.update.reason === 'emptied-kind') this.deletions.lower(before - this.total);
    else this.deletions.reset(this.total);
    return changes;
  }

  /** Puts held access rules in force; returns the kinds that changed. */
  private releaseRules(): KindChange[] {
    const rules = this.heldRules;
    if (rules === undefined) return [];
    this.recordChanges++;
    return this.putInForce(rules.policy, this.admitUnder(new SourceAcl(rules.policy)));
  }

  /**
   * Starts from a persisted record: its objects are admitted under the access rules it was
   * recorded with (when it names them; the current ones otherwise) and served at once, state
   * `restored`, until the upstream replaces them through the usual guards. Call before any event.
   * Returns the kinds it filled.
   */
  restore(record: SourceRecord, now: Date): KindChange[] {
    this.restored = true;
    // Served as it was served: under the access rules it was recorded with. Rules edited since
    // are then a change like one on reload (the caller's `setPolicy` with the configured policy).
    if (record.rules !== undefined && !sameAccess(record.rules, this.rules)) {
      this.rules = withAccessOf(this.rules, record.rules);
      this.acl = new SourceAcl(this.rules);
    }
    this.readiness.restoreFrom(record);
    this.state = 'restored';
    this.revision = record.revision;
    if (record.lastSyncMs !== undefined) this.lastSyncTime = new Date(record.lastSyncMs);
    // Stale, as far as this process can tell, since it started: a record is written when what the
    // source holds changes, so its times say nothing of an upstream heard since, and `maxStale`
    // must not drop a healthy source restarted after a quiet spell.
    this.staleSince = now;
    const changes = this.commit(
      this.admit(
        {
          type: 'snapshot',
          ...(record.complete ? {} : { kinds: new Set(record.answeredKinds) }),
          resources: record.resources,
          revision: record.revision,
          errors: [],
          warnings: [],
        },
        false,
      ),
    );
    const held = record.held;
    if (held !== undefined) {
      const kinds = held.kinds === undefined ? undefined : new Set(held.kinds);
      // A kind the held update empties counts as listed empty: a record of an earlier release
      // names a kind lost whole `mass-delete`, and the upstream's next answer for another kind
      // must not let it go.
      const emptied = new Set(kinds);
      for (const r of held.resources) emptied.delete(r.kind);
      const fold = foldIn(undefined, {
        type: 'snapshot',
        ...(kinds === undefined ? {} : { kinds }),
        ...(emptied.size === 0 ? {} : { listed: emptied }),
        resources: held.resources,
        revision: held.revision,
        errors: [],
        warnings: [],
      });
      this.held = {
        update: {
          reason: held.reason,
          since: new Date(held.sinceMs),
          deletions: held.deletions,
          total: held.total,
          ...(held.emptiedKinds === undefined ? {} : { emptiedKinds: held.emptiedKinds }),
          digest: foldDigest(fold),
        },
        fold,
        ...(held.emptiedKinds === undefined &&
        held.reason === 'mass-delete' &&
        kinds !== undefined &&
        emptied.size === kinds.size
          ? { restoredKinds: [...emptied] }
          : {}),
      };
    }
    // Deletions are judged from where the process before left them: a restart is no reason to
    // let go of an update it held, nor to judge a wear-down from what the source has left.
    this.deletions.restore(record.deletionWindow, held?.total, held?.sinceMs);
    return changes;
  }

  /**
   * What this source contributes, as a record to persist: the objects it sent (before its rules),
   * the kinds known, and the held update. Objects are shared, not copied; the arrays are new.
   */
  record(now: Date): SourceRecord {
    const held = this.held;
    const window = this.deletions.record;
    return {
      source: this.descriptor.name,
      type: this.descriptor.type,
      revision: this.revision,
      ...(this.lastSyncTime === undefined ? {} : { lastSyncMs: this.lastSyncTime.getTime() }),
      savedMs: now.getTime(),
      ...this.readiness.coverage(this.descriptor.kinds),
      // Under the creation times served, which may be another replica's (see Provenance).
      resources: this.sentWithHeldTimes(),
      ...(held === undefined
        ? {}
        : {
            held: {
              reason: held.update.reason,
              sinceMs: held.update.since.getTime(),
              deletions: held.update.deletions,
              total: held.update.total,
              ...(held.fold.full ? {} : { kinds: [...held.fold.kinds.keys()] }),
              resources: [...held.fold.kinds.values()].flat(),
              revision: held.fold.revision,
              ...(held.update.emptiedKinds === undefined ? {} : { emptiedKinds: held.update.emptiedKinds }),
            },
          }),
      rules: this.recordedRules(),
      ...(window === undefined ? {} : { deletionWindow: window }),
    };
  }

  /** The rules as a record carries them (see `RecordedRules`). */
  private recordedRules(): RecordedRules {
    const r = this.rules;
    return {
      priority: r.priority,
      ...(r.allow === undefined ? {} : { allow: r.allow }),
      ...(r.deny === undefined ? {} : { deny: r.deny }),
      keepOnEmpty: r.keepOnEmpty,
      maxDeleteRatio: r.maxDeleteRatio,
      minDeletes: r.minDeletes,
      ...(r.confirmAfterMs === undefined ? {} : { confirmAfterMs: r.confirmAfterMs }),
      defaultNamespace: this.descriptor.defaultNamespace,
    };
  }

  /**
   * Serves the objects this source holds under the creation times `record` (the same source's
   * record, written by another replica) gives them, where the times held are ones meshmux stamped:
   * replicas that first read an object at different moments converge on the writer's time.
   * Nothing else of the record is taken. Returns the kinds changed.
   */
  adoptCreateTimes(record: SourceRecord): KindChange[] {
    const upsertsByKind = new Map<string, Map<string, ConfigResource>>();
    this.provenance.clearShared();
    for (const r of record.resources) {
      const key = keyOf(r);
      // Remembered also for objects this replica has not read yet: it may read them later.
      const out = this.provenance.adopt(r.kind, key, r.createTime, this.stateOf(r.kind).get(key));
      if (out === undefined) continue;
      let upserts = upsertsByKind.get(r.kind);
      if (upserts === undefined) upsertsByKind.set(r.kind, (upserts = new Map<string, ConfigResource>()));
      upserts.set(key, out);
    }
    if (upsertsByKind.size === 0) return [];
    const deltas = new Map<string, KindDelta>();
    for (const [kind, upserts] of upsertsByKind) deltas.set(kind, { removed: new Set(), upserts });
    return this.commit({
      next: new Map(),
      raw: new Map(),
      full: false,
      deltas,
      sent: new Map(),
      lists: () => false,
    });
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
    const changes = this.dropAll();
    // Dropped for good: a restart must not bring them back either.
    this.recordChanges++;
    return changes;
  }

  /**
   * Drops every object and what the source sent: neither new rules nor a restart bring them
   * back. The dropped states are handed out as they were; they are never altered again.
   */
  private dropAll(): KindChange[] {
    const changes = [...this.byKind].map(([kind, slot]) => ({ kind, before: slot.state, after: EMPTY }));
    this.byKind.clear();
    this.raw.clear();
    this.sentByKind.clear();
    this.total = 0;
    // Nothing is left to lose: what comes next is judged from what it brings.
    this.deletions.reset(0);
    return changes;
  }

  /** When the source turned stale or failing; undefined while synced or connecting. */
  get staleSinceTime(): Date | undefined {
    return this.staleSince;
  }

  /** The update a guard holds: the source's own first, then held access rules. */
  get heldUpdate(): HeldUpdate | undefined {
    return this.held?.update ?? this.heldRules?.update;
  }

  /** A view of this source's admitted objects of one kind (read before the ledger's next change). */
  kind(kind: string): KindState {
    const slot = this.byKind.get(kind);
    return slot === undefined ? EMPTY : new KindStateView(slot.state, slot.token);
  }

  /** Whether the upstream has answered every kind the source may deliver, in this process. */
  get synced(): boolean {
    return this.everSynced;
  }

  /** Whether the source has something to serve for a kind: answered by its upstream, or restored. */
  knows(kind: string): boolean {
    return this.readiness.knows(kind);
  }

  /** Whether the source serves a complete state: synced, or restored from a complete record. */
  get servesAll(): boolean {
    return this.readiness.servesAll(this.descriptor.kinds);
  }

  /** Kinds the source may deliver that it knows nothing of yet (`*` for "any kind"). */
  missingKinds(): string[] {
    if (this.servesAll) return [];
    const kinds = this.descriptor.kinds;
    if (kinds === undefined) return ['*'];
    return [...kinds].filter((k) => !this.knows(k) && this.acl.mayContribute(k));
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
    for (const [kind, slot] of this.byKind) counts[kind] = slot.state.size;
    const restoredFrom = this.readiness.restoredAt;
    return {
      name: this.descriptor.name,
      type: this.descriptor.type,
      priority: this.rules.priority,
      state: this.state,
      everSynced: this.everSynced,
      required: this.rules.required,
      ...(restoredFrom === undefined ? {} : { restoredFrom }),
      missingKinds: this.missingKinds(),
      revision: this.revision,
      ...(this.lastSyncTime === undefined ? {} : { lastSyncTime: this.lastSyncTime }),
      ...(this.lastError === undefined ? {} : { lastError: this.lastError }),
      ...(this.staleSince === undefined ? {} : { staleSince: this.staleSince }),
      ...(this.heldUpdate === undefined ? {} : { held: this.heldUpdate }),
      counts,
      errors: this.errors,
      warnings: this.warnings,
      rejections: this.rejected,
    };
  }

  /**
   * What the source last sent, under the creation times served: the lists it sent joined by their
   * chunks while no time differs (upstreams that give their own times never do), else a copy.
   */
  private sentWithHeldTimes(): ReadList<ConfigResource> {
    for (const list of this.raw.values()) {
      for (let i = 0; i < list.length; i++) {
        const r = list.at(i) as ConfigResource;
        if (this.withServedTime(r) !== r) return this.sentObjects((o) => this.withServedTime(o));
      }
    }
    return ChunkedList.joined([...this.raw.values()]);
  }

  /** `r` (as the source sent it) under the creation time it is served with. */
  private withServedTime(r: ConfigResource): ConfigResource {
    // A time the source gave is served as given: nothing to look up (a record walks every object).
    if (r.origin.createTimeStamped !== true) return r;
    return this.provenance.withServedTime(r, this.stateOf(r.kind).get(keyOf(r)));
  }

  /** What the source last sent, every kind in one array, each object as `map` gives it. */
  private sentObjects(map: (r: ConfigResource) => ConfigResource): ConfigResource[] {
    let length = 0;
    for (const list of this.raw.values()) length += list.length;
    const out = new Array<ConfigResource>(length);
    let i = 0;
    for (const list of this.raw.values())
      for (let k = 0; k < list.length; k++) out[i++] = map(list.at(k) as ConfigResource);
    return out;
  }

  /** Which kinds `event` lists afresh: all of them for a source whose every state is an answer. */
  private listsOf(event: SourceSnapshotEvent): (kind: string) => boolean {
    if (LISTING_TYPES.has(this.descriptor.type)) return () => true;
    const listed = event.listed;
    return listed === undefined ? () => false : (kind) => listed.has(kind);
  }

  /** The committed objects of one kind, as the ledger itself reads them. */
  private stateOf(kind: string): KindState {
    return this.byKind.get(kind)?.state ?? EMPTY;
  }

  /** The per-kind state an event yields after the access rules, with duplicates resolved. */
  private admit(event: SourceSnapshotEvent, byIdentity = true): Admitted {
    const next = new Map<string, Map<string, ConfigResource>>();
    const deltas = new Map<string, KindDelta>();
    const sent = new Map<string, ReadList<ConfigResource>>();
    const raw = new Map<string, ReadList<ConfigResource>>();
    const single = event.kinds?.size === 1 ? event.kinds.values().next().value : undefined;
    if (single !== undefined && byIdentity) {
      // The common case, one kind per upstream response: the source's own list is kept as is and
      // compared by identity, without even reading the objects it shares with the last one.
      const delta = this.admitByIdentity(single, event.resources);
      if (delta !== undefined) {
        raw.set(single, event.resources);
        sent.set(single, event.resources);
        deltas.set(single, delta);
        return { next, raw, full: false, deltas, sent, lists: this.listsOf(event) };
      }
    }
    // Kinds sent again as the same instances in the same order (a resync that changed nothing):
    // their last lists stand, and no list as large as the kind is built for them.
    const resent = byIdentity && event.kinds !== undefined ? this.resentKinds(event) : NO_KINDS;
    for (const kind of resent) {
      const list = this.sentByKind.get(kind) as ReadList<ConfigResource>;
      raw.set(kind, list);
      sent.set(kind, list);
      deltas.set(kind, { removed: new Set(), upserts: new Map() });
    }
    for (const kind of event.kinds ?? []) if (!resent.has(kind)) raw.set(kind, []);
    if (event.kinds === undefined) for (const kind of this.byKind.keys()) raw.set(kind, []);
    // Nothing to read when every kind of the event was sent again as it was.
    const allResent = event.kinds !== undefined && [...event.kinds].every((kind) => resent.has(kind));
    if (!allResent) for (const [kind, list] of this.listsByChunks(event, resent)) raw.set(kind, list);
    const rejected: Rejection[] = [];
    for (const [kind, list] of raw) {
      if (resent.has(kind)) continue;
      sent.set(kind, list);
      const delta = byIdentity ? this.admitByIdentity(kind, list) : undefined;
      if (delta !== undefined) {
        deltas.set(kind, delta);
        continue;
      }
      const state = new Map<string, ConfigResource>();
      const served = this.stateOf(kind);
      // Indexed, as the loops of `listsByChunks`: a loop this rarely run is not optimized, and an
      // unoptimized for-of allocates an iterator result per object.
      for (let k = 0; k < list.length; k++) {
        const r = list.at(k) as ConfigResource;
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
        state.set(key, this.provenance.annotate(r, key, served.get(key)));
      }
      next.set(kind, state);
    }
    if (event.kinds === undefined) this.rejected = rejected;
    else {
      const keep = this.rejected.filter((x) => !event.kinds?.has(x.kind));
      this.rejected = [...keep, ...rejected];
    }
    return { next, raw, full: event.kinds === undefined, deltas, sent, lists: this.listsOf(event) };
  }

  /**
   * The objects of `event` by kind (those of kinds it holds and did not send again as they were),
   * in its order, each kind's as a list of the event's own chunks where a chunk holds objects of
   * one kind (a chunk that mixes kinds is split, its objects copied): a source serving several
   * kinds in one event joins their lists (see `ChunkedList.joined`), and the lists kept share
   * those chunks, so the next event that sends a kind again as the same list is told apart by its
   * chunks (see {@link resentChunks}), and one that changes a few objects of it only where its
   * chunks differ.
   */
  private listsByChunks(
    event: SourceSnapshotEvent,
    resent: ReadonlySet<string>,
  ): Map<string, ReadList<ConfigResource>> {
    const chunks = ChunkedList.chunksOf(event.resources);
    const kinds = event.kinds;
    const wanted = (kind: string): boolean => kinds === undefined || (kinds.has(kind) && !resent.has(kind));
    const byKind = new Map<string, (readonly ConfigResource[])[]>();
    const add = (kind: string, part: readonly ConfigResource[]): void => {
      const own = byKind.get(kind);
      if (own === undefined) byKind.set(kind, [part]);
      else own.push(part);
    };
    for (let c = 0; c < chunks.length; c++) {
      const chunk = chunks[c] as readonly ConfigResource[];
      if (chunk.length === 0) continue;
      const kind = (chunk[0] as ConfigResource).kind;
      let one = true;
      for (let i = 1; one && i < chunk.length; i++) one = (chunk[i] as ConfigResource).kind === kind;
      if (one) {
        if (wanted(kind)) add(kind, chunk);
        continue;
      }
      const parts = new Map<string, ConfigResource[]>();
      for (let i = 0; i < chunk.length; i++) {
        const r = chunk[i] as ConfigResource;
        if (!wanted(r.kind)) continue;
        const part = parts.get(r.kind);
        if (part === undefined) parts.set(r.kind, [r]);
        else part.push(r);
      }
      for (const [k, part] of parts) add(k, part);
    }
    const lists = new Map<string, ReadList<ConfigResource>>();
    for (const [kind, own] of byKind) lists.set(kind, ChunkedList.joined(own));
    return lists;
  }

  /**
   * The fast path of admission: when the rules admit everything and the committed state of the
   * kind has no rejections, the new list is compared by identity with the list the committed
   * state came from. Sources re-send unchanged objects as the same instances in the same order,
   * so a walk in step finds the few that differ with pointer comparisons alone. Returns undefined
   * when the full path must decide (first state, rules, duplicates).
   */
  private admitByIdentity(kind: string, list: ReadList<ConfigResource>): KindDelta | undefined {
    const previous = this.sentByKind.get(kind);
    if (previous === undefined || !this.acl.unrestricted || this.rejectedKinds.has(kind)) return undefined;
    // Lists kept in chunks (a streaming source's) are compared only where their chunks differ.
    const [was, now] = ChunkedList.unshared(previous, list);
    const diff = diffByIdentity(was, now);
    const before = this.stateOf(kind);
    const removed = new Set<string>();
    for (const r of diff.vanished) removed.add(keyOf(r));
    const upserts = new Map<string, ConfigResource>();
    for (const r of diff.added) {
      // Another kind in the list: the full path sorts the list out.
      if (r.kind !== kind) return undefined;
      const key = keyOf(r);
      // Two objects under one key: the full path reports the duplicate.
      if (upserts.has(key) || (before.has(key) && !removed.has(key))) return undefined;
      upserts.set(key, this.provenance.annotate(r, key, before.get(key)));
    }
    return { removed, upserts };
  }

  /**
   * The kinds of `event` whose objects, in its order, are exactly the instances the committed
   * state of the kind was admitted from, where the fast path of admission applies to the kind.
   */
  private resentKinds(event: SourceSnapshotEvent): ReadonlySet<string> {
    const same = new Set<string>();
    const at = new Map<string, number>();
    for (const kind of event.kinds ?? []) {
      if (!this.sentByKind.has(kind) || !this.acl.unrestricted || this.rejectedKinds.has(kind)) continue;
      same.add(kind);
      at.set(kind, 0);
    }
    if (same.size === 0) return same;
    const byChunks = this.resentChunks(event.resources, same);
    if (byChunks !== undefined) return byChunks;
    // Objects of one kind usually come in one run: the kind's list and place are looked up per run.
    let kind = '';
    let list: ReadList<ConfigResource> = [];
    let i = 0;
    for (let k = 0; k < event.resources.length; k++) {
      const r = event.resources.at(k) as ConfigResource;
      if (r.kind !== kind) {
        if (same.has(kind)) at.set(kind, i);
        kind = r.kind;
        list = this.sentByKind.get(kind) ?? [];
        i = at.get(kind) ?? 0;
      }
      if (!same.has(kind)) continue;
      if (list.at(i) === r) i++;
      else same.delete(kind);
    }
    if (same.has(kind)) at.set(kind, i);
    for (const k of same) if (at.get(k) !== this.sentByKind.get(k)?.length) same.delete(k);
    return same;
  }

  /**
   * {@link resentKinds} read from the lists' chunks, without reading an object: a source that
   * sends kinds again as they were hands out the lists they were admitted from, so the event is
   * those lists' chunks (the same arrays) one after the other. Each list admitted holds objects of
   * its kind only, so an event made of its chunks, in their order, holds that kind's objects as
   * they were sent. Undefined when some chunk of the event is not the next of a candidate kind's
   * list: the objects are compared then.
   */
  private resentChunks(
    resources: ReadList<ConfigResource>,
    candidates: ReadonlySet<string>,
  ): Set<string> | undefined {
    const chunks = ChunkedList.chunksOf(resources);
    const owners = new Map<readonly ConfigResource[], { readonly kind: string; readonly index: number }>();
    const counts = new Map<string, number>();
    for (const kind of candidates) {
      const own = ChunkedList.chunksOf(this.sentByKind.get(kind) as ReadList<ConfigResource>);
      for (let index = 0; index < own.length; index++)
        owners.set(own[index] as readonly ConfigResource[], { kind, index });
      counts.set(kind, own.length);
    }
    const next = new Map<string, number>();
    for (let c = 0; c < chunks.length; c++) {
      const owner = owners.get(chunks[c] as readonly ConfigResource[]);
      if (owner === undefined || (next.get(owner.kind) ?? 0) !== owner.index) return undefined;
      next.set(owner.kind, owner.index + 1);
    }
    const same = new Set<string>();
    for (const kind of candidates) if ((next.get(kind) ?? 0) === counts.get(kind)) same.add(kind);
    return same;
  }

  /**
   * An update's effect as the guards judge it now, and the total to judge it against: while an
   * update of the whole source is held, against what the source held before the deletions held.
   */
  private judged(effect: UpdateEffect, now: Date): { effect: UpdateEffect; total: number } {
    const holding = this.held !== undefined && this.held.update.reason !== 'emptied-kind';
    return this.deletions.judged(effect, this.total, now.getTime(), this.rules.deleteWindowMs, holding);
  }

  private effect(admitted: Admitted): UpdateEffect {
    let deletions = 0;
    let after = this.total;
    let emptiesKind = false;
    const emptiedKinds: string[] = [];
    const listedEmpty: string[] = [];
    const listedLosses: KindLoss[] = [];
    const configured = this.descriptor.kinds;
    // A kind is lost whole or cut only by a listing (edits that delete its objects are an
    // operator's); a kind the configuration no longer names goes because an operator took it out.
    const listed = (kind: string, before: number, after: number, lost: number): boolean => {
      if (before === 0 || !admitted.lists(kind)) return false;
      if (configured !== undefined && !configured.has(kind)) return false;
      if (lost > 0) listedLosses.push({ kind, deletions: lost, before });
      if (after > 0) return false;
      listedEmpty.push(kind);
      return before > 1;
    };
    for (const [kind, list] of admitted.next) {
      const before = this.stateOf(kind);
      let lost = 0;
      for (const key of before.keys()) if (!list.has(key)) lost++;
      deletions += lost;
      after += list.size - before.size;
      if (before.size > 0 && list.size === 0) emptiesKind = true;
      if (listed(kind, before.size, list.size, lost)) emptiedKinds.push(kind);
    }
    for (const [kind, { removed, upserts }] of admitted.deltas) {
      const before = this.stateOf(kind);
      let size = before.size;
      let lost = 0;
      for (const key of removed) {
        if (!upserts.has(key) && before.has(key)) {
          lost++;
          size--;
        }
      }
      deletions += lost;
      for (const key of upserts.keys()) if (!before.has(key)) size++;
      after += size - before.size;
      if (before.size > 0 && size === 0) emptiesKind = true;
      if (listed(kind, before.size, size, lost)) emptiedKinds.push(kind);
    }
    return { deletions, after, emptiesKind, emptiedKinds, listedEmpty, listedLosses };
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
      const before = this.stateOf(kind);
      if (sameState(before, after)) continue;
      this.total += after.size - before.size;
      if (after.size === 0) {
        this.byKind.delete(kind);
        changes.push({ kind, before, after });
        continue;
      }
      // A new state, never altered yet: the views of the replaced one stay valid, as it is not altered either.
      const slot: KindSlot = { state: after, token: { valid: true } };
      this.byKind.set(kind, slot);
      changes.push({ kind, before, after: new KindStateView(slot.state, slot.token) });
    }
    for (const [kind, { removed, upserts }] of deltas) {
      if (removed.size === 0 && upserts.size === 0) continue;
      // Applied in place, which no view handed out before may see: their token is revoked.
      let slot = this.byKind.get(kind);
      if (slot === undefined) this.byKind.set(kind, (slot = { state: new Map(), token: { valid: true } }));
      slot.token.valid = false;
      slot.token = { valid: true };
      const state = slot.state;
      const before = new Map<string, ConfigResource>();
      const changed = new Set<string>();
      for (const key of [...removed, ...upserts.keys()]) {
        const old = state.get(key);
        if (old !== undefined && !before.has(key)) before.set(key, old);
        changed.add(key);
      }
      const sizeBefore = state.size;
      for (const key of removed) state.delete(key);
      for (const [key, r] of upserts) state.set(key, r);
      this.total += state.size - sizeBefore;
      if (state.size === 0) this.byKind.delete(kind);
      changes.push({ kind, before, after: new KindStateView(state, slot.token), changed });
    }
    if (changes.length > 0) this.recordChanges++;
    return changes;
  }
}

function sameState(a: KindState, b: KindState): boolean {
  if (a.size !== b.size) return false;
  for (const [key, r] of a) if (b.get(key) !== r) return false;
  return true;
}

/** Whether two policies admit the same: equal access rules. */
function sameAccess(
  a: Pick<SourcePolicy, 'allow' | 'deny'>,
  b: Pick<SourcePolicy, 'allow' | 'deny'>,
): boolean {
  return isDeepStrictEqual(a.allow, b.allow) && isDeepStrictEqual(a.deny, b.deny);
}

/** `policy` with the access rules of `from`. */
function withAccessOf(policy: SourcePolicy, from: Pick<SourcePolicy, 'allow' | 'deny'>): SourcePolicy {
  const { allow: _allow, deny: _deny, ...rest } = policy;
  return {
    ...rest,
    ...(from.allow === undefined ? {} : { allow: from.allow }),
    ...(from.deny === undefined ? {} : { deny: from.deny }),
  };
}
