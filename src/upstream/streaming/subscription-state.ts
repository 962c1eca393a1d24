import { MeshmuxError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { compareByName, type ConfigResource } from '../../core/resource.js';
import { truncateForLog } from '../../core/truncate-for-log.js';
import type { SourceEvent } from '../../core/source-event.js';
import type { KindDescriptor } from '../../schema/kinds.js';
import { revisionOf } from '../runtime/source-revision.js';
import { sourceClock, type SourceTiming } from '../runtime/source-clock.js';
import { SourceStatusTracker } from '../runtime/source-status-tracker.js';
import { appendAll } from '../../core/append-all.js';
import { ChunkedList, type ReadList } from '../../core/chunked-list.js';
import { ChannelNotes, type GoodRead } from './channel-notes.js';

/** Objects a patch may change for the channel's listing to be edited rather than listed anew. */
const EDITED_IN_PLACE = 32;

/**
 * One subscription of a source: a type URL (xDS) or a collection (legacy MCP). A kind may be
 * read through several channels (both spellings of its type URL); listed first is preferred.
 */
export interface SubscriptionChannel {
  /** Type URL or collection name; unique within the source. */
  readonly id: string;
  readonly kind: KindDescriptor;
}

/** The outcome of one upstream response for one channel. */
export interface ChannelUpdate {
  /**
   * The channel's complete new state of good objects, keyed as the caller names objects (MCP
   * name or delta resource name). Handed over: the state owns (and later alters) it, the caller
   * must neither alter nor keep it.
   */
  readonly resources: Map<string, ConfigResource>;
  /** Every key of `resources` is its object's `<namespace>/<name>` (no two keys name one object). */
  readonly keyedByName?: boolean;
  /** Objects of this response that were dropped, by the same keys; their previous good version stays. */
  readonly rejected: ReadonlyMap<string, MeshmuxError>;
  /** Dropped objects without a usable name (nothing to keep for them). */
  readonly unnamed: readonly MeshmuxError[];
  /**
   * Set when the response cannot be applied as a whole (some object cannot be named as an object
   * of the channel's kind): the channel then keeps its previous state untouched, and the other
   * fields are ignored. A response whose objects cannot all be named cannot say what it deletes.
   */
  readonly refused?: MeshmuxError | undefined;
  /** Things repaired or ignored in this response, beyond the notes of its objects. */
  readonly warnings: readonly MeshmuxError[];
  /**
   * What was pruned or tolerated in the objects of `resources`, by the same keys; handed over as
   * `resources` is. None when absent.
   */
  readonly notes?: ChannelNotes;
  /** The upstream's version of this state (`version_info`, `system_version_info`); may be empty. */
  readonly version: string;
}

/**
 * A change of a channel's last state, for a response known to be that state with a few objects
 * replaced, removed or added, all of them good (see {@link SubscriptionState.applyPatch}).
 */
export interface ChannelPatch {
  /** Keys of the objects the response no longer holds as they were (replaced or removed). */
  readonly removed: readonly string[];
  /** The objects it holds anew, by key; owned by the state from now on. */
  readonly upserted: ReadonlyMap<string, ConfigResource>;
  /** Of the objects of `upserted`, those with notes (see {@link ChannelNotes}), as read. */
  readonly noted?: ReadonlyMap<string, GoodRead>;
}

export interface SubscriptionStateOptions extends SourceTiming {
  readonly source: string;
  /** The upstream as messages name it (`xds://host:port`). */
  readonly upstream: string;
  /** Every channel the source subscribes, in preference order within a kind. */
  readonly channels: readonly SubscriptionChannel[];
  readonly emit: (event: SourceEvent) => void;
  readonly log: Logger;
  /**
   * How long a stream may take to answer every channel. After it, the kinds that answered are
   * served and the rest are reported mute (never served empty).
   */
  readonly syncTimeoutMs: number;
  /** Starts a timer and returns its cancel function. Default: the `scheduler`'s. */
  readonly startTimer?: (callback: () => void, ms: number) => () => void;
}

interface ChannelState {
  readonly channel: SubscriptionChannel;
  /** Owned: replaced by each full update, altered in place by patches. */
  resources: Map<string, ConfigResource>;
  keyedByName: boolean;
  errors: readonly MeshmuxError[];
  /** The keys of the objects the last response taken whole dropped (their previous versions kept). */
  rejected: ReadonlySet<string>;
  /** Of the last response taken whole, its warnings beyond the notes of its objects. */
  responseWarnings: readonly MeshmuxError[];
  /** What was pruned or tolerated in the objects of `resources`, kept up to date by patches. */
  notes: ChannelNotes;
  /** `responseWarnings` and the notes' warnings. */
  warnings: readonly MeshmuxError[];
  /** Answered on the current stream. */
  answered: boolean;
  /** The last response refused whole on the current stream before the channel answered. */
  refusal: MeshmuxError | undefined;
  /**
   * The objects of `resources` in its order, listed when first served and kept until they change:
   * a state sent again as it was is served as the same list. A patch edits it in place of a new
   * listing: the list it gives shares every chunk but those the patch fell in with the one before.
   */
  listed: ChunkedList<ConfigResource> | undefined;
}

/**
 * The last good state of one source's subscriptions, and the only place that turns upstream
 * responses into SourceEvents. Shared by every streaming source type so they all behave alike:
 *
 * - A stream (first or after a reconnect) is served only once every channel answered on it, as
 *   one snapshot covering every kind, so a resync is atomic and a resync with identical content
 *   changes nothing downstream; the source is then `synced`.
 * - No answer is not empty. When the per-stream budget passes first, a kind counts as answered
 *   when any of its channels (type-URL spellings) answered: if every kind did, the stream is
 *   served and `synced` as above (naming the mute spellings in a warning). Otherwise only the
 *   kinds that answered are served (a snapshot whose `kinds` lists exactly them, and none at all
 *   when nothing answered), and the source turns `failing` (never synced before) or `stale`,
 *   with an UNAVAILABLE error naming the mute channels and the upstream. Each later answer
 *   serves its kind at once and updates that error; the source is `synced` once every kind
 *   answered. A kind that never answered is never part of a snapshot, so it is never served empty.
 * - After that, each response replaces its channel and is served at once, for its kind only.
 * - A response refused whole (see {@link ChannelUpdate.refused}) changes nothing: the channel
 *   keeps its state, and counts as unanswered if it had not answered on this stream before.
 * - A disconnect never empties anything: it is a `stale` (or, before any sync, `failing`) status
 *   and every channel keeps its state until the next stream answers it.
 * - A kind read through several channels (type-URL spellings) is served from the channel that
 *   holds objects, preferring the one served last time, then the first listed; it is empty only
 *   when every channel is empty, so an empty answer for a spelling the upstream does not serve
 *   never deletes what the other spelling holds.
 */
export class SubscriptionState {
  private readonly channels = new Map<string, ChannelState>();
  private readonly kindChannels = new Map<string, ChannelState[]>();
  /** Per kind, the channel it was served from last time (for stickiness between spellings). */
  private readonly servedFrom = new Map<string, string>();
  /** Per kind, what was served last time. */
  private readonly served = new Map<string, ReadList<ConfigResource>>();
  private servedProblems: Problems = { mute: '', channels: [] };
  /** Status rules (stale or failing, emit only on change) shared with every other source. */
  private readonly tracker: SourceStatusTracker;
  private streamSynced = false;
  /** The current stream's sync budget passed before every channel answered. */
  private budgetPassed = false;
  private cancelTimer: (() => void) | undefined;
  private readonly startTimer: (callback: () => void, ms: number) => () => void;
  private lastVersion = '';

  constructor(private readonly options: SubscriptionStateOptions) {
    const clock = sourceClock(options.scheduler);
    this.startTimer = options.startTimer ?? ((callback, ms) => clock.after(ms, callback));
    this.tracker = new SourceStatusTracker(options.emit);
    for (const channel of options.channels) {
      const state: ChannelState = {
        channel,
        resources: new Map(),
        keyedByName: true,
        errors: [],
        rejected: NO_KEYS,
        responseWarnings: [],
        notes: new ChannelNotes(`${options.upstream} ${channel.id}`),
        warnings: [],
        answered: false,
        refusal: undefined,
        listed: undefined,
      };
      this.channels.set(channel.id, state);
      let list = this.kindChannels.get(channel.kind.key);
      if (list === undefined) this.kindChannels.set(channel.kind.key, (list = []));
      list.push(state);
    }
  }

  /** Announces the source; call once, before anything else. */
  start(): void {
    this.tracker.connecting();
  }

  /** Every channel id, in subscription order. */
  channelIds(): string[] {
    return [...this.channels.keys()];
  }

  /** Whether `id` is one of the subscribed channels. */
  has(id: string): boolean {
    return this.channels.has(id);
  }

  /** The kind read through a channel. */
  kindOf(id: string): KindDescriptor | undefined {
    return this.channels.get(id)?.channel.kind;
  }

  /** A channel's current good objects (for incremental protocols). Must not be altered. */
  resourcesOf(id: string): ReadonlyMap<string, ConfigResource> {
    return this.channels.get(id)?.resources ?? new Map<string, ConfigResource>();
  }

  /** A copy of the notes of a channel's objects (for an incremental response built from its state). */
  notesOf(id: string): ChannelNotes | undefined {
    return this.channels.get(id)?.notes.copy();
  }

  /**
   * Whether a channel's state holds every object under its own `namespace/name` (as a state of
   * the world does; not objects named by their delta names, as Nacos names them).
   */
  keyedByName(id: string): boolean {
    return this.channels.get(id)?.keyedByName ?? true;
  }

  /** Whether the current stream has answered a channel yet. */
  answered(id: string): boolean {
    return this.channels.get(id)?.answered ?? false;
  }

  /** A new stream is open: every channel must answer again before the stream counts as synced. */
  streamOpened(): void {
    for (const c of this.channels.values()) {
      c.answered = false;
      c.refusal = undefined;
    }
    this.streamSynced = false;
    this.budgetPassed = false;
    this.clearTimer();
    this.cancelTimer = this.startTimer(() => this.onSyncTimeout(), this.options.syncTimeoutMs);
    if (this.channels.size === 0) this.flushAll();
  }

  /**
   * Replaces one channel's state with an upstream response. Dropped objects keep their previous
   * good version. Returns the names of the objects kept that way. A refused update changes
   * nothing and is reported as the source's last error.
   */
  apply(id: string, update: ChannelUpdate): string[] {
    const state = this.channels.get(id);
    if (state === undefined) return [];
    if (update.refused !== undefined) {
      if (!state.answered) state.refusal = update.refused;
      this.report(update.refused);
      return [];
    }
    const restored = new Map<string, ConfigResource>();
    for (const name of update.rejected.keys()) {
      const previous = state.resources.get(name);
      if (previous !== undefined && !update.resources.has(name)) restored.set(name, previous);
    }
    const resources = restored.size === 0 ? update.resources : new Map([...update.resources, ...restored]);
    const notes = update.notes ?? new ChannelNotes(`${this.options.upstream} ${id}`);
    for (const name of restored.keys()) notes.adopt(name, state.notes);
    state.resources = resources;
    state.listed = undefined;
    state.keyedByName = update.keyedByName === true && (restored.size === 0 || state.keyedByName);
    state.errors = [...update.rejected.values(), ...update.unnamed];
    state.rejected = update.rejected.size === 0 ? NO_KEYS : new Set(update.rejected.keys());
    state.responseWarnings = update.warnings;
    state.notes = notes;
    state.warnings = joined([update.warnings, notes.warnings]);
    this.settle(state, update.version);
    return [...restored.keys()];
  }

  /**
   * Applies a response that is the channel's last state changed by `patch`, in time proportional
   * to the patch. Only for a state taken whole (no errors, no warnings but the notes of its
   * objects, keyed by name): returns false, changing nothing, when the channel's state is not such
   * a state or when an object of `upserted` is already held under its key without being among
   * `removed` (the response would hold it twice); the caller then applies the response as a full
   * update. `dropsAgain`: the response sends again, as they were, the entries the last one had
   * dropped, so the state may hold errors; not when the patch touches a key of those entries.
   */
  applyPatch(id: string, patch: ChannelPatch, version: string, dropsAgain = false): boolean {
    const state = this.channels.get(id);
    if (
      state === undefined ||
      !state.keyedByName ||
      (state.errors.length > 0 && !dropsAgain) ||
      state.responseWarnings.length > 0
    ) {
      return false;
    }
    if (state.rejected.size > 0) {
      for (const key of patch.removed) if (state.rejected.has(key)) return false;
      for (const key of patch.upserted.keys()) if (state.rejected.has(key)) return false;
    }
    const resources = state.resources;
    if (patch.upserted.size > 0) {
      const replaced = new Set(patch.removed);
      for (const key of patch.upserted.keys()) if (resources.has(key) && !replaced.has(key)) return false;
    }
    // The listing follows the map: a removed object leaves its place, a replaced one keeps it, a
    // new one goes last (what is served is sorted by name). Found by instance, which a walk of the
    // list's chunks finds without copying them.
    // Each edit finds its object by a walk of the listing: past a few dozen, listing anew is cheaper.
    let listed = patch.removed.length + patch.upserted.size <= EDITED_IN_PLACE ? state.listed : undefined;
    const at = (old: ConfigResource): number => (listed === undefined ? -1 : listed.indexOf(old));
    for (const key of patch.removed) {
      if (patch.upserted.has(key)) continue;
      const old = resources.get(key);
      if (old === undefined) continue;
      const i = at(old);
      listed = i < 0 ? undefined : listed?.removed(i);
      resources.delete(key);
    }
    for (const [key, resource] of patch.upserted) {
      const old = resources.get(key);
      if (old === undefined) listed = listed?.inserted(listed.length, resource);
      else {
        const i = at(old);
        listed = i < 0 ? undefined : listed?.replaced(i, resource);
      }
      resources.set(key, resource);
    }
    state.listed = listed;
    const notes = state.notes;
    if (!notes.empty || patch.noted !== undefined) {
      for (const key of patch.removed) if (!patch.upserted.has(key)) notes.drop(key);
      for (const key of patch.upserted.keys()) {
        const noted = patch.noted?.get(key);
        if (noted === undefined) notes.drop(key);
        else notes.note(key, noted);
      }
      state.warnings = notes.warnings;
    }
    this.settle(state, version);
    return true;
  }

  /** A channel's state was replaced or changed by an answer: serves it as the stream stands. */
  private settle(state: ChannelState, version: string): void {
    state.answered = true;
    state.refusal = undefined;
    if (version !== '') this.lastVersion = version;

    if (this.streamSynced) {
      this.serveKind(state.channel.kind.key);
      return;
    }
    if (this.budgetPassed) {
      // Mute kinds are still reported; what answered late is served at once, for its kind only.
      this.serveKind(state.channel.kind.key);
      if (this.unansweredKinds().length === 0) this.markSynced(this.served.size);
      else this.reportMute();
    } else if (this.unansweredChannels().length === 0) {
      this.flushAll();
    }
  }

  /** The stream ended. Everything stays served; the source is stale (or failing, before any sync). */
  streamClosed(error: MeshmuxError): void {
    this.clearTimer();
    this.streamSynced = false;
    this.tracker.failed(error);
  }

  /** A problem that changes no state (an undecodable response): reported as the source's last error. */
  report(error: MeshmuxError): void {
    this.tracker.report(error);
  }

  /** Stops the sync budget timer; call on teardown. */
  stop(): void {
    this.clearTimer();
  }

  private onSyncTimeout(): void {
    this.cancelTimer = undefined;
    if (this.streamSynced) return;
    this.budgetPassed = true;
    const muteKinds = this.unansweredKinds();
    if (muteKinds.length === 0) {
      // Every kind answered through some spelling: complete, the mute spellings are named as a warning.
      this.options.log.warn(
        { source: this.options.source, unanswered: this.unansweredChannels() },
        'upstream did not answer every spelling in time; serving each kind from the spelling that answered',
      );
      this.flushAll();
      return;
    }
    const kinds = new Set<string>();
    for (const [kind, list] of this.kindChannels) if (list.some((c) => c.answered)) kinds.add(kind);
    if (kinds.size > 0) this.serveTogether(kinds);
    this.options.log.warn(
      { source: this.options.source, unanswered: this.unansweredChannels(), servedKinds: kinds.size },
      'upstream did not answer every subscription in time; its mute kinds are not served until they answer',
    );
    this.reportMute();
  }

  /** Serves every kind that answered on this stream in one snapshot and marks the stream synced. */
  private flushAll(): void {
    this.clearTimer();
    const kinds = new Set<string>();
    for (const [kind, list] of this.kindChannels) if (list.some((c) => c.answered)) kinds.add(kind);
    this.serveTogether(kinds);
    this.markSynced(kinds.size);
  }

  /** Serves `kinds` in one snapshot. */
  private serveTogether(kinds: ReadonlySet<string>): void {
    const parts: ReadList<ConfigResource>[] = [];
    for (const kind of kinds) {
      const served = this.effective(kind);
      this.served.set(kind, served);
      parts.push(served);
    }
    // The kinds' lists joined by their chunks, none copied.
    this.emitSnapshot(
      kinds,
      parts.length === 1 ? (parts[0] as ReadList<ConfigResource>) : ChunkedList.joined(parts),
    );
  }

  private markSynced(kinds: number): void {
    this.clearTimer();
    this.streamSynced = true;
    let objects = 0;
    for (const list of this.served.values()) objects += list.length;
    this.options.log.info(
      { source: this.options.source, objects, kinds, version: truncateForLog(this.lastVersion) },
      this.tracker.hasSynced ? 'resynced with upstream' : 'synced with upstream',
    );
    this.tracker.synced();
  }

  /** The source is `failing` (never synced) or `stale`, with an error naming what stays mute. */
  private reportMute(): void {
    const mute = this.unansweredChannels().map((id) => {
      const refusal = this.channels.get(id)?.refusal;
      return refusal === undefined ? id : `${id} (its answers were rejected: ${refusal.message})`;
    });
    const error = new MeshmuxError(
      'UNAVAILABLE',
      `${this.options.upstream} did not answer ${mute.join(', ')} within ${this.options.syncTimeoutMs} ms; ` +
        'their kinds keep what they held and are not served until they answer',
      { file: this.options.upstream },
    );
    this.tracker.failed(error);
  }

  private serveKind(kind: string): void {
    const served = this.effective(kind);
    const before = this.served.get(kind);
    if (
      before !== undefined &&
      sameObjects(served, before) &&
      sameProblems(this.problems(), this.servedProblems)
    )
      return;
    this.served.set(kind, served);
    this.emitSnapshot(new Set([kind]), served);
  }

  private emitSnapshot(kinds: ReadonlySet<string>, resources: ReadList<ConfigResource>): void {
    // A channel's own arrays when it alone has any: a state with a warning per object is not
    // copied per change.
    const errors = joined([...this.channels.values()].map((c) => c.errors));
    let warnings = joined([...this.channels.values()].map((c) => c.warnings));
    const mute = this.budgetPassed ? this.unansweredChannels() : [];
    if (mute.length > 0) {
      warnings = [
        ...warnings,
        new MeshmuxError(
          'UNAVAILABLE',
          `no answer within ${this.options.syncTimeoutMs} ms for: ${mute.join(', ')}`,
          {
            file: this.options.source,
          },
        ),
      ];
    }
    this.servedProblems = this.problems();
    // The upstream's version may repeat over new content: what changed was judged above, per kind.
    this.tracker.forward({
      type: 'snapshot',
      kinds,
      resources,
      revision: this.lastVersion === '' ? revisionOf(resources) : this.lastVersion,
      errors,
      warnings,
    });
  }

  /** What a kind is served as: the objects of its preferred non-empty channel. */
  private effective(kind: string): ReadList<ConfigResource> {
    const list = this.kindChannels.get(kind) ?? [];
    const holding = list.filter((c) => c.resources.size > 0);
    const sticky = this.servedFrom.get(kind);
    const chosen = holding.find((c) => c.channel.id === sticky) ?? holding[0];
    if (chosen === undefined) {
      this.servedFrom.delete(kind);
      return [];
    }
    if (chosen.channel.id !== sticky && sticky !== undefined) {
      this.options.log.info(
        { source: this.options.source, kind, from: sticky, to: chosen.channel.id },
        'serving a kind from another spelling of its type URL',
      );
    }
    this.servedFrom.set(kind, chosen.channel.id);
    // In the upstream's order: the merge compares lists by identity and sorts what it serves, and
    // upstreams keep their order, so an unchanged state is the same list, pointer for pointer.
    if (chosen.keyedByName) return (chosen.listed ??= ChunkedList.filtered(chosen.resources.values()));
    // Two upstream names may denote one object (delta names vs. MCP names): the later one wins.
    const byName = new Map<string, ConfigResource>();
    for (const r of chosen.resources.values()) byName.set(r.key, r);
    return [...byName.values()].sort(compareByName);
  }

  /** Channels the current stream has not answered yet. */
  private unansweredChannels(): string[] {
    return [...this.channels.values()].filter((c) => !c.answered).map((c) => c.channel.id);
  }

  /** Kinds none of whose channels the current stream has answered yet. */
  private unansweredKinds(): string[] {
    const out: string[] = [];
    for (const [kind, list] of this.kindChannels) if (!list.some((c) => c.answered)) out.push(kind);
    return out;
  }

  /** What the source reports as it stands: the mute channels, if reported, and each channel's errors and warnings. */
  private problems(): Problems {
    return {
      mute: this.budgetPassed ? this.unansweredChannels().join('\n') : '',
      channels: [...this.channels.values()].map((c) => ({ errors: c.errors, warnings: c.warnings })),
    };
  }

  private clearTimer(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }
}

/** What a source reports besides its objects (see `SubscriptionState.problems`). */
interface Problems {
  readonly mute: string;
  readonly channels: ReadonlyArray<{
    readonly errors: readonly MeshmuxError[];
    readonly warnings: readonly MeshmuxError[];
  }>;
}

/**
 * Whether two reports say the same. The same arrays say the same without a look inside (a change
 * that left a channel's errors and warnings as they were, however many), others are compared by
 * their text.
 */
function sameProblems(a: Problems, b: Problems): boolean {
  return (
    a.mute === b.mute &&
    a.channels.length === b.channels.length &&
    a.channels.every((x, i) => {
      const y = b.channels[i];
      return y !== undefined && sameErrors(x.errors, y.errors) && sameErrors(x.warnings, y.warnings);
    })
  );
}

function sameErrors(a: readonly MeshmuxError[], b: readonly MeshmuxError[]): boolean {
  return a === b || (a.length === b.length && describedAll(a) === describedAll(b));
}

/** Each list's errors described, made once per list. */
const DESCRIBED = new WeakMap<readonly MeshmuxError[], string>();

function describedAll(list: readonly MeshmuxError[]): string {
  let text = DESCRIBED.get(list);
  if (text === undefined) DESCRIBED.set(list, (text = list.map((e) => e.describe()).join('\n')));
  return text;
}

/** The lists end to end: the one non-empty list itself when there is just one. */
function joined(lists: readonly (readonly MeshmuxError[])[]): readonly MeshmuxError[] {
  const full = lists.filter((l) => l.length > 0);
  if (full.length <= 1) return full[0] ?? NO_ERRORS;
  const out: MeshmuxError[] = [];
  for (const l of full) appendAll(out, l);
  return out;
}

const NO_ERRORS: readonly MeshmuxError[] = Object.freeze([]);
const NO_KEYS: ReadonlySet<string> = new Set();

/**
 * Whether two lists serve the same objects, in the same order: same names, versions and creation times. The
 * reader hands out one instance per unchanged object, so this is mostly pointer comparisons.
 */
function sameObjects(a: ReadList<ConfigResource>, b: ReadList<ConfigResource>): boolean {
  if (a.length !== b.length) return false;
  // Lists of one channel share the chunks no patch fell in: only the others are compared. A
  // stretch of another length in each moves the shared chunks after it: not in the same order.
  for (const { was, now } of ChunkedList.unsharedStretches(a, b)) {
    if (was.length !== now.length) return false;
    for (let i = 0; i < was.length; i++) {
      const x = was[i] as ConfigResource;
      const y = now[i] as ConfigResource;
      if (x === y) continue;
      if (
        compareByName(x, y) !== 0 ||
        x.version !== y.version ||
        x.createTime.seconds !== y.createTime.seconds ||
        x.createTime.nanos !== y.createTime.nanos
      ) {
        return false;
      }
    }
  }
  return true;
}
