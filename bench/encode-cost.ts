/**
 * What encoding the objects of a served list for the first time costs, per object:
 *
 *   npm run build && node dist/bench/encode-cost.js [--objects 12000] [--rounds 21]
 *
 * A list of ServiceEntries as meshmux serves them (provenance annotations, two labels, bodies of
 * 420–470 bytes) is framed from nothing, each round with a new encoder, three ways: each object
 * into memory of its own (as the background encoding does while nobody is connected); the blocks of
 * a served list built by copying those encodings (what building a view's response cost while every
 * object was first encoded into memory of its own); and the blocks built as meshmux builds them,
 * each object encoded straight into the block that holds it. Prints microseconds per object (p50
 * and lowest of the rounds) and the ratios; asserts nothing, and checks that every way gives the
 * same bytes.
 */
import { makeResource, type ConfigResource } from '../src/core/resource.js';
import { FrameBlocks, type FramedSource } from '../src/downstream/frame-blocks.js';
import { ResourceEncoder } from '../src/downstream/resource-encoder.js';
import { KINDS } from '../src/schema/kinds.js';
import { option } from './in-process.js';
import { pinSelf } from './server-process.js';

const OBJECTS = Number(option('objects', '12000'));
const ROUNDS = Number(option('rounds', '21'));

function serviceEntry(i: number): ConfigResource {
  const name = `svc-${String(i).padStart(6, '0')}`;
  return makeResource({
    kind: 'networking.istio.io/ServiceEntry',
    namespace: `ns-${i % 40}`,
    name,
    labels: { app: name, zone: i % 3 === 0 ? 'east' : 'west' },
    annotations: { 'meshmux.io/source': 'u1', 'meshmux.io/source-version': `v${i}-0001` },
    createTime: { seconds: 1_700_000_000 + i, nanos: 0 },
    body: Buffer.alloc(420 + (i % 50), i & 0xff),
    origin: {},
  });
}

/** Microseconds per object of each round of `frame`, sorted; and the bytes of the last round. */
function timed(frame: (encoder: ResourceEncoder) => Uint8Array[]): { us: number[]; bytes: Buffer } {
  const us: number[] = [];
  let bytes = Buffer.alloc(0);
  for (let round = 0; round < ROUNDS; round++) {
    const encoder = new ResourceEncoder(KINDS);
    const started = performance.now();
    const out = frame(encoder);
    us.push(((performance.now() - started) * 1000) / OBJECTS);
    if (round === ROUNDS - 1) bytes = Buffer.concat(out);
  }
  return { us: us.sort((a, b) => a - b), bytes };
}

pinSelf(0);
const list = Array.from({ length: OBJECTS }, (_, i) => serviceEntry(i)).sort((a, b) =>
  a.namespace === b.namespace ? (a.name < b.name ? -1 : 1) : a.namespace < b.namespace ? -1 : 1,
);
const own = timed((encoder) => list.map((r) => encoder.framed(r)));
const copied = timed((encoder) => {
  // The encoder without its planning: every object framed into memory of its own, then copied.
  const source: FramedSource = {
    framed: (r) => encoder.framed(r),
    rehome: (r, block, offset, length) => encoder.rehome(r, block, offset, length),
  };
  return new FrameBlocks().chunks('view|kind', list, source);
});
const direct = timed((encoder) => new FrameBlocks().chunks('view|kind', list, encoder));
if (!own.bytes.equals(copied.bytes) || !own.bytes.equals(direct.bytes))
  throw new Error('the three ways framed different bytes');

const p50 = (us: number[]): number => us[Math.floor(us.length / 2)] ?? Number.NaN;
const line = (what: string, us: number[]): string =>
  `  ${what}: ${p50(us).toFixed(2)} µs per object p50, ${(us[0] ?? Number.NaN).toFixed(2)} lowest`;
console.log(
  `${OBJECTS} objects, ${ROUNDS} rounds each, ${(own.bytes.byteLength / 1e6).toFixed(1)} MB framed`,
);
console.log(line('each object into memory of its own', own.us));
console.log(line('blocks built from encodings of their own', copied.us));
console.log(line('blocks built, each object encoded into its block', direct.us));
console.log(
  `  encoded into the block / copied from memory of its own: ${(p50(direct.us) / p50(copied.us)).toFixed(2)}`,
);
