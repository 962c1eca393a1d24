/**
 * Waits with a deadline. Every wait in the tests goes through one of these (or a helper's own
 * `waitFor` with a timeout), so a broken behaviour fails with a message naming what never happened
 * instead of hanging the run. The message always says what was awaited and for how long.
 */
import { filter, firstValueFrom, timeout, type Observable } from 'rxjs';

/** The error every deadline here rejects with: `timed out after <ms> ms waiting for <what>`. */
export class DeadlineError extends Error {
  constructor(what: string, timeoutMs: number, detail?: string) {
    super(`timed out after ${timeoutMs} ms waiting for ${what}${detail === undefined ? '' : `; ${detail}`}`);
    this.name = 'DeadlineError';
  }
}

/** `promise`, or a {@link DeadlineError} naming `what` once `timeoutMs` have passed first. */
export function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineError(what, timeoutMs)), timeoutMs);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** The first value of `source$` (a current one included) for which `predicate` holds, within `timeoutMs`. */
export function firstMatch<T>(
  source$: Observable<T>,
  predicate: (value: T) => boolean,
  timeoutMs: number,
  what: string,
): Promise<T> {
  return firstValueFrom(
    source$.pipe(
      filter(predicate),
      timeout({
        first: timeoutMs,
        with: () => {
          throw new DeadlineError(what, timeoutMs);
        },
      }),
    ),
  );
}

/**
 * Resolves once `check()` holds, checking every `intervalMs`; for state only a poll can observe
 * (a metric, a page, a process). Rejects naming `what` (and the last `describe()`) after `timeoutMs`.
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  options: { intervalMs?: number; describe?: () => string | Promise<string> } = {},
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() > deadline) {
      throw new DeadlineError(
        what,
        timeoutMs,
        options.describe === undefined ? undefined : await options.describe(),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
}
