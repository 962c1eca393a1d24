/**
 * The malloc tunables the image (`ENV GLIBC_TUNABLES` in the Containerfile) and `npm start` give
 * node: the same in both, and taking effect in a real node process, whose buffers outside V8's heap
 * then sit on transparent huge pages and cost far fewer page faults. Hosts where the tunable can do
 * nothing (huge pages not granted on request, no glibc 2.35 or later) skip the second test, saying
 * which.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { imageEnv, npmStartScript } from '../support/image-env.js';

const run = promisify(execFile);

/**
 * Allocates what reading a large upstream state allocates outside V8's heap (a copy per object and
 * one large buffer), then prints the page faults that took and the huge pages the process holds.
 */
const ALLOCATE = `
const { readFileSync } = require('node:fs');
const before = process.resourceUsage().minorPageFault;
const kept = [];
for (let i = 0; i < 100000; i++) kept.push(new Uint8Array(600).fill(1));
kept.push(Buffer.alloc(32 * 1024 * 1024, 1));
const faults = process.resourceUsage().minorPageFault - before;
const rollup = readFileSync('/proc/self/smaps_rollup', 'utf8');
const hugeKb = Number(/AnonHugePages:\\s+(\\d+) kB/.exec(rollup)?.[1] ?? 0);
console.log(JSON.stringify({ faults, hugeKb, kept: kept.length }));
`;

interface Allocation {
  readonly faults: number;
  readonly hugeKb: number;
}

async function allocate(tunables: string | undefined): Promise<Allocation> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['GLIBC_TUNABLES'];
  if (tunables !== undefined) env['GLIBC_TUNABLES'] = tunables;
  const { stdout } = await run(process.execPath, ['-e', ALLOCATE], { env, timeout: 60_000 });
  return JSON.parse(stdout) as Allocation;
}

/** The kernel's transparent huge page mode (`always`, `madvise` or `never`), when it tells. */
async function hugePageMode(): Promise<string | undefined> {
  try {
    const text = await readFile('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
    return /\[(\w+)\]/.exec(text)?.[1];
  } catch {
    return undefined;
  }
}

/** The glibc node runs on, as major.minor, when it runs on glibc. */
function glibcVersion(): number | undefined {
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  const version = report.header?.glibcVersionRuntime;
  return version === undefined ? undefined : Number(/^\d+\.\d+/.exec(version)?.[0]);
}

describe("malloc's tunables in the shipped launch commands", () => {
  it('the image and npm start set the same ones', async () => {
    const image = await imageEnv('GLIBC_TUNABLES');
    const start = await npmStartScript();
    assert.match(image, /\bglibc\.malloc\.hugetlb=1\b/);
    assert.ok(start.startsWith(`GLIBC_TUNABLES=${image} node `), `npm start sets the image's: ${start}`);
  });

  it('put what node allocates outside its heap on huge pages, with fewer faults', async (t) => {
    const mode = await hugePageMode();
    const glibc = glibcVersion();
    // glibc asks only where the kernel grants huge pages on request: under `always` every process
    // has them already, and under `never` none does. musl and glibc before 2.35 know no such tunable.
    if (mode !== 'madvise') {
      t.skip(`the kernel's transparent huge pages are ${mode ?? 'not to be read'}, not madvise`);
      return;
    }
    if (glibc === undefined || glibc < 2.35) {
      t.skip(`this node runs on ${glibc === undefined ? 'no glibc' : `glibc ${glibc}`}, before 2.35`);
      return;
    }
    const tunables = await imageEnv('GLIBC_TUNABLES');
    const plain = await allocate(undefined);
    const tuned = await allocate(tunables);
    console.log(
      `# glibc ${glibc}; faults ${plain.faults} without the tunables, ${tuned.faults} with; ` +
        `huge pages ${plain.hugeKb} kB and ${tuned.hugeKb} kB`,
    );
    // About 90 MB allocated: with the tunables most of it sits on huge pages, without them none.
    assert.ok(
      tuned.hugeKb - plain.hugeKb >= 16 * 1024,
      `${tuned.hugeKb} kB on huge pages with ${tunables}, ${plain.hugeKb} kB without`,
    );
    assert.ok(tuned.faults < plain.faults / 2, `${tuned.faults} faults with, ${plain.faults} without`);
  });
});
