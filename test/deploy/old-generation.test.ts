/**
 * The old generation's first room that the image's entry point and `npm start` give node
 * (`--initial-old-space-size`): the same in both, and, in processes of the node running the tests,
 * a heap growing within it marked not once where node's own sizing marks it (meshmux then collects
 * once when first ready: `start-collection.test.ts`, `container-entrypoint.test.ts`).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { imageEntrypoint, npmStartScript } from '../support/image-env.js';

const run = promisify(execFile);

const FLAG = /--initial-old-space-size=(\d+)\b/;

/**
 * Keeps a million small objects (some 190 MB of heap, as a start keeps what it reads) and prints
 * how many times V8 marked the whole heap meanwhile (a marking's steps or its end).
 */
const GROW = `
const { PerformanceObserver, constants } = require('node:perf_hooks');
let marked = 0;
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = e.detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MAJOR || kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) marked++;
  }
});
observer.observe({ entryTypes: ['gc'] });
const kept = [];
for (let i = 0; i < 1000000; i++) kept.push({ i, name: 'object-' + i, labels: { app: 'a' + (i % 100) } });
// A marking begun meanwhile ends within a few turns of an idle loop, and is counted by then.
setTimeout(() => {
  observer.disconnect();
  console.log(JSON.stringify({ marked, heapMb: process.memoryUsage().heapUsed / 1e6, kept: kept.length }));
}, 300);
`;

async function grow(nodeArgs: readonly string[]): Promise<{ marked: number; heapMb: number }> {
  const { stdout } = await run(process.execPath, [...nodeArgs, '-e', GROW], { timeout: 120_000 });
  return JSON.parse(stdout) as { marked: number; heapMb: number };
}

describe('the old generation of the shipped launch commands', () => {
  it('the image and npm start give node the same first room for it', async () => {
    const entry = await imageEntrypoint();
    const start = await npmStartScript();
    const fromImage = FLAG.exec(entry.nodeArgs.join(' '))?.[1];
    const fromStart = FLAG.exec(start)?.[1];
    assert.ok(fromImage !== undefined, `the entry point gives it: ${entry.nodeArgs.join(' ')}`);
    assert.equal(fromStart, fromImage, `npm start gives the entry point's: ${start}`);
  });

  it('lets a heap grow within it without marking it, where node alone marks it', async () => {
    const flag = FLAG.exec(await npmStartScript())?.[0];
    assert.ok(flag !== undefined);
    // One after the other: V8 sizes the heap from the time its work takes.
    const alone = await grow([]);
    const shipped = await grow([flag]);
    console.log(
      `# ${shipped.heapMb.toFixed(0)} MB kept: ${alone.marked} marking(s) of the heap by node alone, ${shipped.marked} with ${flag}`,
    );
    assert.ok(shipped.heapMb < Number(FLAG.exec(flag)?.[1]), 'the heap stays within the room');
    assert.equal(shipped.marked, 0);
    assert.ok(alone.marked >= 1, 'node alone marks a heap of this size: the flag is what spares it');
  });
});
