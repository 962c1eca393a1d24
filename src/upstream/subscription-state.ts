import { MeshmuxError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { compareByName, type ConfigResource } from '../core/resource.js';
import type { SourceEvent, SourceState } from '../core/source-event.js';
import type { KindDescriptor } from '../schema/kinds.js';
import { revisionOf } from './source-revision.js';

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
   * name or delta resource name). Owned by the state from now on: must not be altered.
   */
  readonly resources: ReadonlyMap<string, ConfigResource>;
  /** Every key of `resources` is its object's `<namespace>/<name>` (no two keys name one object). */
  readonly keyedByName?: boolean;
  /** Objects of this response that were dropped, by the same keys; their previous good version stays. */
  readonly rejected: ReadonlyMap<string, MeshmuxError>;
  /** Dropped objects without a usable name (nothing to keep for them). */
  readonly unnamed: readonly MeshmuxError[];
  /** Things repaired or ignored in this response. */
  readonly warnings: readonly MeshmuxError[];
  /** The upstream's version of this state (`version_info`, `system_version_info`); may be empty. */
  readonly version: string;
}

export interface SubscriptionStateOptions {
  readonly source: string;
  /** Every channel the source subscribes, in preference order within a kind. */
  readonly channels: readonly SubscriptionChannel[];
  readonly emit: (event: SourceEvent) => void;
  readonly log: Logger;
  /** How long a stream may take to answer every channel before what it has is served. */
  readonly syncTimeoutMs: number;
}

interface ChannelState {
  readonly channel: SubscriptionChannel;
  resources: ReadonlyMap<string, ConfigResource>;
  keyedByName: boolean;
  errors: readonly MeshmuxError[];
  warnings: readonly MeshmuxError[];
  /** Answered on the current stream. */
  answered: boolean;
}

