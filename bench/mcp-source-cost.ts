/**
 * CPU of a Galley-era MCP source (`type: mcp`) holding many objects, the source alone (no merge,
 * no ADS):
 *
 *   npm run build && node dist/bench/mcp-source-cost.js [--objects 50000] [--changes 10]
 *     [--incremental]
 *
 * A fake Galley serves `--objects` ServiceEntries in full states; then states with one object
 * changed each, encoded before they are timed, are written to the source's stream one at a time.
 * Printed: per state, the time from the write to the source's snapshot that carries it, and the
 * process's CPU over it (the Galley's write of the bytes included, not its encoding).
 * `--incremental`: the source asks for incremental answers, and each change is one, of the changed
 * object alone. Prints figures; asserts nothing.
 */
import { performance } from 'node:perf_hooks';
import protobuf from 'protobufjs';
import { McpSource } from '../src/upstream/mcp/mcp-source.js';
import { FakeGalley } from '../test/support/fake-galley.js';
import { encodeMcpResource, fakeServiceEntry, kindNamed } from '../test/support/fake-objects.js';
import { galleyResources } from '../test/support/faulty-responses.js';
import { SourceEventRecorder } from '../test/support/source-event-recorder.js';
import { option } from './in-process.js';
import { SourceChangeTiming } from './source-change-timing.js';

const OBJECTS = Number(option('objects', '50000'));
const CHANGES = Number(option('changes', '10'));
/** The source asks for incremental answers, and each change is one. */
const INCREMENTAL = process.argv.includes('--incremental');
const SE = kindNamed('ServiceEntry');
const COLLECTION = SE.legacyCollection as string;

/** An incremental `Resources` carrying one object. */
function incrementalResources(resource: Uint8Array, nonce: string): Uint8Array {
  const w = protobuf.Writer.create();
  w.uint32((1 << 3) | 2).string(nonce);
  w.uint32((2 << 3) | 2).string(COLLECTION);
  w.uint32((3 << 3) | 2).bytes(resource);
  w.uint32((5 << 3) | 2).string(nonce);
  w.uint32(6 << 3).bool(true);
  return w.finish();
}

async function main(): Promise<void> {
  const objects = Array.from({ length: OBJECTS }, (_, i) =>
    fakeServiceEntry(`svc-${i}`, `svc-${i}.example.com`),
  );
  const galley = await FakeGalley.start({ collections: [COLLECTION] });
  galley.set('ServiceEntry', objects);
  const encoded = objects.map((o) => encodeMcpResource(SE, o, { createTime: { seconds: 1, nanos: 0 } }));
  const recorder = new SourceEventRecorder(
    new McpSource({
      name: 'galley',
      namespace: 'default',
      address: galley.address,
      kinds: ['ServiceEntry'],
      incremental: INCREMENTAL,
    }).events$,
  );
  try {
    const t = performance.now();
    await recorder.status('synced');
    console.log(`${OBJECTS} ServiceEntries: first full state in ${(performance.now() - t).toFixed(0)} ms`);
    // The same objects written as the timed states write them, so that only the changes are new.
    let from = recorder.count;
    galley.sendRaw(galleyResources(COLLECTION, encoded, 'base'));
    await recorder.snapshot(from);
    const timing = new SourceChangeTiming();
    for (let c = 0; c < CHANGES; c++) {
      const at = (c * 4099) % OBJECTS;
      encoded[at] = encodeMcpResource(SE, fakeServiceEntry(`svc-${at}`, `changed-${c}.example.com`), {
        createTime: { seconds: 1, nanos: 0 },
      });
      const state = INCREMENTAL
        ? incrementalResources(encoded[at], `change-${c}`)
        : galleyResources(COLLECTION, encoded, `change-${c}`);
      from = recorder.count;
      await timing.time(
        () => galley.sendRaw(state),
        () => recorder.snapshot(from),
        `svc-${at}`,
        `changed-${c}.example.com`,
      );
    }
    console.log(timing.report(INCREMENTAL ? ' in an incremental answer' : ' in a full state'));
  } finally {
    recorder.close();
    await galley.stop();
  }
}

await main();
