import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';

/** Where the budget is read from; the defaults are this process's. Tests give files of their own. */
export interface CpuBudgetSources {
  /** CPUs the process may run on (its affinity). Default `os.availableParallelism()`. */
  readonly cpus?: number;
  /** Where cgroups are mounted: the v2 hierarchy, and v1's controllers under it. Default `/sys/fs/cgroup`. */
  readonly cgroupRoot?: string;
  /** The text of `/proc/self/cgroup`. Default read from there. */
  readonly procSelfCgroup?: string;
}

/** The CPUs the process may use, and what bounds them. */
export interface CpuBudget {
  /** Cores' worth of CPU time the process may use at once: affinity or a cgroup's quota, the lower. */
  readonly cpus: number;
  /** `affinity` when the CPUs it may run on bound it, else the cgroup whose `cpu.max` does. */
  readonly boundBy: string;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** A `cpu.max` (`<quota> <period>`, or `max <period>`) as cores, undefined without a quota. */
function quotaOf(text: string | undefined): number | undefined {
  const [quota, period] = (text ?? '').trim().split(/\s+/);
  if (quota === undefined || quota === 'max' || period === undefined) return undefined;
  const q = Number(quota);
  const p = Number(period);
  return Number.isFinite(q) && Number.isFinite(p) && q > 0 && p > 0 ? q / p : undefined;
}

/** cgroup v1's quota of a `cpu` cgroup directory as cores (`cfs_quota_us` -1: none). */
function v1QuotaOf(dir: string): number | undefined {
  const quota = readText(path.join(dir, 'cpu.cfs_quota_us'));
  const period = readText(path.join(dir, 'cpu.cfs_period_us'));
  return quota === undefined || period === undefined
    ? undefined
    : quotaOf(`${quota.trim()} ${period.trim()}`);
}

/**
 * The CPU the process may use: the CPUs it may run on, lowered by the CPU quota of its cgroup or
 * of any cgroup above it, as Kubernetes and container runtimes set a CPU limit (cgroup v2's
 * `cpu.max`, or v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us`).
 */
export function cpuBudget(sources: CpuBudgetSources = {}): CpuBudget {
  let best: CpuBudget = { cpus: sources.cpus ?? availableParallelism(), boundBy: 'affinity' };
  const root = sources.cgroupRoot ?? '/sys/fs/cgroup';
  const membership = sources.procSelfCgroup ?? readText('/proc/self/cgroup') ?? '';
  const lower = (cores: number | undefined, where: string): void => {
    if (cores !== undefined && cores < best.cpus) best = { cpus: cores, boundBy: where };
  };
  for (const line of membership.split('\n')) {
    // `<id>:<controllers>:<path>`: v2's is `0::<path>`; v1's cpu controller may share its line.
    const [, controllers, own] = /^[0-9]+:([^:]*):(.*)$/.exec(line.trim()) ?? [];
    if (controllers === undefined || own === undefined) continue;
    const v1 = controllers.split(',').includes('cpu');
    if (controllers !== '' && !v1) continue;
    // The quota that binds may be set on any cgroup from the process's own up to the root.
    for (let dir = own === '' ? '/' : own; ; dir = path.posix.dirname(dir)) {
      if (v1) lower(v1QuotaOf(path.join(root, controllers, dir)), `${controllers}:${dir}`);
      else lower(quotaOf(readText(path.join(root, dir, 'cpu.max'))), dir);
      if (dir === '/' || dir === '.') break;
    }
  }
  return best;
}
