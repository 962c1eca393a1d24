import type { SourceClock } from '../runtime/source-clock.js';

/** How much of the main thread reading one upstream may take (see {@link ReadPacer}). */
export interface ReadPacing {
  /** The share of the main thread's time the upstream's reading may take over time, in (0, 1]. */
  readonly share: number;
  /**
   * The most it saves up, in ms of main-thread time, and what it starts with. A read costs the
   * time it took less the share it earned meanwhile: with a share of a half, one read of twice
   * this goes unpaced after a quiet while.
   */
  readonly burstMs: number;
  /** The longest wait after one read, however long that read took. */
  readonly maxWaitMs: number;
}

/**
 * Half the main thread, with a second saved up (a first state of the world that takes up to 2 s
 * is not paced); a wait of at most 2 s. A source that
 * answers every ACK with a large state of the world in which everything changed took the main
 * thread back as soon as its last response was handled: every other source's change, and every
 * istiod's push, waited for one of its responses at each step.
 */
export const DEFAULT_READ_PACING: ReadPacing = Object.freeze({
  share: 0.5,
  burstMs: 1_000,
  maxWaitMs: 2_000,
});

/**
 * The shortest wait taken: a stream just over its share reads on until it owes a wait this long, so a
 * steady stream of small reads waits now and then rather than a timer's turn after every chunk.
 */
const MIN_WAIT_MS = 5;

/**
 * The main-thread time one upstream's reading has left, as a token bucket: it earns `share` of
 * every millisecond that passes, up to `burstMs`, and each read (a chunk of the stream and the
 * messages it completes, handled synchronously) spends the time it took. While the balance is
 * below zero, the stream is not read: the upstream's next response waits in the connection's
 * flow-control window, and what the others have to do (a file's edit, a push to an istiod, a
 * step of a timer) runs meanwhile. A response is never cut, nor held once read: the wait comes
 * after it, so nothing is deferred but the reading of the next bytes.
 *
 * In a steady stream of responses that each take `t` ms, the stream waits `t·(1 − share)/share`
 * after each (`t` for a half); a source that reads little never waits, and one quiet for
 * `burstMs/share` has its whole burst again (a first state of the world, a resync).
 */
export class ReadPacer {
  private balance: number;
  private at: number;

  constructor(
    private readonly clock: SourceClock,
    private readonly pacing: ReadPacing = DEFAULT_READ_PACING,
  ) {
    this.balance = pacing.burstMs;
    this.at = clock.now();
  }

  /** Runs `read` (one chunk's reading and the handling of what it completes), charging its time. */
  run(read: () => void): void {
    const started = this.earn();
    try {
      read();
    } finally {
      const ended = this.clock.now();
      this.at = ended;
      // The read spent its time while it earned its share of it. A clock stepped back reads as no
      // time; one stepped forward costs at most the longest wait.
      const spent = Math.max(0, ended - started) * (1 - this.pacing.share);
      this.balance = Math.max(this.balance - spent, -this.pacing.maxWaitMs * this.pacing.share);
    }
  }

  /**
   * How long reading must wait from now for the balance to be back at zero, ms; 0: read on, also
   * for a wait shorter than {@link MIN_WAIT_MS} (the debt stays, and the next read adds to it).
   */
  waitMs(): number {
    this.earn();
    const ms = this.balance >= 0 ? 0 : Math.min(this.pacing.maxWaitMs, -this.balance / this.pacing.share);
    return ms < Math.min(MIN_WAIT_MS, this.pacing.maxWaitMs) ? 0 : ms;
  }

  /**
   * Calls `resume` once reading may go on, and returns the cancel function; returns undefined,
   * calling nothing, when it may go on now.
   */
  hold(resume: () => void): (() => void) | undefined {
    const ms = this.waitMs();
    return ms <= 0 ? undefined : this.clock.after(ms, resume);
  }

  /** Adds what the time passed since the last look earned; returns now. */
  private earn(): number {
    const now = this.clock.now();
    const passed = Math.max(0, now - this.at);
    this.at = now;
    this.balance = Math.min(this.pacing.burstMs, this.balance + passed * this.pacing.share);
    return now;
  }
}
