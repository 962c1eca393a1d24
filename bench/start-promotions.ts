/**
 * What a start allocates that outlives the young generation, by the function that allocated it:
 *
 *   npm run build && node dist/bench/start-promotions.js [--objects 100000] [--rows 25]
 *
 * The benchmark's three upstreams hold `--objects` objects (ServiceEntries and L's 2,000
 * VirtualServices) and meshmux starts as shipped in a process of its own, pinned to one core, twice,
 * each time with V8's sampling heap profiler on from its start to ready: once keeping the samples
 * of every object that outlived a young collection (`survivors`), once only those still alive at
 * ready (`live`). Per function, the first is what the young collections copied out of the young
 * generation, the second what the start keeps, and their difference what was copied only to die
 * in the old generation: the part of the collector's work at a start that the code, not the
 * state, asks for. Samples are taken every 8 KiB allocated, so small figures are rough.
 */
import { MeshModel, SHAPES } from './fixtures.js';
import { option } from './in-process.js';
import { pinSelf, ServerProcess } from './server-process.js';
import { UpstreamSimulator } from './upstream-simulator.js';

interface SampledNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly SampledNode[];
}

/** Bytes sampled per allocating function (`name file:line`). */
function bySite(profile: { readonly head: SampledNode }): Map<string, number> {
  const sites = new Map<string, number>();
  const visit = (node: SampledNode): void => {
    const { functionName, url, lineNumber } = node.callFrame;
    const site = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`;
    if (node.selfSize > 0) sites.set(site, (sites.get(site) ?? 0) + node.selfSize);
    for (const child of node.children) visit(child);
  };
  visit(profile.head);
  return sites;
}

const total = (sites: Map<string, number>): number => [...sites.values()].reduce((a, b) => a + b, 0);
const MB = (bytes: number): string => (bytes / 1e6).toFixed(2).padStart(8);

pinSelf(1);
const objects = Number(option('objects', '100000'));
const rows = Number(option('rows', '25'));
const shape = { ...SHAPES.L, serviceEntries: objects - SHAPES.L.virtualServices };
const model = new MeshModel(shape);
const simulators = model.upstreams.map((u) => new UpstreamSimulator(u.index, model));
try {
  const upstreams = await Promise.all(simulators.map((s) => s.listen()));
  // A first start has the upstreams encode their objects once: not sampled.
  await (
    await ServerProcess.start({ mode: 'meshmux', shape: 'L', upstreams, withoutBase: true }, 300_000)
  ).stop();
  const sampled = new Map<'survivors' | 'live', Map<string, number>>();
  for (const heapSampling of ['survivors', 'live'] as const) {
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
  const survivors = sampled.get('survivors') as Map<string, number>;
  const live = sampled.get('live') as Map<string, number>;
  console.log(
    `start to ready with ${objects} objects upstream: ${MB(total(survivors)).trim()} MB sampled as outliving a young collection, ${MB(total(live)).trim()} MB alive at ready`,
  );
  console.log(`\n survivors     live     died  allocated by`);
  const sites = [...survivors].sort((a, b) => b[1] - a[1]).slice(0, rows);
  for (const [site, bytes] of sites) {
    const kept = live.get(site) ?? 0;
    console.log(`${MB(bytes)} ${MB(kept)} ${MB(bytes - kept)}  ${site}`);
  }
} finally {
  await Promise.all(simulators.map((s) => s.close()));
}
