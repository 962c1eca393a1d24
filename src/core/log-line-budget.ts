/** How a budget says, once a window ends, how many lines it left out (instead of waiting for a line to name them). */
export interface LeftOutReport {
  /** Runs `work` once, `delayMs` from now, without holding the process open. */
  readonly schedule: (work: () => void, delayMs: number) => void;
  /** Logs the count of lines a window left out. */
  readonly log: (leftOut: number) => void;
}

/**
 * Bounds how many lines of one kind the whole server logs: up to `lines` in a window of
 * `windowMs`, the rest counted and named by the first line logged after them, or, with a
 * `report`, by a line of their own once their window ends. A flood of streams opened and reset
 * then costs a few lines a window, not one each, while a fleet's ordinary comings and goings (a
 * rolling restart of a few hundred istiods) are logged line by line.
 */
export class LogLineBudget {
  private windowStart = Number.NEGATIVE_INFINITY;
  private used = 0;
  private leftOut = 0;

  constructor(
    private readonly now: () => number,
    private readonly lines = 100,
    private readonly windowMs = 10_000,
    private readonly report?: LeftOutReport,
  ) {}

  /** Whether a line may be logged now; when it may, `leftOut` is how many were not since the last one. */
  allow(): { log: boolean; leftOut: number } {
    const at = this.now();
    if (at - this.windowStart >= this.windowMs) {
      this.windowStart = at;
      this.used = 0;
    }
    if (this.used >= this.lines) {
      if (this.leftOut++ === 0) {
        this.report?.schedule(() => this.reportLeftOut(), this.windowStart + this.windowMs - at);
      }
      return { log: false, leftOut: 0 };
    }
    this.used++;
    const leftOut = this.leftOut;
    this.leftOut = 0;
    return { log: true, leftOut };
  }

  private reportLeftOut(): void {
    // Named already when a line was logged before the report came due.
    if (this.leftOut === 0) return;
    const leftOut = this.leftOut;
    this.leftOut = 0;
    this.report?.log(leftOut);
  }
}
