/**
 * CPU of an `xds` source over delta ADS (`delta: true`, as a regional meshmux reads a central
 * one) holding many objects, the source alone (no merge, no ADS):
 *
 *   npm run build && node dist/bench/delta-source-cost.js [--objects 50000] [--changes 10]
 *
 * A scripted upstream sends `--objects` ServiceEntries as the first answer, then responses of one
 * changed object each, encoded before they are timed. Printed: per response, the time from the
 * upstream's write to the source's snapshot that carries it, and the process's CPU over it.
 * Prints figures; asserts nothing.
 */
import { performance } from 'node:perf_hooks';
import { fakeServiceEntry, kindNamed } from '../test/support/fake-objects.js';
import { mcpAny } from '../test/support/faulty-responses.js';
import {
  deltaResponse,
  ScriptedDeltaUpstream,
  subscribedDeltaSource,
} from '../test/support/scripted-delta-upstream.js';
import { option } from './in-process.js';

const OBJECTS = Number(option('objects', '50000'));
const CHANGES = Number(option('changes', '10'));
const SE = kindNamed('ServiceEntry');
const SE_V1 = 'networking.istio.io/v1/ServiceEntry';

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function main(): Promise<void> {
  const upstream = await ScriptedDeltaUpstream.start();
  const recorder = await subscribedDeltaSource(upstream, 'central', 10_000);
  try {
    const first = Array.from({ length: OBJECTS }, (_, i) => {
      const object = fakeServiceEntry(`svc-${i}`, `svc-${i}.example.com`);
      return { name: `${object.namespace}/${object.name}`, any: mcpAny(SE, object) };
    });
    let t = performance.now();
    upstream.send(deltaResponse(SE_V1, first, 'first'));
    await recorder.status('synced');
    console.log(`${OBJECTS} ServiceEntries: first answer in ${(performance.now() - t).toFixed(0)} ms`);
    const ms: number[] = [];
    const cpu: number[] = [];
    for (let c = 0; c < CHANGES; c++) {
      const at = (c * 4099) % OBJECTS;
      const object = fakeServiceEntry(`svc-${at}`, `changed-${c}.example.com`);
      const response = deltaResponse(
        SE_V1,
        [{ name: `${object.namespace}/${object.name}`, any: mcpAny(SE, object) }],
        `change-${c}`,
      );
      const from = recorder.count;
      const usage = process.cpuUsage();
      t = performance.now();
      upstream.send(response);
      const snapshot = await recorder.snapshot(from);
      ms.push(performance.now() - t);
      const used = process.cpuUsage(usage);
      cpu.push((used.user + used.system) / 1000);
      const changed = [...snapshot.resources].find((r) => r.name === `svc-${at}`);
      if (changed === undefined || !Buffer.from(changed.body).includes(`changed-${c}.example.com`)) {
        throw new Error(`the snapshot after change ${c} does not carry it`);
      }
    }
    console.log(
      `one object changed: ${median(ms).toFixed(1)} ms p50 to the source's snapshot, ` +
        `${median(cpu).toFixed(1)} ms of CPU p50 (${CHANGES} changes: ${ms.map((m) => m.toFixed(0)).join(', ')} ms)`,
    );
  } finally {
    recorder.close();
    upstream.stop();
  }
}

await main();
