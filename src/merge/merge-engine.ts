import {
  asapScheduler,
  auditTime,
  BehaviorSubject,
  catchError,
  type Observable,
  of,
  type SchedulerLike,
  Subject,
  Subscription,
} from '../core/rx.js';
import { linesDigest } from '../core/content-digest.js';
import { MeshmuxError, toMeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { SourceDescriptor, SourceEvent } from '../core/source-event.js';
import type {
  Conflict,
  ConfigSnapshot,
  HoldReason,
  KindSnapshot,
  SnapshotReader,
} from './config-snapshot.js';
import { KindTable, type SemanticConflictPolicy, type SemanticRules, type SourceRank } from './kind-table.js';
import { type HeldUpdate, type KindChange, SourceLedger } from './source-ledger.js';
import type { SourceRecord, SourceRecordStore } from './source-record.js';
import { DEFAULT_SOURCE_POLICY, type SourcePolicy } from './source-rules.js';
import { appendAll } from '../core/append-all.js';

/** What the log says of a hold, by its reason. */
const HOLD_MESSAGES: Readonly<Record<HoldReason, string>> = {
  empty: 'a source sent an empty state: holding it, its last objects stay served (confirm to apply)',
  'mass-delete': 'a source update would delete too much at once: holding it (confirm to apply)',
  'emptied-kind':
    'a source update would take every object of a kind, or most of them, at once: holding it, those objects stay served (confirm to apply)',
  removed:
    'a source left the configuration: its objects stay served until its removal is confirmed (or it is configured again)',
  rules:
    "a source's edited access rules would withdraw too much at once: holding them, the rules in force stay (confirm to apply)",
};

/** Why the merge waits on a source: its update settling, a held update's `confirmAfter`, `maxStale`. */
type TimerPurpose = 'settle' | 'confirm' | 'expiry';

/** A publish waiting for the store: since when, and whether its bound has passed. */
interface KeepWait {
  readonly since: number;
  timer?: Subscription;
  due: boolean;
}

/** A source as the merge sees it: its descriptor, its events and its rules. */
export interface MergeInput {
  readonly descriptor: SourceDescriptor;
  readonly events$: Observable<SourceEvent>;
  readonly policy?: Partial<SourcePolicy>;
  /**
   * A fingerprint of how the source reaches its upstream. On reconfiguration a source whose
   * fingerprint is unchanged keeps its running subscription; otherwise it is resubscribed (its
   * last state stays served until the new subscription delivers).
   */
  readonly fingerprint?: string;
}

export interface MergeOptions {
  /**
   * The startup budget: after it, sources with `required: false` that have not synced are no longer
   * waited for, and the required ones still missing are reported. Default 30 s.
   */
  readonly syncTimeoutMs?: number;
  /** Persisted records to start sources from, by source name (a record of another type is ignored). */
  readonly restored?: ReadonlyMap<string, SourceRecord>;
  /**
   * Where every change of a source's contribution is recorded. A change the store writes at once
   * is served once it is kept, or after `keepWaitMs`: a restart then never serves istiods less
   * than they were sent.
   */
  readonly store?: SourceRecordStore;
  /** How long a snapshot waits for the store to keep the changes in it. Default 100 ms. */
  readonly keepWaitMs?: number;
  /** How objects of each kind clash, for conflict detection; without it only same-key conflicts are seen. */
  readonly semanticRules?: SemanticRules;
  /** What to serve on a semantic conflict. Default `serve-all` (istiod resolves it, meshmux reports it). */
  readonly semanticConflicts?: SemanticConflictPolicy;
  /** Schedules snapshot builds and timers; virtual time in tests. Default `asapScheduler`. */
  readonly scheduler?: SchedulerLike;
  readonly log?: Logger;
}

/** Lifecycle hooks; called synchronously, must not throw. */
export interface MergeHooks {
  /** A snapshot is built, before it reaches the subscribers (the ADS server pushes it then). */
  onSnapshot?(snapshot: ConfigSnapshot, changedKinds: ReadonlySet<string>, buildMs: number): void;
  /**
   * The snapshot of the last `onSnapshot` reached every subscriber: what only reports on it goes
   * here, after the ADS server has written what the snapshot changed, not before.
   */
  onPublished?(snapshot: ConfigSnapshot): void;
  onSourceEvent?(source: string, event: SourceEvent): void;
  onHeld?(source: string, reason: HoldReason, deletions: number): void;
  /** A build found nothing new to publish: the source events since the last snapshot changed nothing. */
  onUnchanged?(): void;
  /**
   * A snapshot is published before the store kept every change in it: the store took longer than
   * `keepWaitMs` (a slow disk), and a restart meanwhile would serve the record before them.
   */
  onServedUnkept?(): void;
}

/**
 * Merges sources into immutable, versioned snapshots. Each source is isolated (its stream's error
 * becomes a status), holds its last good state behind its access rules and safety guards, and
 * feeds per-kind tables that apply precedence incrementally. Events arriving together are folded
 * into one snapshot on the scheduler's next turn: a burst costs one build, and an isolated change
 * waits for no timer.
 */
export class MergeEngine implements SnapshotReader {
  private ledgers: SourceLedger[];
  private readonly attached = new Map<
    SourceLedger,
    { subscription: Subscription; fingerprint: string | undefined }
  >();
  /** Per source, the `recordVersion` last handed to the store. */
  private readonly persisted = new WeakMap<SourceLedger, number>();
  /** Per source, its one pending timer of each purpose; replaced, never accumulated. */
  private readonly timers = new Map<SourceLedger, Map<TimerPurpose, Subscription>>();
  private readonly tables = new Map<string, KindTable>();
  private readonly subject: BehaviorSubject<ConfigSnapshot>;
  private readonly subscription = new Subscription();
  private readonly kicks = new Subject<void>();
  /** Changes handed to the store that it has not kept yet, one token each. */
  private readonly unkept = new Set<object>();
  /** Since when a publish waits for the store, and the timer that ends the wait. */
  private keepWait: KeepWait | undefined;
  private servedUnkept = 0;
  private readonly changed = new Set<string>();
  private readonly scheduler: SchedulerLike;
  private generation = 0;
  private kindGeneration = 0;
  /** The last snapshot's conflicts, and the tables' lists they were joined from. */
  private joinedConflicts: {
    readonly parts: readonly (readonly Conflict[])[];
    readonly all: readonly Conflict[];
  } = {
    parts: [],
    all: [],
  };
  private timedOut = false;
  private started = false;
  /** Whether a snapshot has been ready: from then on a reload never makes the merge wait again. */
  private everReady = false;
  /**
   * Sources a reload added, or changed so that they have kinds yet to answer, once the merge had
   * been ready: not waited for. Istiods hold nothing of theirs yet, so serving without them loses
   * nothing, where waiting would hold back every other source's changes of their kinds.
   */
  private readonly unwaited = new WeakSet<SourceLedger>();

  constructor(
    private inputs: readonly MergeInput[],
    private readonly options: MergeOptions = {},
    private readonly hooks: MergeHooks = {},
  ) {
    this.scheduler = options.scheduler ?? asapScheduler;
    this.ledgers = inputs.map(
      (input, index) =>
        new SourceLedger(input.descriptor, { ...DEFAULT_SOURCE_POLICY, ...input.policy }, index),
    );
    for (const ledger of this.ledgers) this.restore(ledger);
    this.restoreRemoved(new Set(inputs.map((i) => i.descriptor.name)));
    this.subject = new BehaviorSubject(this.build());
  }

  get snapshots$(): Observable<ConfigSnapshot> {
    return this.subject.asObservable();
  }

  current(): ConfigSnapshot {
    return this.subject.getValue();
  }

  /** Subscribes to every source and starts the startup budget. Call once. */
  start(): void {
    if (this.started) throw new MeshmuxError('INTERNAL', 'MergeEngine.start() called twice');
    this.started = true;
    this.inputs.forEach((input, index) => {
      const ledger = this.ledgers[index];
      if (ledger !== undefined) this.attach(ledger, input);
    });
    // One build per burst: the audit window closes on the scheduler's next turn.
    this.subscription.add(this.kicks.pipe(auditTime(0, this.scheduler)).subscribe(() => this.publish()));
    this.subscription.add(
      this.scheduler.schedule(() => {
        this.timedOut = true;
        const optional = this.ledgers.filter((l) => !l.policy.required && !l.servesAll && !l.retired);
        if (optional.length > 0) {
          this.options.log?.warn(
            { sources: optional.map((l) => l.descriptor.name) },
            'startup budget passed: serving without these sources (required: false)',
          );
        }
        const missing = this.ledgers.filter((l) => l.policy.required && !l.servesAll && !l.retired);
        if (missing.length > 0) {
          this.options.log?.error(
            { missing: Object.fromEntries(missing.map((l) => [l.descriptor.name, l.missingKinds()])) },
            'startup budget passed: these sources have neither synced nor been restored; their kinds stay unanswered',
          );
        }
        this.kicks.next();
      }, this.options.syncTimeoutMs ?? 30_000),
    );
    this.kicks.next();
  }

  /**
   * Applies a new list of sources (configuration reload). Sources are matched by name: new ones
   * start, kept ones take their new rules and position at once and are resubscribed only when
   * their fingerprint changed. Removed ones are stopped, and their objects withdrawn as far as
   * their guards allow: a removal they would hold (by default, any source holding objects) keeps
   * the objects served, behind every configured source, until it is confirmed, `confirmAfter`
   * passes, or the source is configured again.
   */
  reconfigure(inputs: readonly MergeInput[]): void {
    const now = new Date(this.scheduler.now());
    const byName = new Map(this.ledgers.map((l) => [l.descriptor.name, l]));
    const next: SourceLedger[] = [];
    inputs.forEach((input, order) => {
      const policy = { ...DEFAULT_SOURCE_POLICY, ...input.policy };
      const existing = byName.get(input.descriptor.name);
      byName.delete(input.descriptor.name);
      if (existing === undefined) {
        const ledger = new SourceLedger(input.descriptor, policy, order);
        next.push(ledger);
        if (this.started) this.attach(ledger, input);
        return;
      }
      next.push(existing);
      if (existing.retired) {
        // Configured again before its removal was confirmed: nothing was withdrawn.
        existing.reinstate();
        this.cancel(existing, 'confirm');
        this.options.log?.info(
          { source: existing.descriptor.name },
          'a source whose removal was held is configured again: its removal is dropped',
        );
      }
      const oldRank = this.rankOf(existing);
      const reRank = existing.policy.priority !== policy.priority || existing.order !== order;
      if (reRank)
        for (const [kind, state] of existing.entries()) this.tableFor(kind).apply(oldRank, state, new Map());
      existing.order = order;
      existing.descriptor = input.descriptor;
      const wasHeld = existing.heldUpdate;
      const changes = existing.setPolicy(policy, now);
      if (reRank) {
        const rank = this.rankOf(existing);
        for (const [kind, state] of existing.entries()) {
          this.tableFor(kind).apply(rank, new Map(), state, { revision: existing.lastRevision });
          this.changed.add(kind);
        }
        for (const c of changes) this.changed.add(c.kind);
      } else this.take(existing, changes);
      if (existing.heldUpdate !== wasHeld) {
        this.cancel(existing, 'confirm');
        this.onHold(existing);
      }
      this.dropLeftOut(existing, now);
      this.persist(existing, false);
      const current = this.attached.get(existing);
      if (this.started && (current === undefined || current.fingerprint !== input.fingerprint)) {
        current?.subscription.unsubscribe();
        this.attach(existing, input);
      }
    });
    // A source left out is no longer heard; its objects go only as far as its guards let them.
    let after = inputs.length;
    for (const removed of byName.values()) {
      if (!removed.retired) {
        this.attached.get(removed)?.subscription.unsubscribe();
        this.attached.delete(removed);
        this.clearTimers(removed);
        this.take(removed, removed.retire(now));
        if (removed.heldUpdate === undefined) {
          this.options.store?.removed(removed.descriptor.name);
          continue;
        }
        this.onHold(removed);
      }
      // Behind every configured source: a source that takes over its objects wins them.
      this.reorder(removed, after++);
      next.push(removed);
    }
    this.ledgers = next;
    this.inputs = inputs;
    if (this.everReady) this.stopWaiting(next);
    this.options.log?.info({ sources: next.map((l) => l.descriptor.name) }, 'sources reconfigured');
    this.kicks.next();
  }

  /** Marks the sources a reload left with kinds to answer as not waited for, and says so. */
  private stopWaiting(ledgers: readonly SourceLedger[]): void {
    const pending = ledgers.filter((l) => !l.servesAll && !l.retired && !this.unwaited.has(l));
    for (const ledger of pending) this.unwaited.add(ledger);
    if (pending.length === 0) return;
    this.options.log?.warn(
      { missing: Object.fromEntries(pending.map((l) => [l.descriptor.name, l.missingKinds()])) },
      'sources a reload added or changed have kinds to answer: their kinds are served without them until they do',
    );
  }

  /** Applies an update a guard holds for a source (operator confirmation). False if none was held. */
  confirm(sourceName: string): boolean {
    const ledger = this.ledgers.find((l) => l.descriptor.name === sourceName);
    if (ledger?.heldUpdate === undefined) return false;
    this.options.log?.warn(
      { source: sourceName, held: ledger.heldUpdate },
      'operator confirmed a held update',
    );
    this.take(ledger, ledger.release());
    this.cancel(ledger, 'confirm');
    this.released(ledger);
    this.kicks.next();
    return true;
  }

  /** After a held update was applied: a source whose removal it was is gone for good. */
  private released(ledger: SourceLedger): void {
    if (!ledger.retired) {
      // What the update brought was persisted as it came, held.
      this.persist(ledger, false);
      // A source may hold its own update and edited rules: the other one comes next.
      if (ledger.heldUpdate !== undefined) this.onHold(ledger);
      return;
    }
    this.clearTimers(ledger);
    this.ledgers = this.ledgers.filter((l) => l !== ledger);
    this.options.store?.removed(ledger.descriptor.name);
  }

  /** Moves a source to another place in the configuration's order, re-ranking what it holds. */
  private reorder(ledger: SourceLedger, order: number): void {
    if (ledger.order === order) return;
    const before = this.rankOf(ledger);
    for (const [kind, state] of ledger.entries()) this.tableFor(kind).apply(before, state, new Map());
    ledger.order = order;
    const rank = this.rankOf(ledger);
    for (const [kind, state] of ledger.entries()) {
      this.tableFor(kind).apply(rank, new Map(), state, { revision: ledger.lastRevision });
      this.changed.add(kind);
    }
  }

  /**
   * Takes the creation times another replica serves a source's objects under (its record of the
   * source, read from the shared store), where this replica stamped its own: see
   * `SourceLedger.adoptCreateTimes`. A record of another type or an unknown source is ignored.
   */
  adoptCreateTimes(record: SourceRecord): void {
    const ledger = this.ledgers.find((l) => l.descriptor.name === record.source);
    if (ledger === undefined || ledger.descriptor.type !== record.type) return;
    const changes = ledger.adoptCreateTimes(record);
    if (changes.length === 0) return;
    this.options.log?.debug(
      { source: record.source, kinds: changes.map((c) => c.kind) },
      "adopted creation times from another replica's record",
    );
    this.take(ledger, changes);
    this.kicks.next();
  }

  /**
   * Applies the update a source holds if it is the one `digest` names (a confirmation made on
   * another replica): `applied`; `differs` when this replica holds another update (nothing is
   * applied); `none` when it holds none.
   */
  confirmHeld(sourceName: string, digest: string): 'applied' | 'differs' | 'none' {
    const held = this.ledgers.find((l) => l.descriptor.name === sourceName)?.heldUpdate;
    if (held === undefined) return 'none';
    if (held.digest !== digest) return 'differs';
    return this.confirm(sourceName) ? 'applied' : 'none';
  }

  /**
   * The record of what a source holds now, as the store would be handed it; undefined for a
   * source not configured. A reload that runs a source anew starts it from its objects, as a
   * restart starts it from its stored record.
   */
  record(sourceName: string): SourceRecord | undefined {
    return this.ledgers.find((l) => l.descriptor.name === sourceName)?.record(new Date(this.scheduler.now()));
  }

  /** Whether a source with this name is configured. */
  has(sourceName: string): boolean {
    return this.ledgers.some((l) => l.descriptor.name === sourceName);
  }

  /** Unsubscribes from every source; the last snapshot stays readable. */
  stop(): void {
    this.subscription.unsubscribe();
    for (const ledger of this.timers.keys()) this.clearTimers(ledger);
  }

  /** Starts a ledger from its persisted record, when there is one of the same source type. */
  private restore(ledger: SourceLedger): void {
    const record = this.options.restored?.get(ledger.descriptor.name);
    if (record === undefined) return;
    if (record.type !== ledger.descriptor.type) {
      // What it served is still what istiods hold: the new source's first state is judged against it.
      this.options.log?.warn(
        { source: ledger.descriptor.name, persisted: record.type, configured: ledger.descriptor.type },
        'persisted state belongs to a source of another type: served until the source syncs, its first state judged against it',
      );
    }
    const configured = ledger.policy;
    const now = new Date(this.scheduler.now());
    this.take(ledger, ledger.restore(record, now));
    // Restored under the access rules it recorded: rules edited since are judged as on a reload.
    if (ledger.policy !== configured) this.take(ledger, ledger.setPolicy(configured, now));
    if (ledger.heldUpdate !== undefined) this.onHold(ledger);
    // Kinds the record holds that the source is no longer configured to deliver: never answered again.
    this.dropLeftOut(ledger, now);
    this.armExpiry(ledger);
    this.options.log?.info(
      {
        source: ledger.descriptor.name,
        objects: record.resources.length,
        savedAt: new Date(record.savedMs).toISOString(),
        complete: record.complete,
      },
      'serving the persisted state until the source syncs',
    );
  }

  /**
   * The records of sources the configuration no longer names (removed or renamed while the process
   * was down): each is served under the rules it recorded, and its removal judged by them as a
   * reload would judge it. A record of an earlier release, which recorded no rules, is not served.
   */
  private restoreRemoved(configured: ReadonlySet<string>): void {
    let order = this.ledgers.length;
    for (const [name, record] of this.options.restored ?? []) {
      if (configured.has(name)) continue;
      const savedAt = new Date(record.savedMs).toISOString();
      if (record.rules === undefined) {
        this.options.log?.error(
          { source: name, objects: record.resources.length, savedAt },
          'persisted state of a source no longer configured, from a release that did not record its rules: not served',
        );
        continue;
      }
      const { defaultNamespace, ...rules } = record.rules;
      const ledger = new SourceLedger(
        { name, type: record.type, defaultNamespace },
        { ...DEFAULT_SOURCE_POLICY, ...rules },
        order++,
      );
      const now = new Date(this.scheduler.now());
      this.take(ledger, ledger.restore(record, now));
      this.take(ledger, ledger.retire(now));
      if (ledger.heldUpdate === undefined) {
        this.options.store?.removed(name);
        continue;
      }
      this.ledgers.push(ledger);
      this.options.log?.info(
        { source: name, objects: record.resources.length, savedAt },
        'serving the persisted state of a source no longer configured',
      );
      this.onHold(ledger);
    }
  }

  /**
   * Lets go, through the source's guards, of the objects of kinds its configuration no longer lets
   * it deliver (its `kinds` narrowed by an edit, or since its record was written): its upstream
   * will not answer them again, so they would otherwise be served for ever.
   */
  private dropLeftOut(ledger: SourceLedger, now: Date): void {
    const kinds = ledger.kindsLeftOut();
    if (kinds.size === 0) return;
    this.options.log?.info(
      { source: ledger.descriptor.name, kinds: [...kinds] },
      'the source is no longer configured for these kinds: their objects go as its guards allow',
    );
    const wasHeld = ledger.heldUpdate;
    const wasSettling = ledger.settleDue !== undefined;
    this.take(ledger, ledger.dropKinds(kinds, now));
    this.afterChange(ledger, wasHeld);
    if (!wasSettling && ledger.settleDue !== undefined) this.armSettle(ledger);
  }

  /**
   * Tells the store the ledger's record changed; `upstream` when by what its upstream sent (see
   * `SourceRecordStore.changed`).
   */
  private persist(ledger: SourceLedger, upstream: boolean): void {
    const store = this.options.store;
    // A source re-sending what it holds rewrites nothing.
    if (store === undefined || this.persisted.get(ledger) === ledger.recordVersion) return;
    this.persisted.set(ledger, ledger.recordVersion);
    const kept = store.changed(
      ledger.descriptor.name,
      () => ledger.record(new Date(this.scheduler.now())),
      upstream,
    );
    if (kept === undefined) return;
    const token = {};
    this.unkept.add(token);
    void kept.then(() => {
      this.unkept.delete(token);
      if (this.unkept.size === 0 && this.keepWait !== undefined) this.kicks.next();
    });
  }

  /**
   * Whether a publish waits for the store: while changes are not kept, for at most `keepWaitMs`
   * from the first publish asked for; past it the publish goes on, counted, so a slow disk delays
   * serving by that much and never stalls it.
   */
  private waitsForStore(): boolean {
    if (this.unkept.size > 0) {
      const now = this.scheduler.now();
      let wait = this.keepWait;
      if (wait === undefined) {
        const started: KeepWait = { since: now, due: false };
        started.timer = this.scheduler.schedule(() => {
          started.due = true;
          this.kicks.next();
        }, this.options.keepWaitMs ?? 100);
        this.subscription.add(started.timer);
        this.keepWait = wait = started;
      }
      if (!wait.due) return true;
      this.hooks.onServedUnkept?.();
      if (this.servedUnkept++ === 0) {
        this.options.log?.warn(
          { waitedMs: now - wait.since, unkept: this.unkept.size },
          'the state store is slow: serving changes before they are kept (a restart meanwhile would serve the state before them); counted in meshmux_state_served_unkept_total',
        );
      }
    }
    this.keepWait?.timer?.unsubscribe();
    this.keepWait = undefined;
    return false;
  }

  /** Runs `action` after `delayMs`, replacing the ledger's pending timer of that purpose. */
  private arm(ledger: SourceLedger, purpose: TimerPurpose, delayMs: number, action: () => void): void {
    let timers = this.timers.get(ledger);
    if (timers === undefined) this.timers.set(ledger, (timers = new Map<TimerPurpose, Subscription>()));
    timers.get(purpose)?.unsubscribe();
    timers.set(
      purpose,
      this.scheduler.schedule(
        () => {
          timers.delete(purpose);
          action();
        },
        Math.max(0, delayMs),
      ),
    );
  }

  private cancel(ledger: SourceLedger, purpose: TimerPurpose): void {
    const timers = this.timers.get(ledger);
    timers?.get(purpose)?.unsubscribe();
    timers?.delete(purpose);
  }

  private clearTimers(ledger: SourceLedger): void {
    for (const t of this.timers.get(ledger)?.values() ?? []) t.unsubscribe();
    this.timers.delete(ledger);
  }

  /** Subscribes to one source, isolated: an error of its stream becomes a status, never an error of the merge. */
  private attach(ledger: SourceLedger, input: MergeInput): void {
    const subscription = input.events$
      .pipe(
        catchError((err: unknown) =>
          of<SourceEvent>({
            type: 'status',
            state: ledger.synced ? 'stale' : 'failing',
            error: toMeshmuxError(err, 'UNAVAILABLE', { file: input.descriptor.name }),
          }),
        ),
      )
      .subscribe((event) => {
        this.hooks.onSourceEvent?.(ledger.descriptor.name, event);
        const wasHeld = ledger.heldUpdate;
        const wasSettling = ledger.settleDue !== undefined;
        this.take(ledger, ledger.apply(event, new Date(this.scheduler.now())));
        this.afterChange(ledger, wasHeld);
        if (!wasSettling && ledger.settleDue !== undefined) this.armSettle(ledger);
        if (event.type === 'status' && ledger.staleSinceTime !== undefined) this.armExpiry(ledger);
        if (event.type === 'snapshot') this.persist(ledger, true);
        this.kicks.next();
      });
    this.attached.set(ledger, { subscription, fingerprint: input.fingerprint });
    this.subscription.add(subscription);
  }

  private rankOf(ledger: SourceLedger): SourceRank {
    return { name: ledger.descriptor.name, priority: ledger.policy.priority, order: ledger.order };
  }

  private tableFor(kind: string): KindTable {
    let table = this.tables.get(kind);
    if (table === undefined) {
      table = new KindTable(
        kind,
        this.options.semanticRules?.(kind),
        this.options.semanticConflicts ?? 'serve-all',
        () => ++this.kindGeneration,
      );
      this.tables.set(kind, table);
    }
    return table;
  }

  private take(ledger: SourceLedger, changes: readonly KindChange[]): void {
    const rank = this.rankOf(ledger);
    for (const change of changes) {
      // The ledger's key delta (when it has one) spares the table a scan of both states, and the
      // revision lets responses name the upstream states they carry.
      this.tableFor(change.kind).apply(rank, change.before, change.after, {
        changed: change.changed,
        revision: ledger.lastRevision,
      });
      this.changed.add(change.kind);
    }
  }

  private onHold(ledger: SourceLedger): void {
    const held = ledger.heldUpdate;
    if (held === undefined) return;
    this.hooks.onHeld?.(ledger.descriptor.name, held.reason, held.deletions);
    this.options.log?.error({ source: ledger.descriptor.name, ...held }, HOLD_MESSAGES[held.reason]);
    const after = ledger.policy.confirmAfterMs;
    if (after === undefined) return;
    // Counted from when the hold began, which a restart does not reset.
    const remaining = held.since.getTime() + after - this.scheduler.now();
    this.arm(ledger, 'confirm', remaining, () => {
      if (ledger.heldUpdate?.since.getTime() !== held.since.getTime()) return;
      this.options.log?.warn({ source: ledger.descriptor.name }, 'held update persisted: applying it');
      this.take(ledger, ledger.release());
      this.released(ledger);
      this.kicks.next();
    });
  }

  /**
   * Reacts to the guards' verdict after a ledger changed: a new hold is announced, and so is one
   * whose reason or start moved (its `confirmAfter` counts from the new start); a cleared one is
   * forgotten.
   */
  private afterChange(ledger: SourceLedger, was: HeldUpdate | undefined): void {
    const held = ledger.heldUpdate;
    if (held === undefined) {
      if (was !== undefined) this.cancel(ledger, 'confirm');
      return;
    }
    if (was?.reason === held.reason && was.since.getTime() === held.since.getTime()) return;
    this.cancel(ledger, 'confirm');
    this.onHold(ledger);
  }

  /** Judges a ledger's waiting update when it is due. */
  private armSettle(ledger: SourceLedger): void {
    const due = ledger.settleDue;
    if (due === undefined) return;
    this.arm(ledger, 'settle', due - this.scheduler.now(), () => {
      const wasHeld = ledger.heldUpdate;
      this.take(ledger, ledger.settle(new Date(this.scheduler.now())));
      this.afterChange(ledger, wasHeld);
      this.persist(ledger, true);
      this.kicks.next();
    });
  }

  private armExpiry(ledger: SourceLedger): void {
    const max = ledger.policy.maxStaleMs;
    const since = ledger.staleSinceTime;
    if (max === undefined || since === undefined) return;
    this.arm(ledger, 'expiry', since.getTime() + max - this.scheduler.now(), () => {
      const changes = ledger.expire(new Date(this.scheduler.now()));
      if (changes.length === 0) {
        // Fired before the clock agreed (timers may run a little early), or the source recovered.
        if (ledger.staleSinceTime !== undefined && ledger.holdsObjects) this.armExpiry(ledger);
        return;
      }
      this.options.log?.warn(
        { source: ledger.descriptor.name },
        'source stale past maxStale: its objects are dropped',
      );
      this.take(ledger, changes);
      this.persist(ledger, false);
      this.kicks.next();
    });
  }

  private publish(): void {
    if (this.waitsForStore()) return;
    const started = performance.now();
    const changed = new Set(this.changed);
    this.changed.clear();
    const snapshot = this.build();
    if (snapshot.ready) this.everReady = true;
    const previous = this.subject.getValue();
    if (
      snapshot.version === previous.version &&
      snapshot.ready === previous.ready &&
      snapshot.budgetPassed === previous.budgetPassed &&
      sameReports(snapshot, previous)
    ) {
      this.hooks.onUnchanged?.();
      return;
    }
    this.hooks.onSnapshot?.(snapshot, changed, performance.now() - started);
    this.subject.next(snapshot);
    this.hooks.onPublished?.(snapshot);
  }

  /**
   * Every table's conflicts in one list: the last snapshot's list (the same instance) when every
   * table returned the same list as then, so consumers can tell nothing changed without a walk.
   */
  private joinConflicts(parts: readonly (readonly Conflict[])[]): readonly Conflict[] {
    if (sameParts(parts, this.joinedConflicts.parts)) return this.joinedConflicts.all;
    const all: Conflict[] = [];
    for (const part of parts) appendAll(all, part);
    this.joinedConflicts = { parts, all };
    return all;
  }

  private build(): ConfigSnapshot {
    const kinds = new Map<string, KindSnapshot>();
    const parts: (readonly Conflict[])[] = [];
    for (const [kind, table] of [...this.tables].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const k = table.snapshot();
      if (k !== undefined) kinds.set(kind, k);
      parts.push(table.conflicts());
    }
    const conflicts = this.joinConflicts(parts);
    const timedOut = this.timedOut;
    // Sources still waited for, with what each can serve, frozen with this snapshot.
    const waiting = this.ledgers
      .filter((l) => (l.policy.required || !timedOut) && !l.servesAll && !l.retired && !this.unwaited.has(l))
      .map((l) => ({ ledger: l, missing: new Set(l.missingKinds()) }));
    // Ready for every kind whenever ready (nothing waited for): the ADS server relies on it to look
    // only at the kinds a snapshot moved once two in a row are ready.
    const readyFor = (kind: string): boolean =>
      waiting.every(
        ({ ledger, missing }) => !ledger.mayContribute(kind) || (!missing.has(kind) && !missing.has('*')),
      );
    return Object.freeze({
      generation: ++this.generation,
      version: linesDigest([...kinds.values()].map((k) => `${k.kind}=${k.version}`)),
      kinds,
      ready: waiting.length === 0,
      readyFor,
      waitingFor: waiting.map((w) => w.ledger.descriptor.name),
      budgetPassed: timedOut,
      sources: this.ledgers.map((l) => l.report()),
      conflicts,
    });
  }
}

function sameParts(a: readonly (readonly Conflict[])[], b: readonly (readonly Conflict[])[]): boolean {
  return a.length === b.length && a.every((part, i) => part === b[i]);
}

function sameReports(a: ConfigSnapshot, b: ConfigSnapshot): boolean {
  if (a.sources.length !== b.sources.length) return false;
  return a.sources.every((s, i) => {
    const o = b.sources[i];
    return (
      o !== undefined &&
      o.state === s.state &&
      o.priority === s.priority &&
      o.required === s.required &&
      o.revision === s.revision &&
      o.errors === s.errors &&
      o.rejections === s.rejections &&
      o.held === s.held &&
      o.lastError === s.lastError
    );
  });
}
