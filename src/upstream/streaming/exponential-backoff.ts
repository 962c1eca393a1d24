/** How long to wait between attempts to reach an upstream. */
export interface BackoffPolicy {
  /** First delay. Default 500 ms. */
  readonly initialMs: number;
  /** Cap of the delay before jitter. Default 60 s. */
  readonly maxMs: number;
  /** Growth of the delay per failed attempt. Default 1.5. */
  readonly multiplier: number;
  /** Each delay is drawn uniformly from `interval × (1 ± jitter)`. Default 0.5. */
  readonly jitter: number;
}

/** istiod's reconnect policy for config sources (spec §1.10); meshmux dials its upstreams the same way. */
export const DEFAULT_BACKOFF: BackoffPolicy = Object.freeze({
  initialMs: 500,
  maxMs: 60_000,
  multiplier: 1.5,
  jitter: 0.5,
});

/**
 * Jittered exponential backoff that never gives up. Callers ask for the next delay after each
 * failure and `reset()` once the upstream proved healthy (it answered), so a flapping peer is
 * retried quickly while a dead or refusing one is retried less and less often.
 */
export class ExponentialBackoff {
  private interval: number;

  constructor(
    private readonly policy: BackoffPolicy = DEFAULT_BACKOFF,
    private readonly random: () => number = Math.random,
  ) {
    this.interval = policy.initialMs;
  }

  /** The delay before the next attempt; grows the interval for the one after. */
  nextDelayMs(): number {
    const delta = this.policy.jitter * this.interval;
    const delay = this.interval - delta + this.random() * 2 * delta;
    this.interval = Math.min(this.interval * this.policy.multiplier, this.policy.maxMs);
    return delay;
  }

  /** Starts over from the initial interval. */
  reset(): void {
    this.interval = this.policy.initialMs;
  }
}
