import type { MeshmuxError } from '../../core/errors.js';
import type { SourceEvent, SourceSnapshotEvent, SourceState } from '../../core/source-event.js';

/**
 * The one place a source turns "what happened" into `SourceEvent`s, so every source type agrees on
 * the two rules of the contract in `UpstreamSource`:
 *
 * - **Stale or failing.** A source that lost (or cannot read) its upstream is `stale` once it has
 *   been `synced` in this run (served a complete state, or said so), `failing` before that: a
 *   state of some kinds only does not count.
 * - **Emit only on change.** A status is emitted when its state or its error text differs from the
 *   last one emitted; a state is emitted (by {@link serve}) when its kinds, revision or problems
 *   (errors and warnings) differ from the last one served. Serving an unchanged state after a
 *   failure only announces `synced` again.
 *
 * `restored` is never emitted here: the merge sets it when it restores a persisted state, and a
 * source only ever speaks of its own upstream.
 *
 * One tracker per subscription of `events$`: it holds that run's state and nothing else. Calls are
 * synchronous and emit synchronously, in call order.
 */
export class SourceStatusTracker {
  private current: SourceState = 'connecting';
  /** `state|error` of the last status emitted (or implied by a full snapshot). */
  private lastStatus: string | undefined;
  /** `kinds|revision|problems` of the last state served. */
  private lastServed: string | undefined;
  private everSynced = false;

  /**
   * @param emit where events go (the subscriber of `events$`).
   * @param completeKinds when given, a state whose `kinds` and `unserved` include all of these is complete, as
   *   one without `kinds` is (a source that always names its kinds, e.g. its descriptor's).
   */
  constructor(
    private readonly emit: (event: SourceEvent) => void,
    private readonly completeKinds?: ReadonlySet<string>,
  ) {}

  /** The state last announced. */
  get state(): SourceState {
    return this.current;
  }

  /** Whether the source was `synced` in this run: failures are then `stale`, not `failing`. */
  get hasSynced(): boolean {
    return this.everSynced;
  }

  /** Announces the run (or a new transport of it); the first call of every run. */
  connecting(): void {
    this.setStatus('connecting');
  }

  /**
   * Serves a state unless it is the one served last (same kinds, revision and problems); returns
   * whether it was emitted. A complete state means the source is `synced`: an unchanged one still
   * announces `synced` when a failure had been reported since.
   */
  serve(event: SourceSnapshotEvent): boolean {
    const key = `${kindsKey(event.kinds)}|${kindsKey(event.unserved ?? new Set())}|${event.revision}|${problemsKey(event)}`;
    if (key === this.lastServed) {
      if (this.isComplete(event)) this.synced();
      return false;
    }
    this.forward(event);
    this.lastServed = key;
    return true;
  }

  /**
   * Serves a state as is, without comparing it to the last one: for sources whose revision is not
   * a digest of the content (an upstream's `version_info` may repeat over different content) and
   * that compare the objects themselves. A complete state means the source is `synced`.
   */
  forward(event: SourceSnapshotEvent): void {
    this.lastServed = undefined;
    if (this.isComplete(event)) {
      this.everSynced = true;
      // The merge takes a complete state as synced: no status event is needed, only remembered.
      this.current = 'synced';
      this.lastStatus = statusKey('synced', undefined);
    }
    this.emit(event);
  }

  /** The upstream is in sync again; emitted only when the source was not `synced` already. */
  synced(): void {
    this.everSynced = true;
    this.setStatus('synced');
  }

  /** The upstream is lost or unreadable: `stale` once something was served, else `failing`. */
  failed(error: MeshmuxError): void {
    this.setStatus(this.everSynced ? 'stale' : 'failing', error);
  }

  /** A problem that changes no state: reported as the source's last error, in its current state. */
  report(error: MeshmuxError): void {
    this.setStatus(this.current, error);
  }

  private isComplete(event: SourceSnapshotEvent): boolean {
    if (event.kinds === undefined) return true;
    if (this.completeKinds === undefined) return false;
    for (const kind of this.completeKinds)
      if (!event.kinds.has(kind) && event.unserved?.has(kind) !== true) return false;
    return true;
  }

  private setStatus(state: SourceState, error?: MeshmuxError): void {
    const key = statusKey(state, error);
    if (key === this.lastStatus) return;
    this.lastStatus = key;
    this.current = state;
    this.emit(error === undefined ? { type: 'status', state } : { type: 'status', state, error });
  }
}

function statusKey(state: SourceState, error: MeshmuxError | undefined): string {
  return error === undefined ? state : `${state}|${error.describe()}`;
}

function kindsKey(kinds: ReadonlySet<string> | undefined): string {
  return kinds === undefined ? '*' : [...kinds].sort().join(',');
}

/**
 * The problems of each list served, described once: a source serves the same lists again on every
 * rescan that finds nothing new, and describing each problem again would cost as much each time.
 */
const describedLists = new WeakMap<readonly MeshmuxError[], string>();

function described(list: readonly MeshmuxError[]): string {
  let key = describedLists.get(list);
  if (key === undefined) {
    key = list.map((e) => e.describe()).join('\n');
    describedLists.set(list, key);
  }
  return key;
}

function problemsKey(event: SourceSnapshotEvent): string {
  return `E${described(event.errors)}\nW${described(event.warnings)}`;
}
