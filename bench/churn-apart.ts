/**
 * meshmux's churn on the baselines' fleet, measured apart from `npm run bench`, with what each
 * process on the fleet's core spent:
 *
 *   npm run build && node dist/bench/churn-apart.js [--shape S|L] [--clients 10] [--seconds 10]
 *     [--rounds 2] [--quiet 2000]
 *
 * The benchmark's three upstreams hold a shape's objects, meshmux runs as shipped in a process of
 * its own pinned to one core, and a fleet of istiod-like clients (the baselines' fleet: 10 on S,
 * 5 on L) shares the other core with the upstreams' process, as in the benchmark. Each round
 * changes the mesh as the benchmark's churn does (100 times a second) for `--seconds`, waits until every
 * change reached every client it concerns, and prints: the changes' latency (upstream write to
 * the last client holding it) at p50, p99 and its maximum; the slowest upstream states (the
 * changes a state carries arrive together), with when in the round each was written; the CPU of the fleet's process and its collections of the heap
 * (node's own reports, full and young); the upstreams' process's CPU; and
 * the server's CPU, full collections and longest event-loop delay. Each round follows `--quiet`
 * milliseconds without changes (after the fleet's sync, or the last round). With a folder in
 * `BENCH_SERVER_PROFILE` the server's CPU profile is kept there, and each round prints where it
 * begins on the profile's clock.
 */
import { HeapCollections } from '../src/core/heap-collections.js';
import { SHAPES } from './fixtures.js';
import { Fleet, LatencyTracker, percentile } from './fleet.js';
import { option } from './in-process.js';
import { churn, FULL_TIMING, ShapeRig } from './phases.js';
import { cpuMs, pinSelf, ServerProcess } from './server-process.js';

const shape = SHAPES[option('shape', 'S') === 'L' ? 'L' : 'S'];
const CLIENTS = Number(option('clients', String(shape.baselineClients)));
const SECONDS = Number(option('seconds', '10'));
const ROUNDS = Number(option('rounds', '2'));
const QUIET_MS = Number(option('quiet', '2000'));
const SLOWEST = 6;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

pinSelf(1);
const collections = new HeapCollections().start();
const rig = new ShapeRig(shape);
await rig.start();
const server = await ServerProcess.start({ mode: 'meshmux', shape: shape.name, upstreams: rig.addresses });
const fleet = new Fleet(server.xdsAddress, CLIENTS).start();
try {
  await fleet.synced(performance.now(), 300_000);
  console.log(
    `${shape.name}: ${shape.serviceEntries} ServiceEntries + ${shape.virtualServices} VirtualServices, ${CLIENTS} istiods, ${FULL_TIMING.changesPerSecond} changes a second for ${SECONDS} s`,
  );
  for (let round = 0; round < ROUNDS; round++) {
    await sleep(QUIET_MS);
    const tracker = new LatencyTracker(fleet);
    rig.track(tracker);
    const { full: full0, young: young0 } = collections;
    const fleetCpu0 = process.cpuUsage();
    const upstreamsCpu0 = await rig.upstreamsCpuMs();
    const server0 = await server.counters();
    const start = performance.now();
    // Where the round begins in a profile of the server (whose times are this clock's microseconds).
    if (process.env['BENCH_SERVER_PROFILE'] !== undefined)
      console.log(`  round ${round + 1} starts at ${process.hrtime.bigint() / 1000n} µs (monotonic)`);
    const changes = (await churn(rig, tracker, FULL_TIMING, SECONDS * 1000)).length;
    for (const sim of rig.simulators) sim.flush();
    const settled = await tracker.settle(60_000);
    const fleetCpu = process.cpuUsage(fleetCpu0);
    const upstreamsCpu = (await rig.upstreamsCpuMs()) - upstreamsCpu0;
    const server1 = await server.counters();
    rig.track(undefined);
    tracker.close();
    const latencies = tracker.latencies();
    // One line per upstream state: the changes a state carried arrive together.
    const states = new Set<string>();
    const slowest = tracker.changes
      .filter((c) => c.sentAt !== undefined && c.doneAt !== undefined)
      .map((c) => ({ c, ms: (c.doneAt as number) - (c.sentAt as number) }))
      .sort((a, b) => b.ms - a.ms)
      .filter(({ c }) => !states.has(`${c.upstream}-${c.seq}`) && states.add(`${c.upstream}-${c.seq}`))
      .slice(0, SLOWEST);
    console.log(
      `round ${round + 1}: ${changes} changes${settled ? '' : ' (not all settled)'}, latency p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms`,
    );
    console.log(
      `  slowest upstream states: ${slowest.map((x) => `u${x.c.upstream}-${x.c.seq} ${x.ms.toFixed(0)} ms (written ${((x.c.sentAt as number) - start).toFixed(0)} ms in)`).join(', ')}`,
    );
    console.log(
      `  fleet's process: ${((fleetCpu.user + fleetCpu.system) / 1000).toFixed(0)} ms CPU, ${collections.full - full0} full collections, ${collections.young - young0} young; upstreams' process: ${upstreamsCpu.toFixed(0)} ms CPU`,
    );
    console.log(
      `  server: ${(cpuMs(server1) - cpuMs(server0)).toFixed(0)} ms CPU, ${server1.process.fullCollections - server0.process.fullCollections} full collections, ${server1.process.youngCollections - server0.process.youngCollections} young; longest event-loop delay since its start ${server1.process.eventLoopDelayMaxMs.toFixed(0)} ms`,
    );
  }
} finally {
  collections.stop();
  fleet.close();
  await server.stop();
  await rig.close();
}
