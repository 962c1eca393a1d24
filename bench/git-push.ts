/**
 * Time from `git push` to the git source's snapshot, for a repository of 5,000 files (one
 * ServiceEntry each), over file:// and git://: the first fetch and read, then single-file pushes
 * announced as a webhook would (`fetchNow`). The source alone, without merge and ADS; the
 * end-to-end figure through an istiod is printed by test/e2e/git.test.ts. Prints; asserts nothing.
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { SourceSnapshotEvent } from '../src/core/source-event.js';
import { GitSource } from '../src/upstream/git/git-source.js';
import { GitDaemon, TestRepo, serviceEntry } from '../test/support/git-fixtures.js';
import { tempDir } from '../test/support/meshmux-harness.js';
import { SourceEventRecorder } from '../test/support/source-event-recorder.js';

const FILES = 5_000;
const PUSHES = 10;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function measure(label: string, repo: TestRepo, url: string, cacheDir: string): Promise<void> {
  const source = new GitSource({
    name: 'bench',
    url,
    ref: 'main',
    defaultNamespace: 'default',
    intervalMs: 3_600_000,
    cacheDir,
  });
  const t0 = performance.now();
  const events = new SourceEventRecorder(source.events$);
  try {
    const first = await events.snapshot(0, 300_000);
    const cold = performance.now() - t0;
    const times: number[] = [];
    for (let i = 0; i < PUSHES; i++) {
      const n = String((i * 487) % FILES).padStart(4, '0');
      const mark = events.count;
      const sha = await repo.commitAndPush(
        {
          [`istio/team-${n.slice(0, 2)}/se-${n}.yaml`]: serviceEntry(
            `se-${n}`,
            'payments',
            `p${i}.example.com`,
          ),
        },
        `push ${i}`,
      );
      const pushed = performance.now();
      void source.fetchNow('bench');
      const snap = (await events.next(
        (e) => e.type === 'snapshot' && e.revision === sha,
        mark,
        60_000,
      )) as SourceSnapshotEvent;
      times.push(performance.now() - pushed);
      if (snap.resources.length !== FILES) throw new Error(`expected ${FILES} objects`);
    }
    console.log(
      `${label}: ${first.resources.length} objects; first fetch+read ${cold.toFixed(0)} ms; ` +
        `push -> snapshot median ${median(times).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms (${PUSHES} single-file pushes)`,
    );
  } finally {
    events.close();
  }
}

const { dir, dispose } = await tempDir('meshmux-bench-git-');
try {
  const repo = await TestRepo.create(dir, 'large');
  const files: Record<string, string> = {};
  for (let i = 0; i < FILES; i++) {
    const n = String(i).padStart(4, '0');
    files[`istio/team-${n.slice(0, 2)}/se-${n}.yaml`] = serviceEntry(
      `se-${n}`,
      'payments',
      `h${n}.example.com`,
    );
  }
  await repo.commitAndPush(files, `${FILES} files`);
  await measure('file://', repo, repo.fileUrl, path.join(dir, 'cache-file'));
  const daemon = await GitDaemon.start(dir);
  try {
    await measure('git://', repo, daemon.url(repo.remote), path.join(dir, 'cache-daemon'));
  } finally {
    await daemon.stop();
  }
} finally {
  await dispose();
}
