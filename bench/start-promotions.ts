/**
 * What a start allocates, and what of it outlives the young generation, by the function that
 * allocated it:
 *
 *   npm run build && node dist/bench/start-promotions.js [--objects 100000] [--rows 25] [--by allocated]
 *
 * The benchmark's three upstreams hold `--objects` objects (ServiceEntries and L's 2,000
 * VirtualServices) and meshmux starts as shipped in a process of its own, pinned to one core, three
 * times, each time with V8's sampling heap profiler on from its start to ready: once keeping every
 * sample (`allocated`), once the samples of every object that outlived a young collection
 * (`survivors`), once only those still alive at ready (`live`). Per function, the second is what
 * the young collections copied out of the young generation, the third what the start keeps, and
 * their difference what was copied only to die in the old generation: the part of the collector's
 * work at a start that the code, not the state, asks for. The first is what the code allocates at
 * all, which sets how often the young generation fills. Rows are sorted by survivors, or by
 * `--by allocated`. A builtin's allocations (a map's `set`, an array's `push`) are named with the
 * function that called it. Samples are taken every 8 KiB allocated, so small figures are rough.
 */
import { MeshModel, SHAPES } from './fixtures.js';
import { option } from './in-process.js';
import { bySite, sampledTotal as total, type SampledNode } from './sampled-sites.js';
import type { HeapSampling } from './server-main.js';
import { pinSelf, ServerProcess } from './server-process.js';
import { UpstreamSimulator } from './upstream-simulator.js';

const MB = (bytes: number): string => (bytes / 1e6).toFixed(2).padStart(8);

pinSelf(1);
const objects = Number(option('objects', '100000'));
const rows = Number(option('rows', '25'));
const by = option('by', 'survivors');
if (by !== 'survivors' && by !== 'allocated') throw new Error(`--by is survivors or allocated, not ${by}`);
const shape = { ...SHAPES.L, serviceEntries: objects - SHAPES.L.virtualServices };
const model = new MeshModel(shape);
const simulators = model.upstreams.map((u) => new UpstreamSimulator(u.index, model));
try {
  const upstreams = await Promise.all(simulators.map((s) => s.listen()));
  // A first start has the upstreams encode their objects once: not sampled.
  await (
    await ServerProcess.start({ mode: 'meshmux', shape: 'L', upstreams, withoutBase: true }, 300_000)
  ).stop();
  const sampled = new Map<HeapSampling, Map<string, number>>();
  for (const heapSampling of ['allocated', 'survivors', 'live'] as const) {
    const server = await ServerProcess.start(
      { mode: 'meshmux', shape: 'L', upstreams, withoutBase: true, heapSampling },
      300_000,
    );
    try {
      const profile = (await server.heapSample()) as { readonly head: SampledNode } | undefined;
      if (profile === undefined) throw new Error('the server kept no heap samples');
      sampled.set(heapSampling, bySite(profile));
    } finally {
      await server.stop();
    }
  }
  const allocated = sampled.get('allocated') as Map<string, number>;
  const survivors = sampled.get('survivors') as Map<string, number>;
  const live = sampled.get('live') as Map<string, number>;
  console.log(
    `start to ready with ${objects} objects upstream: ${MB(total(allocated)).trim()} MB sampled as allocated, ${MB(total(survivors)).trim()} MB as outliving a young collection, ${MB(total(live)).trim()} MB alive at ready`,
  );
  console.log(`\nallocated survivors     live     died  allocated by`);
  const sites = [...(by === 'allocated' ? allocated : survivors)].sort((a, b) => b[1] - a[1]).slice(0, rows);
  for (const [site] of sites) {
    const copied = survivors.get(site) ?? 0;
    const kept = live.get(site) ?? 0;
    console.log(`${MB(allocated.get(site) ?? 0)}  ${MB(copied)} ${MB(kept)} ${MB(copied - kept)}  ${site}`);
  }
} finally {
  await Promise.all(simulators.map((s) => s.close()));
}
