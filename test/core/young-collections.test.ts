import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { constants } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { runInNewContext } from 'node:vm';
import { YoungCollections, youngCollectionFunction } from '../../src/core/young-collections.js';
import { nextCollection } from '../support/gc-reports.js';

describe('YoungCollections', () => {
  it('runs one collection each time the bytes noted since the last reach the threshold', () => {
    let runs = 0;
    const collections = new YoungCollections(() => runs++, 1000);
    collections.received(400);
    collections.received(599);
    assert.equal(runs, 0);
    collections.received(1);
    assert.equal(runs, 1);
    // What went past the threshold does not carry over: the collection freed it.
    collections.received(2500);
    assert.equal(runs, 2);
    collections.received(999);
    assert.equal(runs, 2);
    assert.equal(collections.runs, 2);
  });

  it('waits for the end of a message unless twice the threshold went by inside one', () => {
    let runs = 0;
    const collections = new YoungCollections(() => runs++, 1000);
    // Bytes read, whether they end a message, and the collections run after them.
    const steps: Array<[number, boolean, number]> = [
      [1500, false, 0],
      [100, true, 1],
      [1999, false, 1],
      [1, false, 2],
      // A message's last bytes after a collection inside it are counted towards the next.
      [999, true, 2],
      [1, false, 2],
      [0, true, 3],
    ];
    for (const [i, [bytes, atBoundary, expected]] of steps.entries()) {
      collections.received(bytes, atBoundary);
      assert.equal(runs, expected, `after step ${i}`);
    }
  });

  it('leaves a collection out while V8 is marking, and starts counting again', () => {
    let runs = 0;
    let marking = true;
    const collections = new YoungCollections(
      () => runs++,
      1000,
      () => marking,
    );
    collections.received(1500);
    assert.equal(runs, 0);
    assert.equal(collections.skipped, 1);
    // The full collection that ends the marking freed those bytes: they are not counted again.
    marking = false;
    collections.received(999);
    assert.equal(runs, 0);
    collections.received(1);
    assert.equal(runs, 1);
    assert.equal(collections.runs, 1);
    assert.equal(collections.skipped, 1);
  });

  it('does nothing where no collection can be asked for', () => {
    const collections = new YoungCollections(undefined, 1);
    collections.received(10);
    assert.equal(collections.runs, 0);
  });
});

describe('youngCollectionFunction', () => {
  it('runs a young collection of this process, and leaves other contexts as they were', async () => {
    const hadOwn = typeof (globalThis as { gc?: unknown }).gc;
    const collect = youngCollectionFunction();
    assert.ok(collect !== undefined, 'this runtime offers a young collection');
    const young = nextCollection([constants.NODE_PERFORMANCE_GC_MINOR, constants.NODE_PERFORMANCE_GC_MAJOR]);
    collect();
    assert.equal(await young, constants.NODE_PERFORMANCE_GC_MINOR);
    assert.equal(typeof (globalThis as { gc?: unknown }).gc, hadOwn);
    // Only a process started with --expose-gc gives every context a collector.
    assert.equal(runInNewContext('typeof gc'), hadOwn === 'function' ? 'function' : 'undefined');
  });
});

/**
 * Run in a process of its own, as the setting is the process's: 32 MiB of network-sized array
 * buffers allocated and let go, then the bytes noted to the process's collections, five times;
 * prints how much of them each collection left allocated as it returned.
 */
const LEFT_AFTER_COLLECTION = `
import { youngCollections } from ${JSON.stringify(new URL('../../src/core/young-collections.js', import.meta.url).href)};
const collections = youngCollections();
const left = [];
for (let round = 0; round < 5; round++) {
  collections.received(64 * 1024 * 1024);
  const before = process.memoryUsage().arrayBuffers;
  let chunks = [];
  for (let i = 0; i < 512; i++) chunks.push(new ArrayBuffer(64 * 1024));
  chunks = undefined;
  const runs = collections.runs;
  collections.received(64 * 1024 * 1024);
  if (collections.runs !== runs + 1) throw new Error('no collection was run');
  left.push(process.memoryUsage().arrayBuffers - before);
}
console.log(JSON.stringify(left));
`;

/**
 * Run in a process of its own: a message of 17 MiB arriving in 64 KiB chunks, each let go once
 * noted, as the upstream streams do, three times; prints the most array-buffer memory allocated
 * above what there was before each message, and the collections run.
 */
const HELD_INSIDE_A_MESSAGE = `
import { youngCollections } from ${JSON.stringify(new URL('../../src/core/young-collections.js', import.meta.url).href)};
const collections = youngCollections();
collections.received(64 * 1024 * 1024);
const chunks = 272;
let most = 0;
for (let message = 0; message < 3; message++) {
  const before = process.memoryUsage().arrayBuffers;
  for (let i = 0; i < chunks; i++) {
    new Uint8Array(new ArrayBuffer(64 * 1024))[0] = i;
    most = Math.max(most, process.memoryUsage().arrayBuffers - before);
    collections.received(64 * 1024, i === chunks - 1);
  }
}
console.log(JSON.stringify({ most, runs: collections.runs }));
`;

/** Runs `source` as an ES module in a node process of its own; resolves to what it printed. */
async function runModule(source: string): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', source]);
  return stdout;
}

describe('youngCollections', () => {
  it('keeps the chunks of a large message allocated at once under 8 MiB', async () => {
    // Node 24's V8 can start a marking of the whole heap while a state's chunks arrive; 17 MiB of
    // them, allocated since the last collection, are enough on a large mesh.
    const stdout = await runModule(HELD_INSIDE_A_MESSAGE);
    const { most, runs } = JSON.parse(stdout) as { most: number; runs: number };
    assert.ok(most <= 8 * 1024 * 1024 + 64 * 1024, `${most} bytes of chunks let go were allocated at once`);
    // Two collections inside each message; with the tails carried over, one more in all.
    assert.ok(runs >= 7, `${runs} collections`);
  });

  it('frees the array buffers a collection finds dead before the collection returns', async () => {
    // V8 counts array-buffer bytes against the old generation's limit until their sweep is
    // finalized, and checks the limit as the collection ends: swept later, on a helper thread,
    // a whole upstream state's chunks would still count then.
    const stdout = await runModule(LEFT_AFTER_COLLECTION);
    const left = JSON.parse(stdout) as number[];
    assert.equal(left.length, 5);
    for (const [round, bytes] of left.entries())
      assert.ok(bytes < 1024 * 1024, `round ${round}: ${bytes} bytes of 32 MiB let go still allocated`);
  });
});
