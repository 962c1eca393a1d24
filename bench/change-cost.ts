/**
 * What one changed object costs meshmux, in CPU:
 *
 *   npm run build && node dist/bench/change-cost.js [--shape L] [--changes 40] [--views edge|all]
 *     [--zone edge|east|west] [--clients 1] [--resync] [--pause 0] [--collect] [--profile] [--allocations]
 *
 * The benchmark's three upstreams hold a shape's objects (L: 50k ServiceEntries + 2k
 * VirtualServices) and meshmux runs as shipped in a process of its own, pinned to one core. The
 * istiods are one of the small (edge) view (`--views all`: one per policy, so the large views
 * exist too; `--clients N`: N per view, for the cost of serving many). Each round changes one
 * ServiceEntry of the edge view (`--zone`: of that zone; a west object is the core view's only, an
 * east one the east and core views') and waits until the istiods hold what the model says. Measured
 * per change: the server's CPU for the whole change (reading the upstream's new state, merging,
 * building and writing the small view's response), less the cost of reading its counters. With
 * one istiod of the small view only, everything but a few kilobytes of writing comes before the
 * first byte; with more, the server's CPU from the upstream's write to its first push of the change
 * is printed apart (the CPU before the first byte). Also printed: each change's latency, from
 * the upstream's write to the last istiod holding it, and the part of it after the server's
 * snapshot (its serving path).
 * `--resync`: each round restarts every upstream's streams with the same content instead (an
 * identical resync), measured from the restart until the server's CPU use is flat again.
 * `--pause MS`: each round waits that long first, unmeasured (past 10 s, a stream has let its
 * reassembly buffer go, as it does between the sporadic changes of a quiet mesh).
 * `--collect`: the server runs a full collection of its heap before the rounds, as it does before
 * the benchmark's identical resyncs (where it reads the memory retained).
 * `--profile` also prints where the server spent the rounds' CPU (self time per function); a folder
 * named in `BENCH_SERVER_PROFILE` keeps the profile, and the rounds' window in it is printed.
 * `--allocations` prints what the server allocated in the rounds, per change and allocating
 * function (V8's sampling heap profiler, a sample every 8 KiB: small figures are rough); what
 * fills the young generation, and so how often a change pays for a young collection.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SE, SE_URL, SHAPES, VS_URL, type PolicyName } from './fixtures.js';
import { Fleet, LatencyTracker, percentile } from './fleet.js';
import { option } from './in-process.js';
import { quiesce, ShapeRig } from './phases.js';
import { bySite, sampledTotal, type SampledNode } from './sampled-sites.js';
import { cpuMs, pinSelf, ServerProcess } from './server-process.js';

const shape = SHAPES[option('shape', 'L') === 'S' ? 'S' : 'L'];
const CHANGES = Number(option('changes', '40'));
const ALL_VIEWS = option('views', 'edge') === 'all';
const CLIENTS = Number(option('clients', '1'));
const PROFILE = process.argv.includes('--profile');
const RESYNC = process.argv.includes('--resync');
const PAUSE_MS = Number(option('pause', '0'));
const COLLECT = process.argv.includes('--collect');
const ALLOCATIONS = process.argv.includes('--allocations');
const ZONE = option('zone', 'edge');
if (ZONE !== 'edge' && ZONE !== 'east' && ZONE !== 'west')
  throw new Error(`--zone ${ZONE}: edge, east or west`);

interface CpuProfile {
  readonly startTime: number;
  readonly nodes: ReadonlyArray<{
    readonly id: number;
    readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  }>;
  readonly samples?: readonly number[];
  readonly timeDeltas?: readonly number[];
}

/** Self time per function over the samples taken between `fromUs` and `toUs` (monotonic clock), largest first. */
function topFunctions(profile: CpuProfile, fromUs: number, toUs: number, count: number): string[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  const deltas = profile.timeDeltas ?? [];
  let at = profile.startTime;
  let total = 0;
  (profile.samples ?? []).forEach((id, i) => {
    const us = deltas[i] ?? 0;
    at += us;
    if (at < fromUs || at > toUs) return;
    const frame = byId.get(id)?.callFrame;
    const where =
      frame === undefined
        ? '?'
        : `${frame.functionName || '(anonymous)'} ${frame.url.split('/').slice(-2).join('/')}:${frame.lineNumber + 1}`;
    if (where.startsWith('(idle)')) return;
    total += us;
    self.set(where, (self.get(where) ?? 0) + us);
  });
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(
      ([where, us]) =>
        `${(us / 1000).toFixed(1).padStart(8)} ms ${((us / total) * 100).toFixed(1).padStart(5)}%  ${where}`,
    );
}

