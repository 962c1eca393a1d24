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
import { SourceChangeTiming } from './source-change-timing.js';

const OBJECTS = Number(option('objects', '50000'));
const CHANGES = Number(option('changes', '10'));
const SE = kindNamed('ServiceEntry');
const SE_V1 = 'networking.istio.io/v1/ServiceEntry';

async function main(): Promise<void> {
  const upstream = await ScriptedDeltaUpstream.start();
  const recorder = await subscribedDeltaSource(upstream, 'central', 10_000);
  try {
    const first = Array.from({ length: OBJECTS }, (_, i) => {
      const object = fakeServiceEntry(`svc-${i}`, `svc-${i}.example.com`);
      return { name: `${object.namespace}/${object.name}`, any: mcpAny(SE, object) };
    });
    const t = performance.now();
    upstream.send(deltaResponse(SE_V1, first, 'first'));
    await recorder.status('synced');
    console.log(`${OBJECTS} ServiceEntries: first answer in ${(performance.now() - t).toFixed(0)} ms`);
    const timing = new SourceChangeTiming();
    for (let c = 0; c < CHANGES; c++) {
      const at = (c * 4099) % OBJECTS;
      const object = fakeServiceEntry(`svc-${at}`, `changed-${c}.example.com`);
      const response = deltaResponse(
        SE_V1,
        [{ name: `${object.namespace}/${object.name}`, any: mcpAny(SE, object) }],
        `change-${c}`,
      );
      const from = recorder.count;
      await timing.time(
        () => upstream.send(response),
        () => recorder.snapshot(from),
        `svc-${at}`,
        `changed-${c}.example.com`,
      );
    }
    console.log(timing.report());
  } finally {
    recorder.close();
    upstream.stop();
  }
}

await main();
