import type { SourceClock } from '../runtime/source-clock.js';
import { ExponentialBackoff, type BackoffPolicy } from '../streaming/exponential-backoff.js';

/**
 * From 100 ms, doubling, to 30 s, each delay drawn within ±50 %: a server that closes every
 * connection is dialled 5 to 8 times in its first 10 s and then about twice a minute, and
 * replicas that lost it together do not dial it in step.
 */
export const ZOOKEEPER_REDIAL_BACKOFF: BackoffPolicy = Object.freeze({
  initialMs: 100,
  maxMs: 30_000,
  multiplier: 2,
  jitter: 0.5,
});

/**
 * Decides when a ZooKeeper client may make its next connection. The client library dials again
 * as soon as a connection closes, and waits only once every server failed before completing a
 * handshake: a server that completes the handshake and then closes (one that enforces
 * authentication the client does not do) was dialled about 160 times a second.
 *
 * The first dial, and the first after a connection proved healthy, go at once; every later one
 * waits a backoff that grows until {@link healthy} is called. One pacer serves every client of a
 * watcher in turn, so replacing a client does not start the backoff over. Not thread-safe (none
 * of this is); the owner cancels what {@link schedule} returns on teardown.
 */
export class RedialPacer {
  private readonly backoff: ExponentialBackoff;
  private dials = 0;
  private lastDelayMs = 0;

  constructor(
    private readonly clock: SourceClock,
    policy: BackoffPolicy = ZOOKEEPER_REDIAL_BACKOFF,
    random: () => number = Math.random,
  ) {
    this.backoff = new ExponentialBackoff(policy, random);
  }

  /** Dials made since the last healthy connection (0 before the first). */
  get attempts(): number {
    return this.dials;
  }

  /** The wait before the last dial, 0 when it went at once. */
  get lastDelay(): number {
    return this.lastDelayMs;
  }

  /** Calls `dial` now or after the backoff's next delay, counting it; returns the cancel function. */
  schedule(dial: () => void): () => void {
    if (this.dials === 0) {
      this.lastDelayMs = 0;
      this.dials++;
      dial();
      return () => undefined;
    }
    this.lastDelayMs = Math.round(this.backoff.nextDelayMs());
    return this.clock.after(this.lastDelayMs, () => {
      this.dials++;
      dial();
    });
  }

  /**
   * The current connection proved healthy (it stayed up a while; a full read of the registry is
   * no proof, as a server may close each connection once it is read): the next dial goes at once
   * and the backoff starts over. Returns the dials it took.
   */
  healthy(): number {
    const took = this.dials;
    this.dials = 0;
    this.lastDelayMs = 0;
    this.backoff.reset();
    return took;
  }
}