/**
 * The last good state of one source's subscriptions, and the only place that turns upstream
 * responses into SourceEvents. Shared by every streaming source type so they all behave alike:
 *
 * - A stream (first or after a reconnect) is served only once every channel answered on it, as
 *   one snapshot covering every kind, so a resync is atomic and a resync with identical content
 *   changes nothing downstream. A per-stream budget serves what answered if a channel stays mute.
 * - After that, each response replaces its channel and is served at once, for its kind only.
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
  private readonly served = new Map<string, readonly ConfigResource[]>();
  private servedProblems = '';
  private state: SourceState = 'connecting';
  private everSynced = false;
  private streamSynced = false;
  /** The current stream was served by the sync budget, not because every channel answered. */
  private syncedByTimeout = false;
  private syncTimer: NodeJS.Timeout | undefined;
  private lastVersion = '';

  constructor(private readonly options: SubscriptionStateOptions) {
    for (const channel of options.channels) {
      const state: ChannelState = {
        channel,
        resources: new Map(),
        keyedByName: true,
        errors: [],
        warnings: [],
        answered: false,
      };
      this.channels.set(channel.id, state);
      let list = this.kindChannels.get(channel.kind.key);
      if (list === undefined) this.kindChannels.set(channel.kind.key, (list = []));
      list.push(state);
    }
  }

  /** Announces the source; call once, before anything else. */
  start(): void {
    this.options.emit({ type: 'status', state: 'connecting' });
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

  /** Whether the current stream has answered a channel yet. */
  answered(id: string): boolean {
    return this.channels.get(id)?.answered ?? false;
  }

  /** A new stream is open: every channel must answer again before the stream counts as synced. */
  streamOpened(): void {
    for (const c of this.channels.values()) c.answered = false;
    this.streamSynced = false;
    this.syncedByTimeout = false;
    this.clearTimer();
    this.syncTimer = setTimeout(() => this.onSyncTimeout(), this.options.syncTimeoutMs);
    this.syncTimer.unref();
    if (this.channels.size === 0) this.flushAll();
  }

  /**
   * Replaces one channel's state with an upstream response. Dropped objects keep their previous
   * good version. Returns the names of the objects kept that way.
   */
  apply(id: string, update: ChannelUpdate): string[] {
    const state = this.channels.get(id);
    if (state === undefined) return [];
    const restored = new Map<string, ConfigResource>();
    for (const name of update.rejected.keys()) {
      const previous = state.resources.get(name);
      if (previous !== undefined && !update.resources.has(name)) restored.set(name, previous);
    }
    const resources = restored.size === 0 ? update.resources : new Map([...update.resources, ...restored]);
    const kept = [...restored.keys()];
    state.resources = resources;
    state.keyedByName = update.keyedByName === true && (restored.size === 0 || state.keyedByName);
    state.errors = [...update.rejected.values(), ...update.unnamed];
    state.warnings = update.warnings;
    state.answered = true;
    if (update.version !== '') this.lastVersion = update.version;

    if (!this.streamSynced) {
      if (this.unanswered().length === 0) this.flushAll();
      return kept;
    }
    this.serveKind(state.channel.kind.key);
    return kept;
  }

  /** The stream ended. Everything stays served; the source is stale (or failing, before any sync). */
  streamClosed(error: MeshmuxError): void {
    this.clearTimer();
    this.streamSynced = false;
    this.setState(this.everSynced ? 'stale' : 'failing', error);
  }

  /** A problem that changes no state (an undecodable response): reported as the source's last error. */
  report(error: MeshmuxError): void {
    this.options.emit({ type: 'status', state: this.state, error });
  }

  /** Stops the sync budget timer; call on teardown. */
  stop(): void {
    this.clearTimer();
  }

  private onSyncTimeout(): void {
    this.syncTimer = undefined;
    if (this.streamSynced) return;
    this.options.log.warn(
      { source: this.options.source, unanswered: this.unanswered() },
      'upstream did not answer every subscription in time; serving what it answered',
    );
    this.syncedByTimeout = true;
    this.flushAll();
  }

  /** Serves every kind that answered on this stream in one snapshot and marks the stream synced. */
  private flushAll(): void {
    this.clearTimer();
    this.streamSynced = true;
    const kinds = new Set<string>();
    for (const [kind, list] of this.kindChannels) if (list.some((c) => c.answered)) kinds.add(kind);
    const resources: ConfigResource[] = [];
    for (const kind of kinds) {
      const served = this.effective(kind);
      this.served.set(kind, served);
      resources.push(...served);
    }
    this.emitSnapshot(kinds, resources);
    const objects = resources.length;
    this.options.log.info(
      { source: this.options.source, objects, kinds: kinds.size, version: this.lastVersion },
      this.everSynced ? 'resynced with upstream' : 'synced with upstream',
    );
    this.everSynced = true;
    this.setState('synced');
  }

  private serveKind(kind: string): void {
    const served = this.effective(kind);
    if (sameObjects(served, this.served.get(kind) ?? []) && this.problemSignature() === this.servedProblems)
      return;
    this.served.set(kind, served);
    this.emitSnapshot(new Set([kind]), served);
  }

  private emitSnapshot(kinds: ReadonlySet<string>, resources: readonly ConfigResource[]): void {
    const errors: MeshmuxError[] = [];
    const warnings: MeshmuxError[] = [];
    for (const c of this.channels.values()) {
      errors.push(...c.errors);
      warnings.push(...c.warnings);
    }
    const mute = this.syncedByTimeout ? this.unanswered() : [];
    if (mute.length > 0) {
      warnings.push(
        new MeshmuxError(
          'UNAVAILABLE',
          `no answer within ${this.options.syncTimeoutMs} ms for: ${mute.join(', ')}`,
          {
            file: this.options.source,
          },
        ),
      );
    }
    this.servedProblems = this.problemSignature();
    this.options.emit({
      type: 'snapshot',
      kinds,
      resources,
      revision: this.lastVersion === '' ? revisionOf(resources) : this.lastVersion,
      errors,
      warnings,
    });
  }

  /** What a kind is served as: the objects of its preferred non-empty channel. */
  private effective(kind: string): ConfigResource[] {
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
    if (chosen.keyedByName) return [...chosen.resources.values()];
    // Two upstream names may denote one object (delta names vs. MCP names): the later one wins.
    const byName = new Map<string, ConfigResource>();
    for (const r of chosen.resources.values()) byName.set(`${r.namespace}/${r.name}`, r);
    return [...byName.values()].sort(compareByName);
  }

  /** Channels the current stream has not answered yet. */
  private unanswered(): string[] {
    return [...this.channels.values()].filter((c) => !c.answered).map((c) => c.channel.id);
  }

  private problemSignature(): string {
    const parts: string[] = this.syncedByTimeout ? this.unanswered() : [];
    for (const c of this.channels.values()) {
      for (const e of c.errors) parts.push(`E${e.describe()}`);
      for (const w of c.warnings) parts.push(`W${w.describe()}`);
    }
    return parts.join('\n');
  }

  private setState(state: SourceState, error?: MeshmuxError): void {
    if (state === this.state && error === undefined) return;
    this.state = state;
    this.options.emit(error === undefined ? { type: 'status', state } : { type: 'status', state, error });
  }

  private clearTimer(): void {
    if (this.syncTimer !== undefined) clearTimeout(this.syncTimer);
    this.syncTimer = undefined;
  }
}

/**
 * Whether two lists serve the same objects, in the same order: same names, versions and creation times. The
 * reader hands out one instance per unchanged object, so this is mostly pointer comparisons.
 */
function sameObjects(a: readonly ConfigResource[], b: readonly ConfigResource[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as ConfigResource;
    const y = b[i] as ConfigResource;
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
  return true;
}
