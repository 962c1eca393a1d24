import type { Logger } from '../core/logger.js';
import type { ReplicaSignal } from './etcd-signals.js';

/** What the merge offers about held updates (the merge engine implements it). */
export interface HeldUpdates {
  /** Applies the held update of `source` if `digest` names it. */
  confirmHeld(source: string, digest: string): 'applied' | 'differs' | 'none';
}

/** What a replica knows of a confirmation made elsewhere that it could not apply (yet). */
export interface SharedConfirmation {
  readonly source: string;
  readonly digest: string;
  /** The replica where the operator confirmed it. */
  readonly from: string;
  readonly atMs: number;
  /** `waiting`: no update held here yet; `differs`: the update held here is another one. */
  readonly state: 'waiting' | 'differs';
}

/** How long a confirmation waits for the same update to be held here (it may arrive a little later). */
export const CONFIRMATION_WINDOW_MS = 60_000;

/**
 * Applies on this replica what the operator decided on another: a confirmation of a held update
 * (applied only when the update held here has the same digest; a different one is reported and
 * left held), and a "fetch now" for a source a push notification reached elsewhere. A
 * confirmation that arrives before the update it names is held here waits for it for
 * {@link CONFIRMATION_WINDOW_MS}.
 */
export class ReplicaDecisions {
  private readonly open = new Map<string, SharedConfirmation>();

  constructor(
    private readonly held: HeldUpdates,
    private readonly refresh: (source: string) => void,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** A signal from another replica. */
  onSignal(signal: ReplicaSignal): void {
    if (signal.kind === 'refresh') {
      this.log.info(
        { source: signal.source, from: signal.replica },
        'another replica received a push notification: fetching',
      );
      this.refresh(signal.source);
      return;
    }
    if (signal.digest === undefined) return;
    this.open.set(signal.source, {
      source: signal.source,
      digest: signal.digest,
      from: signal.replica,
      atMs: signal.atMs,
      state: 'waiting',
    });
    this.retry();
  }

  /** The held updates may have changed (a new snapshot): tries the confirmations still open. */
  retry(): void {
    const now = this.now();
    for (const [source, c] of this.open) {
      if (now - c.atMs > CONFIRMATION_WINDOW_MS) {
        if (c.state === 'waiting') this.open.delete(source);
        continue;
      }
      const outcome = this.held.confirmHeld(source, c.digest);
      if (outcome === 'applied') {
        this.open.delete(source);
        this.log.warn(
          { source, digest: c.digest, from: c.from },
          'applied a held update confirmed on another replica',
        );
      } else if (outcome === 'differs' && c.state !== 'differs') {
        this.open.set(source, { ...c, state: 'differs' });
        this.log.warn(
          { source, digest: c.digest, from: c.from },
          'another replica confirmed a held update that differs from the one held here: left held',
        );
      }
    }
  }

  /** Confirmations made elsewhere not applied here, for `/debug/state`. */
  report(): SharedConfirmation[] {
    return [...this.open.values()];
  }
}
