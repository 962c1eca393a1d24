import type { SchedulerLike } from '../../core/rx.js';

/**
 * Time as a source sees it: what it waits for (settle windows, grace periods, polls, backoffs,
 * budgets) and what it stamps. Sources take an rxjs `SchedulerLike` and read time only through
 * the clock made of it, so tests run them on virtual time.
 */
export interface SourceClock {
  /** Milliseconds since the epoch: the scheduler's `now()`, virtual in tests. */
  now(): number;
  /**
   * Calls `callback` once, `ms` from now; returns its cancel function (idempotent). A pending call
   * never keeps the process alive by itself: whoever owns it cancels it on teardown.
   */
  after(ms: number, callback: () => void): () => void;
}

/** The wall clock, with unref'd timers: what every source uses unless given a scheduler. */
export const SYSTEM_CLOCK: SourceClock = {
  now: () => Date.now(),
  after: (ms, callback) => {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** The clock of `scheduler`; the {@link SYSTEM_CLOCK} when none is given. */
export function sourceClock(scheduler: SchedulerLike | undefined): SourceClock {
  if (scheduler === undefined) return SYSTEM_CLOCK;
  return {
    now: () => scheduler.now(),
    after: (ms, callback) => {
      const action = scheduler.schedule(callback, Math.max(0, ms));
      return () => action.unsubscribe();
    },
  };
}

/** The option every source and streaming part takes for its time; not part of any configuration file. */
export interface SourceTiming {
  /** Times what the source waits for and stamps; default the wall clock (virtual time in tests). */
  readonly scheduler?: SchedulerLike | undefined;
}
