import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { processCounters } from '../../src/telemetry/process-counters.js';

const MiB = 1024 * 1024;

/**
 * Prints, from a process of its own, its peak resident memory and what \`getrusage\` says of it,
 * then its peak once it holds 64 MiB more.
 */
const CHILD = `
import { peakRssBytes } from ${JSON.stringify(new URL('../../src/telemetry/process-counters.js', import.meta.url).href)};
// The resident size first: the high-water mark read after it is at least that (read before, the
// reads in between could grow the resident size past it).
const rss = process.memoryUsage().rss;
const peak = peakRssBytes();
const rusage = process.resourceUsage().maxRSS * 1024;
const held = Buffer.alloc(64 * 1024 * 1024, 1);
console.log(JSON.stringify({ peak, rusage, rss, grown: peakRssBytes(), held: held[0] }));
`;

describe('peakRssBytes', () => {
  it("is a spawned process's own peak, not the peak of the larger process that spawned it", async () => {
    // This process holds 256 MiB resident while it spawns one that holds a few tens.
    const held = Buffer.alloc(256 * MiB, 1);
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CHILD]);
    assert.equal(held[held.length - 1], 1);
    const child = JSON.parse(stdout) as { peak: number; rusage: number; rss: number; grown: number };
    assert.ok(child.peak >= child.rss, `peak ${child.peak} below the current ${child.rss}`);
    assert.ok(child.peak < 200 * MiB, `the child's peak is ${(child.peak / MiB).toFixed(0)} MiB`);
    // And it follows the child's own growth.
    assert.ok(child.grown >= child.peak + 48 * MiB, `peak ${child.peak} → ${child.grown} with 64 MiB more`);
    if (process.platform === 'linux') {
      // What getrusage reports there: the parent's peak, carried across the fork and exec.
      assert.ok(child.rusage >= 256 * MiB, `getrusage said ${(child.rusage / MiB).toFixed(0)} MiB`);
    }
  });
});

describe('processCounters', () => {
  it('counts the page faults memory touched for the first time takes', () => {
    const loopDelay = monitorEventLoopDelay();
    const before = processCounters(loopDelay).minorPageFaults;
    // 32 MiB outside any pool, written through: 8,192 pages of 4 KiB, or 16 huge pages.
    const held = Buffer.allocUnsafeSlow(32 * MiB).fill(1);
    const after = processCounters(loopDelay).minorPageFaults;
    assert.equal(held[held.length - 1], 1);
    assert.ok(before > 0, `${before} page faults counted at first`);
    assert.ok(after - before >= 16, `${after - before} page faults for 32 MiB touched`);
  });
});
