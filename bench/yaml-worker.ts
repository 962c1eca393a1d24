/**
 * What reading YAML on the worker thread costs and buys: a file of many ServiceEntries (default
 * 5 MB; `node dist/bench/yaml-worker.js 20` for 20 MB) read in process (in one go, and in 10 ms
 * slices) and through the worker (its first read, which starts it, then warm), each with the
 * time the main thread was busy and its longest stall meanwhile. Asserts nothing.
 */
import { loadavg } from 'node:os';
import {
  readYamlDocuments,
  readYamlDocumentsInSlices,
  type ReadYamlResult,
} from '../src/schema/yaml-reader.js';
import { YamlWorkerPool } from '../src/schema/yaml-worker-pool.js';
import { aliasBomb, plainServiceEntry } from '../test/support/hostile-files.js';

const MB = Number(process.argv[2] ?? 5);
const OPTIONS = { file: 'bench.yaml', defaultNamespace: 'default' };

function text(bytes: number): string {
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length < bytes; i++) {
    const doc = `---\n${plainServiceEntry(`bulk-${i}`)}`;
    parts.push(doc);
    length += doc.length;
  }
  return parts.join('');
}

async function measure(what: string, read: () => ReadYamlResult | Promise<ReadYamlResult>): Promise<void> {
  // The longest gap between two ticks of a 1 ms timer: how long the loop could not turn.
  let last = performance.now();
  let longestGap = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    longestGap = Math.max(longestGap, now - last);
    last = now;
  }, 1);
  await new Promise<void>((resolve) => setTimeout(resolve, 5));
  longestGap = 0;
  const started = performance.now();
  const utilization = performance.eventLoopUtilization();
  const result = await read();
  const ms = performance.now() - started;
  // Time the main thread's loop was busy (not waiting for events) during the read.
  const busyMs = performance.eventLoopUtilization(utilization).active;
  // One more tick, so a read that blocked the loop throughout counts as the gap it caused.
  await new Promise<void>((resolve) => setTimeout(resolve, 5));
  clearInterval(ticker);
  console.log(
    `${what.padEnd(34)} ${ms.toFixed(0).padStart(6)} ms, ${result.resources.length} objects, ${result.errors.length} errors; main thread busy ${busyMs.toFixed(0)} ms, longest stall ${longestGap.toFixed(1)} ms`,
  );
}

const yaml = text(MB * 1024 * 1024);
console.log(
  `# ${(yaml.length / 1024 / 1024).toFixed(1)} MB of ServiceEntries; load average ${loadavg()[0]?.toFixed(2)}`,
);
const pool = new YamlWorkerPool();
for (let round = 1; round <= 3; round++) {
  await measure(`in process, one go (round ${round})`, () => readYamlDocuments(yaml, OPTIONS));
  await measure(`in process, 10 ms slices (round ${round})`, () => readYamlDocumentsInSlices(yaml, OPTIONS));
  await measure(`worker${round === 1 ? ', cold' : ''} (round ${round})`, () => pool.read(yaml, OPTIONS));
}
// The hostile file of test/e2e/hostile-files.test.ts: 2,000 alias bombs, then a valid document.
const bombs = [
  ...Array.from({ length: 2000 }, (_, i) => aliasBomb(`bomb-${i}`)),
  plainServiceEntry('after'),
].join('---\n');
console.log(`# ${(bombs.length / 1024 / 1024).toFixed(1)} MB of 2,000 alias bombs`);
for (let round = 1; round <= 2; round++) {
  await measure(`bombs, 10 ms slices (round ${round})`, () => readYamlDocumentsInSlices(bombs, OPTIONS));
  await measure(`bombs, worker (round ${round})`, () => pool.read(bombs, OPTIONS));
}
const tiny = plainServiceEntry('tiny');
for (const [what, read] of [
  ['tiny text in process', (): Promise<ReadYamlResult> => Promise.resolve(readYamlDocuments(tiny, OPTIONS))],
  ['tiny text through the worker', (): Promise<ReadYamlResult> => pool.read(tiny, OPTIONS)],
] as const) {
  const started = performance.now();
  for (let i = 0; i < 200; i++) await read();
  console.log(`${what.padEnd(34)} ${((performance.now() - started) / 200).toFixed(2)} ms each (200 reads)`);
}
await pool.close();
