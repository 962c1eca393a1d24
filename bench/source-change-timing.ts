/**
 * What the benchmarks of one source alone share: each change of one object timed from the
 * upstream's write to the source's snapshot that carries it, with the process's CPU over it.
 */
import { performance } from 'node:perf_hooks';
import type { SourceSnapshotEvent } from '../src/core/source-event.js';

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Changes timed one after the other. */
export class SourceChangeTiming {
  private readonly ms: number[] = [];
  private readonly cpu: number[] = [];

  /**
   * Times `write` (which makes the upstream send one change) until `snapshot` (the source's next
   * snapshot) resolves, and checks that the snapshot holds `name` with `marker` in its body.
   */
  async time(
    write: () => void,
    snapshot: () => Promise<SourceSnapshotEvent>,
    name: string,
    marker: string,
  ): Promise<void> {
    const usage = process.cpuUsage();
    const t = performance.now();
    write();
    const event = await snapshot();
    this.ms.push(performance.now() - t);
    const used = process.cpuUsage(usage);
    this.cpu.push((used.user + used.system) / 1000);
    const changed = [...event.resources].find((r) => r.name === name);
    if (changed === undefined || !Buffer.from(changed.body).includes(marker)) {
      throw new Error(`the snapshot after the change of ${name} does not carry it`);
    }
  }

  /** `one object changed<what>: …` with the medians and every change's time. */
  report(what = ''): string {
    return (
      `one object changed${what}: ${median(this.ms).toFixed(1)} ms p50 to the source's snapshot, ` +
      `${median(this.cpu).toFixed(1)} ms of CPU p50 (${this.ms.length} changes: ` +
      `${this.ms.map((m) => m.toFixed(0)).join(', ')} ms)`
    );
  }
}
