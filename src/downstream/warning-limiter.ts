/**
 * Rate-limits one stream's repeated warnings: per kind of warning, the first is logged and the
 * next ones at most once per `intervalMs`, saying how many were left out meanwhile. A client that
 * sends a thousand NACKs a second costs a log line every few seconds, not a thousand.
 */
export class WarningLimiter {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly now: () => number,
    private readonly intervalMs = 10_000,
  ) {}

  /**
   * Whether a warning of this kind may be logged now; when it may, `suppressed` is how many were
   * left out since the last one logged. Kinds are a closed set chosen by the caller.
   */
  allow(kind: string): { log: boolean; suppressed: number } {
    const at = this.now();
    const entry = this.last.get(kind);
    if (entry === undefined || at - entry.at >= this.intervalMs) {
      const suppressed = entry?.suppressed ?? 0;
      this.last.set(kind, { at, suppressed: 0 });
      return { log: true, suppressed };
    }
    entry.suppressed++;
    return { log: false, suppressed: 0 };
  }
}
