/**
 * The memory a server holds once it has settled after a burst of work. Right after a sync, V8 still
 * holds the young generation the sync grew and the pages it emptied: about 20 MB whatever the
 * number of objects, which V8's memory reducer hands back some 5 to 20 s after allocation stops.
 * Read right after the sync, that is counted as memory per object; read once settled, it is not.
 */

/** One reading of a server's memory. */
export interface MemoryReading {
  readonly rssBytes: number;
}

export interface SettleOptions {
  /** Readings are this far apart (ms). */
  readonly everyMs: number;
  /** No reading before this counts as settled: V8's memory reducer waits several seconds first. */
  readonly leastMs: number;
  /** Given up after this long, the last reading taken as it is. */
  readonly mostMs: number;
  /** Two readings in a row this close (bytes) are settled. */
  readonly toleranceBytes: number;
}

export const SETTLE: SettleOptions = {
  everyMs: 5_000,
  leastMs: 20_000,
  mostMs: 45_000,
  toleranceBytes: 1024 * 1024,
};

/**
 * Reads `read()` every `everyMs` until two readings in a row agree within `toleranceBytes`, the
 * later at least `leastMs` after the first, or `mostMs` have passed; returns the last reading and
 * when it was taken (ms after the first).
 */
export async function settledMemory<T extends MemoryReading>(
  read: () => Promise<T>,
  options: SettleOptions = SETTLE,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<{ readonly reading: T; readonly afterMs: number }> {
  let last = await read();
  for (let at = options.everyMs; ; at += options.everyMs) {
    await sleep(options.everyMs);
    const now = await read();
    const still = Math.abs(now.rssBytes - last.rssBytes) <= options.toleranceBytes;
    last = now;
    if ((still && at >= options.leastMs) || at >= options.mostMs) return { reading: now, afterMs: at };
  }
}
