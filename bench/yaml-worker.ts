/**
 * What reading YAML on the worker thread costs and buys: a file of many ServiceEntries (default
 * 5 MB; `node dist/bench/yaml-worker.js 20` for 20 MB) read in process (in one go, and in 10 ms
 * slices) and through the worker (its first read, which starts it, then warm), each with the
 * longest event-loop delay the main thread saw meanwhile. Asserts nothing.
 */
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  readYamlDocuments,
  readYamlDocumentsInSlices,
  type ReadYamlResult,
} from '../src/schema/yaml-reader.js';
import { YamlWorkerPool } from '../src/schema/yaml-worker-pool.js';
import { plainServiceEntry } from '../test/support/hostile-files.js';

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
  const delay = monitorEventLoopDelay({ resolution: 1 });
  // A timer keeps the loop turning, so a turn the read blocks shows as delay.
  const ticker = setInterval(() => undefined, 1);
  delay.enable();
  const started = performance.now();
  const result = await read();
  const ms = performance.now() - started;
  delay.disable();
  clearInterval(ticker);
  console.log(
    `${what.padEnd(34)} ${ms.toFixed(0).padStart(6)} ms, ${result.resources.length} objects, ${result.errors.length} errors; longest event-loop delay ${(delay.max / 1e6).toFixed(1)} ms`,
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
