import { setFlagsFromString } from 'node:v8';
import { cpuBudget, type CpuBudget } from './cpu-budget.js';

/** What {@link fitMarkingToCpu} decided. */
export interface MarkingChoice {
  /** Whether V8 marks the old generation on threads of its own beside the main thread. */
  readonly concurrent: boolean;
  /** Node was given `--concurrent-marking` or `--no-concurrent-marking`: that stands. */
  readonly explicit: boolean;
  readonly budget: CpuBudget;
}

/** The last `--[no-]concurrent-marking` among node's own arguments and `NODE_OPTIONS`, if any. */
function explicitChoice(args: readonly string[]): boolean | undefined {
  let choice: boolean | undefined;
  for (const arg of args) {
    const flag = arg.replace(/_/g, '-');
    if (flag === '--concurrent-marking') choice = true;
    else if (flag === '--no-concurrent-marking') choice = false;
  }
  return choice;
}

/**
 * Whether V8 should mark the heap concurrently with `budget` CPUs, given node's own arguments and
 * `NODE_OPTIONS` (`nodeArgs`): as either flag there says, else only with two CPUs or more.
 */
export function markingChoice(budget: CpuBudget, nodeArgs: readonly string[]): MarkingChoice {
  const given = explicitChoice(nodeArgs);
  return { concurrent: given ?? budget.cpus >= 2, explicit: given !== undefined, budget };
}

let applied: MarkingChoice | undefined;

/**
 * Fits V8's marking of the heap to the CPU the process may use, once per process (see
 * {@link markingChoice}). With fewer than two CPUs (its affinity, or a cgroup's CPU limit) the
 * threads V8 marks on beside the main thread only take turns with it on the same CPU, and a step
 * of the main thread's marking waits for them: steps of 16–24 ms for 64 KB of marking were seen
 * under churn on one CPU, and the collector took about half of the event loop's longest turns.
 * Concurrent marking is then turned off (the main thread marks in small steps of its own).
 */
export function fitMarkingToCpu(): MarkingChoice {
  if (applied !== undefined) return applied;
  const choice = markingChoice(cpuBudget(), [
    ...process.execArgv,
    ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/),
  ]);
  if (!choice.explicit && !choice.concurrent) setFlagsFromString('--no-concurrent-marking');
  applied = choice;
  return choice;
}
