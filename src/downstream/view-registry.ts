import type { SchedulerLike, Subscription } from '../core/rx.js';
import type { ClientView } from './client-view.js';

export interface ViewRegistryOptions {
  /** Most distinct views kept at once, with clients or in their grace period. */
  readonly maxViews: number;
  /** How long a view outlives its last client, so a reconnecting istiod finds its responses built. */
  readonly graceMs: number;
  /** Runs the grace timers; virtual time in tests. */
  readonly scheduler: SchedulerLike;
  /** A view is gone: free everything kept for it. Called once per view id and lifetime. */
  readonly onFree: (viewId: string) => void;
}

interface Entry {
  view: ClientView;
  clients: number;
  /** Set while the view has no client: frees it when the grace period ends. */
  expiry?: Subscription;
}

/**
 * The views in use, counted by client. A view's id is derived from what clients claim (their
 * revision), so views must not outlive their clients: when the last one leaves, the view is freed
 * after a grace period (with the responses built for it), and at most `maxViews` views exist at
 * once. A new view that would exceed the cap takes the place of the view idle the longest; when
 * every view has clients, the new client is refused. Clients of one view id share one view object.
 */
export class ViewRegistry {
  private readonly entries = new Map<string, Entry>();
  /** Views without clients, longest idle first. */
  private readonly idle = new Map<string, Entry>();

  constructor(private readonly options: ViewRegistryOptions) {}

  /** Views kept (with clients or in their grace period). */
  get size(): number {
    return this.entries.size;
  }

  /** Views kept without clients, waiting for their grace period to end. */
  get idleViews(): number {
    return this.idle.size;
  }

  /** Ids of the views kept without clients, longest idle first. */
  idleIds(): IterableIterator<string> {
    return this.idle.keys();
  }

  /**
   * Counts one more client of `view`; returns the shared view object of its id, or undefined when
   * the cap is reached and every view has clients (the caller refuses the client).
   */
  acquire(view: ClientView): ClientView | undefined {
    const known = this.entries.get(view.id);
    if (known !== undefined) {
      known.clients++;
      this.wake(view.id, known);
      return known.view;
    }
    if (this.entries.size >= this.options.maxViews) {
      const oldest = this.idle.keys().next().value;
      if (oldest === undefined) return undefined;
      this.free(oldest);
    }
    this.entries.set(view.id, { view, clients: 1 });
    return view;
  }

  /**
   * Makes `view` the shared object of its id, for clients that acquire it from now on: a new
   * configuration's view of the same filter, whose place in the split of kinds (see
   * `ClientView.partition`) may differ from the one its clients were admitted with.
   */
  refresh(view: ClientView): void {
    const known = this.entries.get(view.id);
    if (known !== undefined) known.view = view;
  }

  /** Counts one client fewer of a view acquired before; the last one starts the grace period. */
  release(view: ClientView): void {
    const entry = this.entries.get(view.id);
    if (entry === undefined || entry.clients === 0) return;
    entry.clients--;
    if (entry.clients > 0) return;
    this.idle.set(view.id, entry);
    entry.expiry = this.options.scheduler.schedule(() => this.free(view.id), this.options.graceMs);
  }

  /** Frees every view (the server stops). */
  close(): void {
    for (const id of [...this.entries.keys()]) this.free(id);
  }

  private wake(id: string, entry: Entry): void {
    entry.expiry?.unsubscribe();
    delete entry.expiry;
    this.idle.delete(id);
  }

  private free(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.wake(id, entry);
    this.entries.delete(id);
    this.options.onFree(id);
  }
}
