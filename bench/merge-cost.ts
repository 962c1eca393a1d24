/**
 * Cost of a merge per changed object with 50k objects held: one source holds 50k ServiceEntry-like
 * objects, a second source overlaps 5% of them; we time single-object changes and 1% batches.
 * Events cover one kind, as an xDS upstream's per-type responses do. Prints figures; asserts nothing.
 */
import { queueScheduler, Subject } from 'rxjs';
import { makeResource, type ConfigResource } from '../src/core/resource.js';
import type { SourceEvent } from '../src/core/source-event.js';
import { MergeEngine } from '../src/merge/merge-engine.js';

const KIND = 'networking.istio.io/ServiceEntry';
const TOTAL = 50_000;

function object(i: number, revision: number): ConfigResource {
  return makeResource({
    kind: KIND,
    namespace: `ns-${i % 200}`,
    name: `svc-${i}`,
    labels: { app: `svc-${i}` },
    annotations: {},
    createTime: { seconds: 1_700_000_000, nanos: 0 },
    body: new TextEncoder().encode(`hosts: svc-${i}.example.com rev ${revision} ${'x'.repeat(400)}`),
    origin: {},
  });
}

function snapshot(resources: ConfigResource[], revision: string): SourceEvent {
  return { type: 'snapshot', kinds: new Set([KIND]), resources, revision, errors: [], warnings: [] };
}

const a = new Subject<SourceEvent>();
const b = new Subject<SourceEvent>();
const engine = new MergeEngine(
  [
    {
      descriptor: { name: 'a', type: 'bench', defaultNamespace: 'default' },
      events$: a,
      policy: { priority: 1 },
    },
    { descriptor: { name: 'b', type: 'bench', defaultNamespace: 'default' }, events$: b },
  ],
  { scheduler: queueScheduler, syncTimeoutMs: 0 },
);
engine.start();

const state = Array.from({ length: TOTAL }, (_, i) => object(i, 0));
let t = performance.now();
a.next(snapshot(state, 'r0'));
b.next(
  snapshot(
    state.slice(0, TOTAL / 20).map((_, i) => object(i, 99)),
    'b0',
  ),
);
const cold = performance.now() - t;

const rounds = 200;
t = performance.now();
for (let r = 1; r <= rounds; r++) {
  const i = (r * 7919) % TOTAL;
  state[i] = object(i, r);
  a.next(snapshot(state, `r${r}`));
}
const single = (performance.now() - t) / rounds;

const batch = TOTAL / 100;
t = performance.now();
for (let r = 0; r < 10; r++) {
  for (let j = 0; j < batch; j++) {
    const i = (r * batch + j * 13) % TOTAL;
    state[i] = object(i, 1000 + r);
  }
  a.next(snapshot(state, `b${r}`));
}
const perBatch = (performance.now() - t) / 10;
engine.stop();

console.log(`merge of ${TOTAL} objects (+${TOTAL / 20} overlapping from a second source)`);
console.log(`  cold build:                         ${cold.toFixed(1)} ms`);
console.log(`  one changed object (full SotW input): ${single.toFixed(2)} ms per change`);
console.log(
  `  ${batch} changed objects:            ${perBatch.toFixed(1)} ms per batch = ${((perBatch / batch) * 1000).toFixed(1)} µs per changed object`,
);
