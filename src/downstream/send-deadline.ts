import type { SchedulerLike, Subscription } from '../core/rx.js';

export interface SendDeadlineOptions {
  /** Measures time and runs the checks; virtual time in tests. */
  readonly scheduler: SchedulerLike;
  /** How long the oldest write may stay unflushed before the peer counts as stalled. */
  readonly stallAfterMs: number;
  /** How long the oldest write may stay unflushed before the stream is given up. */
  readonly timeoutMs: number;
  /** The oldest write has not flushed within `stallAfterMs`; called once per write. */
  readonly onStall: () => void;
  /** The oldest write has not flushed within `timeoutMs`; called once, then the deadline stops. */
  readonly onTimeout: (pendingMs: number) => void;
}

/**
 * The send deadline of one stream. Writes on one HTTP/2 stream flush in the order they were made,
 * so only the oldest unflushed one is timed: one scheduled check per stream, whatever the number
 * of writes. A peer that keeps reading never reaches either limit, however large its responses
 * are, as long as each flushes within them.
 */
export class SendDeadline {
  /** Start times of the unflushed writes, oldest first. */
  private readonly pending: number[] = [];
  private check: Subscription | undefined;
  /** Whether `onStall` ran for the current oldest write. */
  private stallReported = false;
  private stopped = false;

  constructor(private readonly options: SendDeadlineOptions) {}

  /** A write was handed to the transport. */
  written(): void {
    if (this.stopped) return;
    this.pending.push(this.options.scheduler.now());
    if (this.pending.length === 1) this.arm();
  }

  /** The oldest unflushed write flushed. */
  flushed(): void {
    if (this.stopped || this.pending.shift() === undefined) return;
    this.stallReported = false;
    this.arm();
  }

  /** Stops timing (the stream ended). Idempotent. */
  stop(): void {
    this.stopped = true;
    this.pending.length = 0;
    this.check?.unsubscribe();
    this.check = undefined;
  }

  private arm(): void {
    this.check?.unsubscribe();
    this.check = undefined;
    const oldest = this.pending[0];
    if (oldest === undefined) return;
    const limit = this.stallReported ? this.options.timeoutMs : this.options.stallAfterMs;
    const delay = Math.max(0, oldest + limit - this.options.scheduler.now());
    this.check = this.options.scheduler.schedule(() => this.expire(), delay);
  }

  private expire(): void {
    const oldest = this.pending[0];
    if (this.stopped || oldest === undefined) return;
    const pendingMs = this.options.scheduler.now() - oldest;
    if (pendingMs >= this.options.timeoutMs) {
      this.stop();
      this.options.onTimeout(pendingMs);
      return;
    }
    if (!this.stallReported && pendingMs >= this.options.stallAfterMs) {
      this.stallReported = true;
      this.options.onStall();
    }
    this.arm();
  }
}