const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

pinSelf(1);
// A directory given in BENCH_SERVER_PROFILE keeps the profile (and the rounds' window is printed).
const keptProfileDir = process.env['BENCH_SERVER_PROFILE'];
const profileDir =
  keptProfileDir ?? (PROFILE ? await mkdtemp(path.join(tmpdir(), 'meshmux-change-cost-')) : undefined);
if (profileDir !== undefined) process.env['BENCH_SERVER_PROFILE'] = profileDir;
const rig = new ShapeRig(shape);
await rig.start();
const server = await ServerProcess.start({ mode: 'meshmux', shape: shape.name, upstreams: rig.addresses });
const policies: PolicyName[] = ALL_VIEWS ? ['edge', 'core', 'east'] : ['edge'];
const fleets = policies.map((policy, i) =>
  new Fleet(server.xdsAddress, CLIENTS, { first: i * CLIENTS, policy }).start(),
);
const { model } = rig;
let window: { fromUs: number; toUs: number } | undefined;
try {
  for (const f of fleets) {
    await f.until(() => f.mismatches(model.expectedDigests()).length === 0, 300_000, 'the first sync');
  }
  console.log(
    `${shape.name}: ${shape.serviceEntries} ServiceEntries + ${shape.virtualServices} VirtualServices; istiods of ${policies.join(', ')}`,
  );
  await sleep(1_000);
  if (COLLECT) {
    await server.memory();
    await quiesce(server, 2_000);
  }
  // What reading the counters costs the server, to take off each round's figure.
  const idle: number[] = [];
  for (let i = 0; i < 10; i++) {
    const a = cpuMs(await server.counters());
    await sleep(50);
    idle.push(cpuMs(await server.counters()) - a);
  }
  const overhead = percentile(idle, 50);
  const cpu: number[] = [];
  // Per change: the server's CPU from just before the upstream's write to its first push.
  const firstByte: number[] = [];
  // Per change: upstream write → the last istiod holding it, and the part after the server's snapshot.
  const latency: number[] = [];
  const serving: number[] = [];
  // The kernel's share (network, page faults), of the same rounds, not net of the counters' reads.
  const system: number[] = [];
  // Page faults of the same rounds: memory the rounds touched for the first time.
  const faults: number[] = [];
  if (ALLOCATIONS) await server.startHeapSample('allocated');
  const fromUs = monotonicUs();
  const countersBefore = await server.counters();
  const collectionsBefore = countersBefore.process;
  for (let round = 0; round < CHANGES; round++) {
    if (PAUSE_MS > 0) await sleep(PAUSE_MS);
    const start = await server.counters();
    const before = cpuMs(start);
    if (RESYNC) {
      const started = performance.now();
      for (const sim of rig.simulators) sim.dropStreams();
      while (!rig.simulators.every((s) => s.answeredTypes >= 2)) {
        if (performance.now() - started > 30_000)
          throw new Error(`resync ${round}: upstreams not asked again`);
        await sleep(20);
      }
      const reads = await quiesce(server, 10_000);
      const end = await server.counters();
      cpu.push(cpuMs(end) - before - overhead * (reads + 1));
      system.push(end.process.cpuSystemMs - start.process.cpuSystemMs);
      faults.push(end.process.minorPageFaults - start.process.minorPageFaults);
      continue;
    }
    const trackers = fleets.map((f) => new LatencyTracker(f));
    const pick = model.servedInZone(ZONE);
    const change = model.change('endpoints', pick.upstream, pick);
    const sim = rig.simulators[change.upstream];
    if (sim === undefined) throw new Error(`no upstream ${change.upstream}`);
    for (const t of trackers)
      t.expect(change.kind === SE ? SE_URL : VS_URL, change.upstream, sim.nextSeq, change.affected);
    rig.track(trackers[0]);
    await server.mark();
    sim.changed(change.kind);
    sim.flush();
    for (const t of trackers)
      if (!(await t.settle(60_000))) throw new Error(`change ${round} did not reach every istiod`);
    rig.track(undefined);
    for (const t of trackers) t.close();
    const first = await server.firstPushCpuMs();
    if (first !== undefined) firstByte.push(first);
    await sleep(50);
    const end = await server.counters();
    cpu.push(cpuMs(end) - before - overhead);
    const tracked = trackers[0]?.changes[0];
    if (tracked?.sentAt !== undefined && tracked.doneAt !== undefined && end.lastSnapshotAtMs !== undefined) {
      latency.push(tracked.doneAt - tracked.sentAt);
      serving.push(tracked.doneAt - (end.lastSnapshotAtMs - performance.timeOrigin));
    }
    system.push(end.process.cpuSystemMs - start.process.cpuSystemMs);
    faults.push(end.process.minorPageFaults - start.process.minorPageFaults);
  }
  window = { fromUs, toUs: monotonicUs() };
  const allocated = ALLOCATIONS ? await server.heapSample() : undefined;
  // Read after a pause: node reports a collection a little after it ends.
  await sleep(200);
  const countersAfter = await server.counters();
  const collectionsAfter = countersAfter.process;
  // The collections a change sets off land on whichever change comes next: the mean carries them.
  const mean = cpu.reduce((a, b) => a + b, 0) / cpu.length;
  for (const f of fleets) {
    const wrong = f.mismatches(model.expectedDigests());
    if (wrong.length > 0) throw new Error(`after the changes: ${wrong.slice(0, 3).join('; ')}`);
  }
  console.log(
    `${CHANGES} ${RESYNC ? 'identical resyncs' : 'one-object changes to the small view'}: server CPU per change p50 ${percentile(cpu, 50).toFixed(1)} ms, p90 ${percentile(cpu, 90).toFixed(1)} ms, max ${Math.max(...cpu).toFixed(1)} ms, mean ${mean.toFixed(1)} ms (reading counters: ${overhead.toFixed(1)} ms, taken off; system CPU p50 ${percentile(system, 50).toFixed(1)} ms, page faults p50 ${percentile(faults, 50)})`,
  );
  if (firstByte.length > 0)
    console.log(
      `server CPU from the upstream's write to the first push: p50 ${percentile(firstByte, 50).toFixed(1)} ms, p90 ${percentile(firstByte, 90).toFixed(1)} ms, mean ${(firstByte.reduce((a, b) => a + b, 0) / firstByte.length).toFixed(1)} ms`,
    );
  if (latency.length > 0)
    console.log(
      `upstream write → last istiod: p50 ${percentile(latency, 50).toFixed(1)} ms, p90 ${percentile(latency, 90).toFixed(1)} ms; of it after the server's snapshot p50 ${percentile(serving, 50).toFixed(1)} ms`,
    );
  const checks = (countersAfter.snapshotChecks ?? 0) - (countersBefore.snapshotChecks ?? 0);
  console.log(
    `types the ${CLIENTS * policies.length} istiods' streams looked at for a push: ${(checks / CHANGES).toFixed(1)} per change`,
  );
  console.log(
    `collections of the heap during the changes: ${collectionsAfter.fullCollections - collectionsBefore.fullCollections} full, ${collectionsAfter.youngCollections - collectionsBefore.youngCollections} young (${collectionsAfter.youngCollectionsAfterInput - collectionsBefore.youngCollectionsAfterInput} of them run after network input, ${collectionsAfter.youngCollectionsSkippedWhileMarking - collectionsBefore.youngCollectionsSkippedWhileMarking} more left out during markings)`,
  );
  if (allocated !== undefined) {
    const sites = bySite(allocated as { readonly head: SampledNode });
    const kb = (bytes: number): string => (bytes / CHANGES / 1024).toFixed(1).padStart(9);
    console.log(`allocated per change: ${kb(sampledTotal(sites)).trim()} KiB, by function:`);
    for (const [site, bytes] of [...sites].sort((a, b) => b[1] - a[1]).slice(0, 25))
      console.log(`${kb(bytes)} KiB  ${site}`);
  }
  console.log(
    JSON.stringify({
      shape: shape.name,
      views: policies,
      perChange: {
        cpuMs: Number(percentile(cpu, 50).toFixed(1)),
        ...(firstByte.length === 0
          ? {}
          : { cpuMsBeforeFirstByte: Number(percentile(firstByte, 50).toFixed(1)) }),
      },
    }),
  );
} finally {
  for (const f of fleets) f.close();
  await server.stop();
  await rig.close();
}
if (profileDir !== undefined && window !== undefined) {
  const files = (await readdir(profileDir)).filter((f) => f.endsWith('.cpuprofile'));
  for (const file of files) {
    const profile = JSON.parse(await readFile(path.join(profileDir, file), 'utf8')) as CpuProfile;
    console.log('where the server spent the rounds (self time):');
    for (const l of topFunctions(profile, window.fromUs, window.toUs, 30)) console.log(l);
  }
  console.log(`rounds' window (monotonic µs): ${window.fromUs} ${window.toUs}`);
  if (keptProfileDir === undefined) await rm(profileDir, { recursive: true, force: true });
}
