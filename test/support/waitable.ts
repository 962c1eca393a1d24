/**
 * The waiting of every fake peer: a test awaits a condition over the peer's recorded state with a
 * deadline that names what it waited for.
 */

/** Waits on a condition over an object that calls `notify()` when it changes. */
export class Waitable {
  private waiters: Array<{
    check: () => boolean;
    resolve: () => void;
    reject: (e: Error) => void;
    timer: NodeJS.Timeout;
  }> = [];

  /** Resolves once `check()` is true; rejects after `timeoutMs`. */
  waitFor(check: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = {
        check,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  protected notify(): void {
    for (const w of [...this.waiters]) {
      if (w.check()) {
        clearTimeout(w.timer);
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve();
      }
    }
  }
}
