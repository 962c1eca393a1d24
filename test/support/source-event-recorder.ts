import type { Observable, Subscription } from 'rxjs';
import type { SourceEvent, SourceSnapshotEvent, SourceStatusEvent } from '../../src/core/source-event.js';
import { XdsSource } from '../../src/upstream/xds/xds-source.js';
import type { XdsSourceOptions } from '../../src/upstream/xds/xds-source-options.js';

interface Waiter {
  readonly from: number;
  readonly predicate: (e: SourceEvent) => boolean;
  readonly resolve: (e: SourceEvent) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/**
 * Subscribes to a source's events and records them, so a test can await "the next snapshot
 * after this point" instead of sleeping. Call `close()` to unsubscribe (stops the source).
 */
export class SourceEventRecorder {
  readonly events: SourceEvent[] = [];
  private waiters: Waiter[] = [];
  private readonly subscription: Subscription;

  constructor(events$: Observable<SourceEvent>) {
    this.subscription = events$.subscribe({
      next: (e) => {
        this.events.push(e);
        const index = this.events.length - 1;
        for (const w of [...this.waiters]) {
          if (index >= w.from && w.predicate(e)) this.settle(w, e);
        }
      },
      error: (err: unknown) => {
        for (const w of [...this.waiters]) {
          clearTimeout(w.timer);
          w.reject(new Error(`the source errored, which it must never do: ${String(err)}`));
        }
        this.waiters = [];
      },
    });
  }

  /** How many events so far: pass it as `from` to wait only for later ones. */
  get count(): number {
    return this.events.length;
  }

  /** The first event at index `from` or later matching `predicate`. */
  next(predicate: (e: SourceEvent) => boolean, from = 0, timeoutMs = 15_000): Promise<SourceEvent> {
    const found = this.events.slice(from).find(predicate);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        from,
        predicate,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          const seen = this.events.slice(from).map(describe).join(', ');
          reject(new Error(`no matching event within ${timeoutMs} ms; saw: [${seen}]`));
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** The first snapshot at index `from` or later. */
  async snapshot(from = 0, timeoutMs?: number): Promise<SourceSnapshotEvent> {
    return (await this.next((e) => e.type === 'snapshot', from, timeoutMs)) as SourceSnapshotEvent;
  }

  /** The first status event at index `from` or later with the given state. */
  async status(state: SourceStatusEvent['state'], from = 0, timeoutMs?: number): Promise<SourceStatusEvent> {
    return (await this.next(
      (e) => e.type === 'status' && e.state === state,
      from,
      timeoutMs,
    )) as SourceStatusEvent;
  }

  /** The last snapshot so far. */
  lastSnapshot(): SourceSnapshotEvent | undefined {
    return this.events.findLast((e): e is SourceSnapshotEvent => e.type === 'snapshot');
  }

  close(): void {
    this.subscription.unsubscribe();
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(new Error('recorder closed'));
    }
    this.waiters = [];
  }

  private settle(w: Waiter, e: SourceEvent): void {
    clearTimeout(w.timer);
    this.waiters = this.waiters.filter((x) => x !== w);
    w.resolve(e);
  }
}

function describe(e: SourceEvent): string {
  return e.type === 'snapshot'
    ? `snapshot ${e.revision} (${e.resources.length} objects, ${e.errors.length} errors)`
    : `status ${e.state}${e.error === undefined ? '' : `: ${e.error.describe()}`}`;
}

/**
 * The events of an xds source named `upstream` reading `kinds` from `address` (the current spelling
 * of their type URLs unless `apiVersions` says otherwise), once it is synced.
 */
export async function syncedXdsSource(
  address: string,
  kinds: string[],
  apiVersions: XdsSourceOptions['apiVersions'] = 'current',
): Promise<SourceEventRecorder> {
  const recorder = new SourceEventRecorder(
    new XdsSource({
      name: 'upstream',
      namespace: 'default',
      address,
      kinds,
      apiVersions,
      reconnect: { initialDelay: 50, maxDelay: 400 },
    }).events$,
  );
  await recorder.status('synced');
  return recorder;
}
