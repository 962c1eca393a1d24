/**
 * V8's concurrent marking fitted to the CPU a process may use: the budget read from affinity and
 * cgroup quotas (files of the test's own), the choice, and, in real node processes pinned to one
 * CPU with `taskset` (skipped where it cannot pin), the marking V8 then does.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { markingChoice } from '../../src/core/concurrent-marking.js';
import { cpuBudget } from '../../src/core/cpu-budget.js';
import { PACKAGE_ROOT } from '../../src/core/paths.js';

const dir = mkdtempSync(path.join(tmpdir(), 'meshmux-cpu-budget-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(relative: string, text: string): void {
  mkdirSync(path.dirname(path.join(dir, relative)), { recursive: true });
  writeFileSync(path.join(dir, relative), text);
}

describe('cpuBudget', () => {
  it('is the affinity without a quota, and a cgroup v2 quota set on the process’s cgroup or above it', () => {
    file('v2/kubepods/pod1/ctr/cpu.max', 'max 100000\n');
    file('v2/kubepods/pod1/cpu.max', '150000 100000\n');
    file('v2/kubepods/cpu.max', 'max 100000\n');
    const budget = (cpus: number, root: string) =>
      cpuBudget({ cpus, cgroupRoot: path.join(dir, root), procSelfCgroup: '0::/kubepods/pod1/ctr\n' });
    assert.deepEqual(budget(8, 'v2'), { cpus: 1.5, boundBy: '/kubepods/pod1' });
    // Fewer CPUs to run on than the quota allows: the affinity binds.
    assert.deepEqual(budget(1, 'v2'), { cpus: 1, boundBy: 'affinity' });
    assert.deepEqual(budget(4, 'none'), { cpus: 4, boundBy: 'affinity' });
  });

  it('reads a cgroup v1 quota of the cpu controller, -1 being none', () => {
    for (const [cgroup, quota] of [
      ['docker/abc', '50000'],
      ['docker', '-1'],
    ]) {
      file(`v1/cpu,cpuacct/${cgroup}/cpu.cfs_quota_us`, `${quota}\n`);
      file(`v1/cpu,cpuacct/${cgroup}/cpu.cfs_period_us`, '100000\n');
    }
    const membership = '12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n';
    assert.deepEqual(cpuBudget({ cpus: 2, cgroupRoot: path.join(dir, 'v1'), procSelfCgroup: membership }), {
      cpus: 0.5,
      boundBy: 'cpu,cpuacct:/docker/abc',
    });
    const unlimited = '4:cpu,cpuacct:/docker\n';
    assert.equal(cpuBudget({ cpus: 2, cgroupRoot: path.join(dir, 'v1'), procSelfCgroup: unlimited }).cpus, 2);
  });
});

describe('markingChoice', () => {
  const one = { cpus: 1, boundBy: 'affinity' };
  const two = { cpus: 2, boundBy: 'affinity' };
  it('marks concurrently with two CPUs or more, not with less, unless node was told either way', () => {
    assert.deepEqual(markingChoice(one, []), { concurrent: false, explicit: false, budget: one });
    assert.equal(markingChoice({ cpus: 1.5, boundBy: '/' }, []).concurrent, false);
    assert.equal(markingChoice(two, ['--max-semi-space-size=8']).concurrent, true);
    assert.deepEqual(markingChoice(one, ['--concurrent-marking']), {
      concurrent: true,
      explicit: true,
      budget: one,
    });
    assert.equal(markingChoice(two, ['--no_concurrent_marking']).concurrent, false);
    assert.equal(markingChoice(two, ['--no-concurrent-marking', '--concurrent-marking']).concurrent, true);
  });
});

/** Whether this machine can pin a process to one CPU. */
const CAN_PIN = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

/**
 * Runs node pinned to CPU 0 with V8's marking traced, allocating enough for several markings of
 * the old generation; with `fit`, meshmux's fitting runs first. Returns the KB marked concurrently.
 */
function concurrentlyMarkedKb(fit: boolean): number {
  const module = path.join(PACKAGE_ROOT, 'dist/src/core/concurrent-marking.js');
  const script = `
    const { fitMarkingToCpu } = await import(${JSON.stringify(module)});
    if (${fit}) fitMarkingToCpu();
    const keep = [];
    for (let r = 0; r < 120; r++) {
      const a = [];
      for (let i = 0; i < 50000; i++) a.push({ i, s: 'x' + i });
      keep.push(a);
      if (keep.length > 20) keep.shift();
    }
  `;
  const run = spawnSync(
    'taskset',
    ['-c', '0', process.execPath, '--trace-incremental-marking', '--input-type=module', '-e', script],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } },
  );
  assert.equal(run.status, 0, run.stderr);
  // Node 20's V8 reports "Marked <n>KB on background threads", later ones "concurrent <n>KB".
  let kb = 0;
  for (const m of run.stdout.matchAll(/Marked (\d+)KB on background threads|concurrent (\d+)KB/g))
    kb = Math.max(kb, Number(m[1] ?? m[2]));
  assert.match(run.stdout, /IncrementalMarking/, 'the workload started a marking');
  return kb;
}

describe('fitMarkingToCpu', () => {
  it(
    'leaves a process on one CPU marking on its main thread only',
    { skip: !CAN_PIN && 'taskset cannot pin here' },
    () => {
      // On a loaded machine the marker threads may not get the CPU before the main thread is done
      // marking: the default is tried a few times, and has to show concurrent marking once.
      let byDefault = 0;
      for (let attempt = 0; attempt < 5 && byDefault === 0; attempt++)
        byDefault = concurrentlyMarkedKb(false);
      assert.ok(byDefault > 0, 'V8 marks concurrently on one CPU by default');
      assert.equal(concurrentlyMarkedKb(true), 0);
    },
  );
});
