/** Calls counted of one method, on every instance, until {@link CallCount.restore}. */
export interface CallCount {
  /** Calls since the count began. */
  readonly calls: number;
  /** Puts the method back as it was. */
  restore(): void;
}

/**
 * Counts the calls of `prototype[method]` from now on, on every instance, each still made as
 * before: how a test tells which way an object went without a hook in the code under test.
 */
export function countCalls<T extends object, K extends keyof T & string>(prototype: T, method: K): CallCount {
  const original = prototype[method] as unknown as (...args: unknown[]) => unknown;
  const count = { calls: 0 };
  const counted = function (this: unknown, ...args: unknown[]): unknown {
    count.calls++;
    return original.apply(this, args);
  };
  prototype[method] = counted as unknown as T[K];
  return {
    get calls() {
      return count.calls;
    },
    restore() {
      prototype[method] = original as unknown as T[K];
    },
  };
}
