/**
 * The phases of one shape, in order: calibration against the raw fan-out limit, then meshmux
 * (cold and warm sync, churn, identical resync, 1%-changed resync, isolated changes, 1-client
 * floor), then the baselines. Each phase reads the server's counters before and after, and every
 * fleet is checked against the reference model before its figures count.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { KindDescriptor } from '../src/schema/kinds.js';
import {
  MeshModel,
  POLICIES,
  SE,
  SE_URL,
  VS_URL,
  type AppliedChange,
  type PolicyName,
  type Shape,
  type Zone,
} from './fixtures.js';
import { discardingSync, Fleet, LatencyTracker, percentile } from './fleet.js';
import { cpuMs, ServerProcess, type ServerCounters } from './server-process.js';
import { settledMemory } from './settled-memory.js';
import { UpstreamProcess } from './upstream-process.js';
import type { SimulatedUpstream } from './upstream-simulator.js';

/** How long each phase runs; `--quick` shortens them for development. */
export interface Timing {
  readonly churnMs: number;
  readonly baselineChurnMs: number;
  readonly changesPerSecond: number;
  /** Isolated changes per zone. */
  readonly isolated: number;
  /**
   * Isolated changes to the small view in all, `isolated` of them among the other zones' and the
   * rest alone: cheap, and the figures taken from them (its latency, the server's CPU before the
   * first byte) are medians that five changes leave to chance.
   */
  readonly smallViewChanges: number;
  readonly floorChanges: number;
  /** meshmux's write budget, MB; default its own. */
  readonly writeBudgetMb?: number;
  /** The naive and Nacos-like baselines too, not only the istiod-like one. */
  readonly allBaselines: boolean;
}

export const FULL_TIMING: Timing = {
  churnMs: 20_000,
  baselineChurnMs: 10_000,
  changesPerSecond: 100,
  isolated: 5,
  smallViewChanges: 15,
  floorChanges: 10,
  allBaselines: true,
};

/**
 * Shape L moves gigabytes per push: shorter churn, and of the baselines only the istiod-like one
 * (the ratio the goals name), so the whole run stays within five minutes.
 */
export const FULL_TIMING_L: Timing = {
  ...FULL_TIMING,
  churnMs: 8_000,
  baselineChurnMs: 10_000,
  allBaselines: false,
};

export const QUICK_TIMING: Timing = {
  churnMs: 5_000,
  baselineChurnMs: 6_000,
  changesPerSecond: 100,
  isolated: 2,
  smallViewChanges: 2,
  floorChanges: 5,
  allBaselines: true,
};

type Log = (line: string) => void;

/** Counter differences over a phase. */
export interface Delta {
  readonly cpuMs: number;
  readonly encodes: number;
  readonly assemblies: number;
  readonly pushes: number;
  readonly bytesSent: number;
  readonly wastedPushes: number;
}

function delta(a: ServerCounters, b: ServerCounters): Delta {
  return {
    cpuMs: cpuMs(b) - cpuMs(a),
    encodes: b.encodes - a.encodes,
    assemblies: b.assemblies - a.assemblies,
    pushes: b.pushes - a.pushes,
    bytesSent: b.bytesSent - a.bytesSent,
    wastedPushes: b.wastedPushes - a.wastedPushes,
  };
}

function urlOf(kind: KindDescriptor): string {
  return kind === SE ? SE_URL : VS_URL;
}

/** Retained memory (heap + external) in bytes. */
function retainedBytes(m: { heapUsedBytes: number; externalBytes: number }): number {
  return m.heapUsedBytes + m.externalBytes;
}

/** The upstreams and the reference model of one shape, shared by every server measured on it. */
export class ShapeRig {
  readonly model: MeshModel;
  readonly simulators: readonly SimulatedUpstream[];
  addresses: readonly string[] = [];
  private tracker: LatencyTracker | undefined;
  private readonly upstreams: UpstreamProcess;

  constructor(readonly shape: Shape) {
    this.model = new MeshModel(shape);
    // The simulators run in a process of their own: their writes of whole states would otherwise
    // share an event loop with the fleet and hold up its reads.
    this.upstreams = new UpstreamProcess(this.model);
    this.simulators = this.upstreams.upstreams;
    for (const sim of this.simulators) sim.onFlush = (f) => this.tracker?.sent(f.upstream, f.seq, f.sentAt);
  }

  async start(): Promise<void> {
    this.addresses = await this.upstreams.addresses();
  }

  /** Bytes of responses the upstreams have written so far, over every stream. */
  get upstreamBytes(): number {
    return this.simulators.reduce((sum, s) => sum + s.bytesSent, 0);
  }

  /** Routes upstream flushes to `tracker` (one phase at a time). */
  track(tracker: LatencyTracker | undefined): void {
    this.tracker = tracker;
  }

  /** Applies a change to the model, schedules its upstream's batch and registers it with the tracker. */
  apply(change: AppliedChange, tracker: LatencyTracker, now = false): void {
    const sim = this.simulators[change.upstream] as SimulatedUpstream;
    tracker.expect(urlOf(change.kind), change.upstream, sim.nextSeq, change.affected);
    sim.changed(change.kind);
    if (now) sim.flush();
  }

  /** The upstreams' process's CPU so far, milliseconds. */
  upstreamsCpuMs(): Promise<number> {
    return this.upstreams.cpuMs();
  }

  async close(): Promise<void> {
    await this.upstreams.close();
  }
}

/** Fails the run when any client's view differs from the model's. */
function verify(fleet: Fleet, model: MeshModel, what: string): void {
  const wrong = fleet.mismatches(model.expectedDigests());
  if (wrong.length > 0) {
    throw new Error(
      `${what}: ${wrong.length} clients hold a wrong view, e.g. ${wrong.slice(0, 3).join('; ')}`,
    );
  }
}

export interface RawResults {
  readonly syncMs: number;
  readonly cpuMs: number;
  readonly bytes: number;
  /** Server CPU per MB written by the raw fan-out: the transport cost on this machine. */
  readonly cpuMsPerMB: number;
  /** Time to push one ServiceEntry response to every client of a view (`all`: the sync, every view at once). */
  readonly pushMs: Readonly<Record<PolicyName | 'all', number>>;
  /** The push to the largest view with writes bounded by count (16 at a time), not by bytes. */
  readonly pushMsCountBounded: number;
  /** The sync to a fleet that only counts bytes (see `discardingSync`). */
  readonly discardingSyncMs: number;
  /** One client, the small view. */
  readonly floorMs: number;
}

async function rawPush(
  server: ServerProcess,
  fleet: Fleet,
  policy: PolicyName | 'all',
  seq: number,
  byCount = false,
): Promise<number> {
  const tracker = new LatencyTracker(fleet);
  const change = tracker.expect(SE_URL, 9, seq, new Set(policy === 'all' ? POLICIES : [policy]));
  const t = performance.now();
  tracker.sent(9, seq, t);
  await server.push(policy, seq, byCount);
  const ok = await tracker.settle(60_000);
  tracker.close();
  if (!ok || change?.doneAt === undefined) throw new Error(`raw push to ${policy} did not arrive`);
  return change.doneAt - t;
}

/** The limit: raw fan-out of pre-encoded per-policy responses, sync and push times. */
export async function calibrate(rig: ShapeRig, log: Log): Promise<RawResults> {
  const { shape, model } = rig;
  const starting = ServerProcess.start({ mode: 'raw', shape: shape.name, upstreams: [] });
  // The reference views, computed on this core while the server builds its responses on the other.
  model.expectedDigests();
  const server = await starting;
  try {
    // Large transfers are measured once on L to keep the run within its time budget.
    const repeats = shape.name === 'L' ? 1 : 2;
    const runs: Array<{ ms: number; d: Delta }> = [];
    // The last synced fleet stays connected for the pushes.
    let fleet: Fleet | undefined;
    for (let rep = 0; rep < repeats; rep++) {
      fleet?.close();
      const c0 = await server.counters();
      fleet = new Fleet(server.xdsAddress, shape.clients);
      const t0 = performance.now();
      fleet.start();
      const ms = await fleet.synced(t0, 120_000);
      await sleep(100);
      const d = delta(c0, await server.counters());
      verify(fleet, model, 'raw fan-out');
      runs.push({ ms, d });
      log(
        `  raw sync ${rep + 1}: ${ms.toFixed(0)} ms, ${(d.bytesSent / 1e6).toFixed(0)} MB, server CPU ${d.cpuMs.toFixed(0)} ms`,
      );
      await sleep(300);
    }
    const best = runs.reduce((a, b) => (b.ms < a.ms ? b : a));
    if (fleet === undefined) throw new Error('no raw sync ran');
    const discarding = await discardingSync(server.xdsAddress, shape.clients, 300_000);
    log(`  raw sync to clients that only count bytes: ${discarding.ms.toFixed(0)} ms`);
    let seq = 1;
    const pushMs = { all: best.ms, east: Number.NaN } as Record<PolicyName | 'all', number>;
    for (const policy of POLICIES) {
      // L measures no isolated change to the middle view: nothing to compare its push with.
      if (shape.name === 'L' && policy === 'east') continue;
      const reps = policy === 'edge' ? 5 : repeats;
      const times: number[] = [];
      for (let i = 0; i < reps; i++) {
        times.push(await rawPush(server, fleet, policy, seq++));
        await sleep(100);
      }
      pushMs[policy] = percentile(times, 50);
      log(`  raw push to ${policy}: ${pushMs[policy].toFixed(1)} ms`);
    }
    // The same push to the largest view bounded by count instead of bytes, for reference.
    const byCount: number[] = [];
    for (let i = 0; i < repeats; i++) {
      byCount.push(await rawPush(server, fleet, 'core', seq++, true));
      await sleep(100);
    }
    const pushMsCountBounded = percentile(byCount, 50);
    log(
      `  raw push to core, 16 writes at a time instead of a byte budget: ${pushMsCountBounded.toFixed(1)} ms`,
    );
    fleet.close();
    await sleep(200);
    const one = new Fleet(server.xdsAddress, 1, { first: 9000, policy: 'edge' }).start();
    await one.synced(performance.now(), 30_000);
    const floor: number[] = [];
    for (let i = 0; i < 10; i++) {
      floor.push(await rawPush(server, one, 'edge', seq++));
      await sleep(50);
    }
    one.close();
    const floorMs = percentile(floor, 50);
    log(`  raw 1-client floor: ${floorMs.toFixed(2)} ms`);
    return {
      syncMs: best.ms,
      cpuMs: best.d.cpuMs,
      bytes: best.d.bytesSent,
      cpuMsPerMB: best.d.cpuMs / (best.d.bytesSent / 1e6),
      pushMs,
      pushMsCountBounded,
      discardingSyncMs: discarding.ms,
      floorMs,
    };
  } finally {
    await server.stop();
  }
}

export interface SyncResult {
  readonly ms: number;
  readonly delta: Delta;
  /** Bytes sent over the sum of the final responses' sizes. */
  readonly bytesOverMinimal: number;
}

export interface ChurnResult {
  readonly changes: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  readonly latencyMaxMs: number;
  readonly unresolved: number;
  readonly delta: Delta;
  /** Changes that put a new object version into some view (what encodes are counted against). */
  readonly servedChanges: number;
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  /**
   * Bytes of the upstreams' responses meshmux received over the churn: a state-of-the-world
   * upstream sends a kind's whole state again for any change of it (batched every 100 ms here).
   */
  readonly upstreamBytes: number;
}

export interface MeshmuxResults {
  readonly cold: SyncResult;
  readonly warm: SyncResult;
  readonly churn: ChurnResult;
  readonly identicalResync: {
    readonly bytes: number;
    /** The server's CPU over the resync, less what the idle server costs over as long (see `idleCost`). */
    readonly cpuMs: number;
    /** The server's CPU over the resync, as measured. */
    readonly grossCpuMs: number;
    /** `cpuMs` of the process's first identical resync, which compiles the code resyncs run. */
    readonly firstCpuMs: number;
    readonly idle: IdleCost;
    readonly pushes: number;
    /** What each upstream sent in the last resync: its whole state again, on a new stream. */
    readonly upstreamBytes: readonly number[];
  };
  readonly changedResync: {
    readonly ms: number;
    readonly changes: number;
    readonly servedChanges: number;
    readonly delta: Delta;
    readonly bytesOverMinimal: number;
  };
  /** Per zone of the changed object: per policy, the latency of each change to that policy's clients. */
  readonly isolated: Readonly<Record<Zone, Partial<Record<PolicyName, number[]>>>>;
  /**
   * The same latencies split at the moment the snapshot reached the ADS server: before it, the
   * upstream source, merge and snapshot hooks; after it, meshmux's serving path to the last client.
   */
  readonly isolatedSplit: {
    readonly sourceMs: number[];
    /** Per policy. */
    readonly servingMs: Partial<Record<PolicyName, number[]>>;
  };
  readonly floorMs: number;
  readonly floorServingMs: number;
  /** Per isolated change to the small view: server CPU before the first push it caused, ms. */
  readonly cpuBeforeFirstByteMs: readonly number[];
  /** Per isolated change to the small view: bytes of the state its upstream wrote to meshmux. */
  readonly smallViewStateBytes: readonly number[];
  /** Responses a client received with exactly the resource entries it already held (every phase). */
  readonly clientWastedPushes: number;
  /** The warm sync to a fleet that only counts bytes. */
  readonly discardingSyncMs: number;
  /**
   * The cold sync to a fleet that only counts bytes: the first fleet of a server of its own,
   * started before the measured one, while the upstreams held their first state.
   */
  readonly discardingColdSyncMs: number;
  readonly memory: {
    /** RSS after a full collection: before serving, and with the fleet connected. */
    readonly baseRssBytes: number;
    readonly afterFleetRssBytes: number;
    /** RSS with the fleet connected and idle, once settled (see `settled-memory.ts`), and after how long. */
    readonly settledRssBytes: number;
    readonly settledAfterMs: number;
    readonly baseBytes: number;
    readonly syncedNoClientsBytes: number;
    readonly afterFleetBytes: number;
    readonly perClientBytes: number;
    readonly servedObjects: number;
    readonly peakRssBytes: number;
    /** The phase that reached the peak (see {@link PeakPhases}). */
    readonly peakRssPhase: string;
    readonly steadyRssBytes: number;
    readonly peakBytesInFlight: number;
  };
}

/** Sum over clients of the sizes of the responses they hold for `urls` (what a perfect server sends). */
function minimalBytes(fleet: Fleet, urls?: ReadonlySet<string>, policies?: ReadonlySet<PolicyName>): number {
  let sum = 0;
  for (const m of fleet.members) {
    if (policies !== undefined && !policies.has(m.policy)) continue;
    for (const [url, held] of m.held) if (urls === undefined || urls.has(url)) sum += held.bytes;
  }
  return sum;
}

async function measureSync(server: ServerProcess, fleet: Fleet): Promise<SyncResult> {
  const c0 = await server.counters();
  const t0 = performance.now();
  fleet.start();
  const ms = await fleet.synced(t0, 180_000);
  await sleep(100);
  const d = delta(c0, await server.counters());
  return { ms, delta: d, bytesOverMinimal: d.bytesSent / minimalBytes(fleet) };
}

/**
 * Waits until the server's CPU use stays flat (its work is done), at most `maxMs`. Returns how
 * many times it read the server's counters.
 */
export async function quiesce(server: ServerProcess, maxMs: number): Promise<number> {
  const end = performance.now() + maxMs;
  let last = cpuMs(await server.counters());
  let reads = 1;
  let calm = 0;
  while (performance.now() < end && calm < 3) {
    await sleep(150);
    const now = cpuMs(await server.counters());
    reads++;
    calm = now - last < 8 ? calm + 1 : 0;
    last = now;
  }
  return reads;
}

/**
 * Identical resyncs measured after the first; their median is reported. The first resync of a
 * process runs code nothing else runs (matching a new stream's response against the kept ones,
 * setting up new connections) and pays for V8 compiling it: reported apart (see `firstCpuMs`).
 */
const IDENTICAL_RESYNCS = 3;

/** What an idle server costs: CPU while nothing happens, and per read of its counters. */
export interface IdleCost {
  readonly cpuMsPerSecond: number;
  readonly cpuMsPerRead: number;
}

/**
 * The CPU an idle server spends (its loop-delay monitors wake it every 10 ms: about 1% of a core
 * on this kind of machine), and what one read of its counters adds, from 1.5 s left alone and 1.5
 * s read every 150 ms. A phase of small work (an identical resync) is measured over a second or
 * two of such waiting, which would otherwise count as its own.
 */
async function idleCost(server: ServerProcess): Promise<IdleCost> {
  const WINDOW_MS = 1_500;
  const READS = 10;
  const a = cpuMs(await server.counters());
  const t0 = performance.now();
  await sleep(WINDOW_MS);
  const b = cpuMs(await server.counters());
  const t1 = performance.now();
  for (let i = 0; i < READS; i++) {
    await sleep(WINDOW_MS / READS);
    await server.counters();
  }
  const c = cpuMs(await server.counters());
  const t2 = performance.now();
  const perMs = Math.max(0, (b - a) / (t1 - t0));
  const perRead = Math.max(0, (c - b - perMs * (t2 - t1)) / (READS + 1));
  return { cpuMsPerSecond: perMs * 1000, cpuMsPerRead: perRead };
}

/** One identical resync as measured: how long it took, the counters read meanwhile, the server's CPU. */
export interface MeasuredResync {
  readonly ms: number;
  readonly reads: number;
  readonly gross: number;
  readonly bytes: number;
  readonly pushes: number;
}

/**
 * What the identical resyncs cost the server: each one's CPU less what the idle server costs over as
 * long (its rate while left alone and per read of its counters, each the lower of the measurements
 * before the resyncs and after them: anything else the server did in one window, its share of
 * compiling or a collection, would be taken off the resyncs as idling), never below zero; the first
 * apart, and the median of the others.
 */
export function resyncFigures(
  measured: readonly MeasuredResync[],
  idleBefore: IdleCost,
  idleAfter: IdleCost,
): {
  idle: IdleCost;
  resyncs: Array<MeasuredResync & { net: number }>;
  first: MeasuredResync & { net: number };
  later: Array<MeasuredResync & { net: number }>;
  netMs: number;
  grossMs: number;
} {
  if (measured.length < 2) throw new Error('the first resync and at least one after it are measured');
  const idle: IdleCost = {
    cpuMsPerSecond: Math.min(idleBefore.cpuMsPerSecond, idleAfter.cpuMsPerSecond),
    cpuMsPerRead: Math.min(idleBefore.cpuMsPerRead, idleAfter.cpuMsPerRead),
  };
  const resyncs = measured.map((m) => ({
    ...m,
    net: Math.max(0, m.gross - (idle.cpuMsPerSecond * m.ms) / 1000 - idle.cpuMsPerRead * (m.reads + 1)),
  }));
  const [first, ...later] = resyncs as [(typeof resyncs)[number], ...typeof resyncs];
  return {
    idle,
    resyncs,
    first,
    later,
    netMs: percentile(
      later.map((r) => r.net),
      50,
    ),
    grossMs: percentile(
      later.map((r) => r.gross),
      50,
    ),
  };
}

/** Drives `changesPerSecond` churn changes for `durationMs`, registering each with `tracker`. */
export async function churn(
  rig: ShapeRig,
  tracker: LatencyTracker,
  timing: Timing,
  durationMs: number,
): Promise<AppliedChange[]> {
  const applied: AppliedChange[] = [];
  const start = performance.now();
  const interval = 1000 / timing.changesPerSecond;
  while (performance.now() - start < durationMs) {
    const due = Math.floor((performance.now() - start) / interval) + 1;
    while (applied.length < due) {
      const change = rig.model.churnChange();
      rig.apply(change, tracker);
      applied.push(change);
    }
    await sleep(interval);
  }
  return applied;
}

/** The churn every server runs, unmeasured, before its measured one. */
const WARM_UP_MS = 2_000;

/**
 * {@link WARM_UP_MS} of the churn, waited out until every client holds every change, with nothing
 * measured: a server's measured churn then runs as in a server that has served changes before.
 * The first churn after a server's start is slow for about a second, the server's own doing (a
 * second fleet on the same server does not see it, a second server does), with V8's own work a
 * fifth of its profile, as a change path not compiled yet would be: on S's baseline fleet that
 * churn's first states reached every client in 0.7–1.3 s where the states of a later churn, 2 s or
 * 25 s after the one before, took 0.2–0.6 s (`bench/churn-apart.ts`), one second that set the p99
 * of a 10 s window.
 */
async function warmUp(rig: ShapeRig, fleet: Fleet, timing: Timing, what: string): Promise<void> {
  const tracker = new LatencyTracker(fleet);
  rig.track(tracker);
  try {
    await churn(rig, tracker, timing, WARM_UP_MS);
    for (const sim of rig.simulators) sim.flush();
    if (!(await tracker.settle(120_000)))
      throw new Error(`${what}: the churn before the measured one did not reach every client`);
  } finally {
    rig.track(undefined);
    tracker.close();
  }
}

/** Changes that put a new object version into some view. */
function servedChanges(changes: readonly AppliedChange[]): number {
  return changes.filter((c) => c.servesNew).length;
}

/**
 * The phase in which the server's peak RSS was reached: its maximum RSS read after each phase,
 * from counters read between measured windows, and the first phase after which it stood at its
 * final value.
 */
class PeakPhases {
  private readonly after: Array<{ readonly phase: string; readonly maxRssBytes: number }> = [];

  note(phase: string, counters: ServerCounters): void {
    this.after.push({ phase, maxRssBytes: counters.process.maxRssBytes });
  }

  /** The first phase after which the maximum RSS read was `peak`. */
  reached(peak: number): string {
    return this.after.find((p) => p.maxRssBytes >= peak)?.phase ?? 'the last phase';
  }
}

/** A server of `mode` fed by the rig's upstreams; meshmux with the write budget the timing sets, if any. */
function serverOnRig(
  mode: 'meshmux' | 'istiod' | 'nacos',
  rig: ShapeRig,
  timing: Timing,
): Promise<ServerProcess> {
  return ServerProcess.start({
    mode,
    shape: rig.shape.name,
    upstreams: rig.addresses,
    ...(mode !== 'meshmux' || timing.writeBudgetMb === undefined
      ? {}
      : { writeBudgetMb: timing.writeBudgetMb }),
  });
}

/**
 * The cold sync of a server of its own to clients that only count bytes: a server has one cold
 * sync, and the measured server's goes to the checking fleet. Started, like it, against the
 * upstreams' first state, its memory read (two full collections) before the fleet connects.
 */
async function discardingColdSync(rig: ShapeRig, timing: Timing): Promise<number> {
  const server = await serverOnRig('meshmux', rig, timing);
  try {
    await server.memory();
    return (await discardingSync(server.xdsAddress, rig.shape.clients, 300_000)).ms;
  } finally {
    await server.stop();
  }
}

/** Every meshmux phase on one shape. */
export async function measureMeshmux(rig: ShapeRig, timing: Timing, log: Log): Promise<MeshmuxResults> {
  const { shape, model } = rig;
  const discardingColdSyncMs = await discardingColdSync(rig, timing);
  log(
    `  cold sync to clients that only count bytes (a server of its own): ${discardingColdSyncMs.toFixed(0)} ms`,
  );
  const server = await serverOnRig('meshmux', rig, timing);
  try {
    const syncedNoClients = await server.memory();
    const peaks = new PeakPhases();
    peaks.note('start', await server.counters());
    const coldFleet = new Fleet(server.xdsAddress, shape.clients);
    const cold = await measureSync(server, coldFleet);
    verify(coldFleet, model, 'meshmux cold sync');
    log(
      `  cold sync: ${cold.ms.toFixed(0)} ms, CPU ${cold.delta.cpuMs.toFixed(0)} ms, ${cold.delta.encodes} encodes, ${cold.delta.assemblies} assemblies, bytes/minimal ${cold.bytesOverMinimal.toFixed(3)}`,
    );
    const afterFleet = await server.memory();
    const steady = await server.counters();
    peaks.note('cold sync', steady);
    const per10k = (bytes: number): string => ((bytes / 1e6 / model.servedCount()) * 10_000).toFixed(1);
    log(
      `  memory with the istiods synced, above the idle process: RSS ${per10k(afterFleet.rssBytes - server.base.rssBytes)} MB per 10k objects, heap and external ${per10k(retainedBytes(afterFleet) - retainedBytes(server.base))} MB`,
    );
    // The same, the istiods connected and idle, once V8 has handed back what the sync left unused.
    const settledFleet = await settledMemory(() => server.memory());
    log(
      `  memory settled (after ${(settledFleet.afterMs / 1000).toFixed(0)} s): RSS ${per10k(settledFleet.reading.rssBytes - server.base.rssBytes)} MB per 10k objects above the idle process`,
    );

    // Memory per client: more clients of the same views, whose responses are already built.
    const extraCount = Math.max(5, Math.round(shape.clients / 10));
    const extra = new Fleet(server.xdsAddress, extraCount, { first: shape.clients }).start();
    await extra.synced(performance.now(), 120_000);
    await sleep(200);
    const withExtra = await server.memory();
    extra.close();
    peaks.note('more clients', await server.counters());
    const perClientBytes = Math.max(0, (retainedBytes(withExtra) - retainedBytes(afterFleet)) / extraCount);

    coldFleet.close();
    const wastedAtClients = (f: Fleet): number => f.members.reduce((n, m) => n + m.wastedPushes, 0);
    let clientWastedPushes = wastedAtClients(coldFleet);
    await sleep(500);
    const fleet = new Fleet(server.xdsAddress, shape.clients);
    const warm = await measureSync(server, fleet);
    verify(fleet, model, 'meshmux warm sync');
    log(
      `  warm sync: ${warm.ms.toFixed(0)} ms, CPU ${warm.delta.cpuMs.toFixed(0)} ms, ${warm.delta.encodes} encodes`,
    );
    const discarding = await discardingSync(server.xdsAddress, shape.clients, 300_000);
    log(`  warm sync to clients that only count bytes: ${discarding.ms.toFixed(0)} ms`);
    peaks.note('warm syncs', await server.counters());
    await sleep(300);

    // Churn, after a churn not measured (see `warmUp`).
    await warmUp(rig, fleet, timing, 'meshmux');
    await sleep(300);
    const churnTracker = new LatencyTracker(fleet);
    rig.track(churnTracker);
    await server.resetLoopDelay();
    const c0 = await server.counters();
    const upstreamBytes0 = rig.upstreamBytes;
    const fleetCpu0 = process.cpuUsage();
    const upstreamsCpu0 = await rig.upstreamsCpuMs();
    const wall0 = performance.now();
    const applied = await churn(rig, churnTracker, timing, timing.churnMs);
    const c1 = await server.counters();
    for (const sim of rig.simulators) sim.flush();
    const settled = await churnTracker.settle(60_000);
    if (!settled) {
      const open = churnTracker.changes.filter((c) => c.doneAt === undefined);
      log(
        `  unresolved after churn: ${open.length}, e.g. ${open
          .slice(0, 5)
          .map(
            (c) => `${c.typeUrl} u${c.upstream}-${c.seq} [${[...c.policies].join(',')}] pending ${c.pending}`,
          )
          .join('; ')}`,
      );
      const m = fleet.members[0];
      log(
        `  client 0 holds ${[...(m?.held ?? new Map<string, { version: string }>())]
          .filter(([u]) => u === SE_URL || u === VS_URL)
          .map(([u, h]) => `${u}=${h.version}`)
          .join(' ')}`,
      );
    }
    await quiesce(server, 5_000);
    const c2 = await server.counters();
    peaks.note('churn', c2);
    const fleetCpu = process.cpuUsage(fleetCpu0);
    const upstreamsCpu = (await rig.upstreamsCpuMs()) - upstreamsCpu0;
    log(
      `  fleet process: ${((fleetCpu.user + fleetCpu.system) / 1000).toFixed(0)} ms CPU, upstreams' process: ${upstreamsCpu.toFixed(0)} ms, in ${(performance.now() - wall0).toFixed(0)} ms`,
    );
    rig.track(undefined);
    churnTracker.close();
    verify(fleet, model, 'meshmux after churn');
    const lat = churnTracker.latencies();
    const churnResult: ChurnResult = {
      changes: applied.length,
      latencyP50Ms: percentile(lat, 50),
      latencyP99Ms: percentile(lat, 99),
      latencyMaxMs: Math.max(...lat),
      unresolved: settled ? 0 : churnTracker.unresolved,
      delta: delta(c0, c2),
      servedChanges: servedChanges(applied),
      loopDelayP99Ms: c1.process.eventLoopDelayP99Ms,
      loopDelayMaxMs: c1.process.eventLoopDelayMaxMs,
      upstreamBytes: rig.upstreamBytes - upstreamBytes0,
    };
    log(
      `  churn: ${applied.length} changes, latency p50 ${churnResult.latencyP50Ms.toFixed(0)} ms p99 ${churnResult.latencyP99Ms.toFixed(0)} ms max ${churnResult.latencyMaxMs.toFixed(0)} ms, loop delay p99 ${churnResult.loopDelayP99Ms.toFixed(1)} ms, ${churnResult.delta.encodes} encodes for ${churnResult.servedChanges} served changes, wasted ${churnResult.delta.wastedPushes}, CPU ${churnResult.delta.cpuMs.toFixed(0)} ms, ${(churnResult.delta.bytesSent / 1e6).toFixed(0)} MB sent, ${(churnResult.upstreamBytes / 1e6).toFixed(0)} MB of upstream states received`,
    );

    // Every upstream restarts with identical content (and new versions), once the churn's last
    // pushes are done and its garbage is collected, so neither is counted here. Four times: the
    // first is reported apart, as V8 compiles the code only a resync runs while it runs (24
    // functions, some 70 ms of compiling on L, seen with `--trace-opt`); of the three after it the
    // median is kept, as one may carry the next full collection of the heap, which V8 starts on the
    // first activity after one it was made to run.
    await quiesce(server, 10_000);
    await server.memory();
    await quiesce(server, 2_000);
    const idleBefore = await idleCost(server);
    const measured: MeasuredResync[] = [];
    let resyncStateBytes: number[] = [];
    for (let round = 0; round <= IDENTICAL_RESYNCS; round++) {
      const r0 = await server.counters();
      const sent0 = rig.simulators.map((s) => s.bytesSent);
      const resyncStart = performance.now();
      for (const sim of rig.simulators) sim.dropStreams();
      await waitFor(() => rig.simulators.every((s) => s.answeredTypes >= 2), 30_000);
      const reads = await quiesce(server, 10_000);
      const r1 = await server.counters();
      resyncStateBytes = rig.simulators.map((s, i) => s.bytesSent - (sent0[i] as number));
      const identical = delta(r0, r1);
      measured.push({
        ms: performance.now() - resyncStart,
        reads,
        gross: identical.cpuMs,
        bytes: identical.bytesSent,
        pushes: identical.pushes,
      });
      verify(fleet, model, 'meshmux after identical resync');
    }
    peaks.note('identical resyncs', await server.counters());
    const idleAfter = await idleCost(server);
    const { idle, resyncs, first, later, netMs, grossMs } = resyncFigures(measured, idleBefore, idleAfter);
    const identical = {
      bytesSent: resyncs.reduce((sum, r) => sum + r.bytes, 0),
      pushes: resyncs.reduce((sum, r) => sum + r.pushes, 0),
    };
    log(
      `  identical resync (median of ${IDENTICAL_RESYNCS} after the first): ${identical.bytesSent} bytes, ${identical.pushes} pushes, CPU ${netMs.toFixed(0)} ms (each: ${later.map((r) => r.net.toFixed(0)).join(', ')} ms; the first ${first.net.toFixed(0)} ms; less what the idle server costs over as long: ${idle.cpuMsPerSecond.toFixed(1)} ms/s and ${idle.cpuMsPerRead.toFixed(2)} ms per read of its counters (before the resyncs ${idleBefore.cpuMsPerSecond.toFixed(1)} and ${idleBefore.cpuMsPerRead.toFixed(2)}, after ${idleAfter.cpuMsPerSecond.toFixed(1)} and ${idleAfter.cpuMsPerRead.toFixed(2)}); measured ${resyncs.map((r) => r.gross.toFixed(0)).join(', ')} ms)`,
    );

    // One upstream restarts with 1% of its objects changed.
    const resyncTracker = new LatencyTracker(fleet);
    rig.track(resyncTracker);
    const u0 = rig.simulators[0] as SimulatedUpstream;
    const edits = model.editShare(0.01, 0);
    const affected = new Set<PolicyName>();
    for (const c of edits) {
      for (const p of c.affected) affected.add(p);
      resyncTracker.expect(SE_URL, 0, u0.nextSeq, c.affected);
    }
    await sleep(200);
    const s0 = await server.counters();
    u0.dropStreams();
    await resyncTracker.settle(60_000);
    await quiesce(server, 5_000);
    const s1 = await server.counters();
    peaks.note('1%-changed resync', s1);
    rig.track(undefined);
    resyncTracker.close();
    verify(fleet, model, 'meshmux after 1%-changed resync');
    const sentAt = Math.min(...resyncTracker.changes.map((c) => c.sentAt ?? Number.POSITIVE_INFINITY));
    const doneAt = Math.max(...resyncTracker.changes.map((c) => c.doneAt ?? Number.POSITIVE_INFINITY));
    const changedResync = {
      ms: doneAt - sentAt,
      changes: edits.length,
      servedChanges: servedChanges(edits),
      delta: delta(s0, s1),
      bytesOverMinimal: delta(s0, s1).bytesSent / minimalBytes(fleet, new Set([SE_URL]), affected),
    };
    log(
      `  1%-changed resync: ${changedResync.ms.toFixed(0)} ms, ${changedResync.delta.encodes} encodes for ${changedResync.servedChanges} served changes, bytes/minimal ${changedResync.bytesOverMinimal.toFixed(3)}`,
    );

    // Isolated changes, one at a time, 300 ms apart.
    const isolated: Record<Zone, Partial<Record<PolicyName, number[]>>> = { edge: {}, east: {}, west: {} };
    const isolatedSplit = {
      sourceMs: [] as number[],
      servingMs: {} as Partial<Record<PolicyName, number[]>>,
    };
    // Server CPU from just before an edge object changes upstream to the first push it causes: the
    // server is idle in between (300 ms apart), so this is its CPU before the change's first byte.
    const cpuBeforeFirstByte: number[] = [];
    const smallViewStateBytes: number[] = [];
    const rounds = Math.max(timing.isolated, timing.smallViewChanges);
    for (let round = 0; round < rounds; round++) {
      for (const zone of ['edge', 'east', 'west'] as const) {
        // On L a change to a large view moves gigabytes: once is enough, and of the two large
        // views only the largest; the small view repeats.
        if (shape.name === 'L' && (zone === 'east' || (round > 0 && zone !== 'edge'))) continue;
        if (round >= (zone === 'edge' ? timing.smallViewChanges : timing.isolated)) continue;
        const tracker = new LatencyTracker(fleet);
        rig.track(tracker);
        const pick = model.servedInZone(zone);
        if (zone === 'edge') await server.mark();
        const upstreamBytes = rig.upstreamBytes;
        rig.apply(model.change('endpoints', pick.upstream, pick), tracker, true);
        await tracker.settle(60_000);
        if (zone === 'edge') {
          const cpu = await server.firstPushCpuMs();
          if (cpu !== undefined) cpuBeforeFirstByte.push(cpu);
          smallViewStateBytes.push(rig.upstreamBytes - upstreamBytes);
        }
        rig.track(undefined);
        tracker.close();
        const c = tracker.changes[0];
        const snapshotAt = ((await server.counters()).lastSnapshotAtMs ?? 0) - performance.timeOrigin;
        if (c?.sentAt !== undefined) {
          isolatedSplit.sourceMs.push(snapshotAt - c.sentAt);
          for (const [policy, at] of c.policyDoneAt) {
            (isolated[zone][policy] ??= []).push(at - c.sentAt);
            (isolatedSplit.servingMs[policy] ??= []).push(at - snapshotAt);
          }
        }
        await sleep(300);
      }
    }
    verify(fleet, model, 'meshmux after isolated changes');
    peaks.note('isolated changes', await server.counters());
    log(
      `  one-object change to the small view: server CPU before the first byte p50 ${percentile(cpuBeforeFirstByte, 50).toFixed(1)} ms, max ${Math.max(...cpuBeforeFirstByte).toFixed(1)} ms`,
    );
    log(
      `  isolated, source path (upstream write → snapshot at the ADS server): p50 ${percentile(isolatedSplit.sourceMs, 50).toFixed(1)} ms; serving path p50: ${Object.entries(
        isolatedSplit.servingMs,
      )
        .map(([p, v]) => `${p} ${percentile(v, 50).toFixed(1)} ms`)
        .join(', ')}`,
    );
    log(
      `  isolated: ${(['edge', 'east', 'west'] as const)
        .filter((z) => Object.keys(isolated[z]).length > 0)
        .map(
          (z) =>
            `${z} object → ${Object.entries(isolated[z])
              .map(([p, v]) => `${p} ${percentile(v, 50).toFixed(1)} ms`)
              .join(', ')}`,
        )
        .join('; ')}`,
    );
    fleet.close();
    clientWastedPushes += wastedAtClients(fleet);
    await sleep(300);

    // One client of the small view: the latency floor.
    const one = new Fleet(server.xdsAddress, 1, { first: 9000, policy: 'edge' }).start();
    await one.synced(performance.now(), 60_000);
    const floor: number[] = [];
    const floorServing: number[] = [];
    for (let i = 0; i < timing.floorChanges; i++) {
      const tracker = new LatencyTracker(one);
      rig.track(tracker);
      const pick = model.servedInZone('edge');
      rig.apply(model.change('endpoints', pick.upstream, pick), tracker, true);
      await tracker.settle(10_000);
      rig.track(undefined);
      tracker.close();
      const c = tracker.changes[0];
      const snapshotAt = ((await server.counters()).lastSnapshotAtMs ?? 0) - performance.timeOrigin;
      if (c?.doneAt !== undefined && c.sentAt !== undefined) {
        floor.push(c.doneAt - c.sentAt);
        floorServing.push(c.doneAt - snapshotAt);
      }
      await sleep(100);
    }
    verify(one, model, 'meshmux 1-client floor');
    one.close();
    const floorMs = percentile(floor, 50);
    const floorServingMs = percentile(floorServing, 50);
    log(
      `  1-client floor: ${floorMs.toFixed(2)} ms (${floorServingMs.toFixed(2)} ms after the snapshot reached the ADS server)`,
    );
    const last = await server.counters();
    peaks.note('1-client floor', last);
    const peakRssPhase = peaks.reached(last.process.maxRssBytes);
    log(
      `  peak RSS ${(last.process.maxRssBytes / 1e6).toFixed(0)} MB (reached in: ${peakRssPhase}), steady (the istiods synced) ${(steady.process.rssBytes / 1e6).toFixed(0)} MB`,
    );
    return {
      cold,
      warm,
      churn: churnResult,
      identicalResync: {
        bytes: identical.bytesSent,
        cpuMs: netMs,
        grossCpuMs: grossMs,
        firstCpuMs: first.net,
        idle,
        pushes: identical.pushes,
        upstreamBytes: resyncStateBytes,
      },
      changedResync,
      isolated,
      isolatedSplit,
      floorMs,
      floorServingMs,
      cpuBeforeFirstByteMs: cpuBeforeFirstByte,
      smallViewStateBytes,
      discardingSyncMs: discarding.ms,
      discardingColdSyncMs,
      clientWastedPushes: clientWastedPushes + wastedAtClients(one),
      memory: {
        baseRssBytes: server.base.rssBytes,
        afterFleetRssBytes: afterFleet.rssBytes,
        settledRssBytes: settledFleet.reading.rssBytes,
        settledAfterMs: settledFleet.afterMs,
        baseBytes: retainedBytes(server.base),
        syncedNoClientsBytes: retainedBytes(syncedNoClients),
        afterFleetBytes: retainedBytes(afterFleet),
        perClientBytes,
        servedObjects: model.servedCount(),
        peakRssBytes: last.process.maxRssBytes,
        peakRssPhase,
        steadyRssBytes: steady.process.rssBytes,
        peakBytesInFlight: last.peakBytesInFlight ?? 0,
      },
    };
  } finally {
    await server.stop();
  }
}

async function waitFor(check: () => boolean, timeoutMs: number): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!check() && performance.now() < end) await sleep(20);
}

/** A server's sync of the baseline fleet, then its latency under the baseline's churn. */
export interface BaselineRun {
  readonly sync: SyncResult;
  readonly churn: ChurnResult;
}

export interface BaselineResults {
  readonly clients: number;
  /** Absent where the timing skips it (shape L). */
  readonly naiveSync?: SyncResult;
  /**
   * meshmux on the baselines' fleet, under a churn as long and as fast as theirs: the figure the
   * baselines' latency is set against, the same load on each server.
   */
  readonly meshmux: BaselineRun;
  readonly istiod: BaselineRun;
  /** Absent where the timing skips it (shape L). */
  readonly nacos?: BaselineRun;
}

async function baselineChurn(
  mode: 'meshmux' | 'istiod' | 'nacos',
  rig: ShapeRig,
  timing: Timing,
  log: Log,
): Promise<BaselineRun> {
  const server = await serverOnRig(mode, rig, timing);
  try {
    const fleet = new Fleet(server.xdsAddress, rig.shape.baselineClients);
    const sync = await measureSync(server, fleet);
    verify(fleet, rig.model, `${mode} sync`);
    await warmUp(rig, fleet, timing, mode);
    const tracker = new LatencyTracker(fleet);
    rig.track(tracker);
    const c0 = await server.counters();
    const upstreamBytes0 = rig.upstreamBytes;
    const applied = await churn(rig, tracker, timing, timing.baselineChurnMs);
    for (const sim of rig.simulators) sim.flush();
    const settled = await tracker.settle(90_000);
    const c1 = await server.counters();
    rig.track(undefined);
    tracker.close();
    verify(fleet, rig.model, `${mode} after churn`);
    fleet.close();
    const lat = tracker.latencies();
    const result: ChurnResult = {
      changes: applied.length,
      latencyP50Ms: percentile(lat, 50),
      latencyP99Ms: percentile(lat, 99),
      latencyMaxMs: Math.max(...lat),
      unresolved: settled ? 0 : tracker.unresolved,
      delta: delta(c0, c1),
      servedChanges: servedChanges(applied),
      loopDelayP99Ms: c1.process.eventLoopDelayP99Ms,
      loopDelayMaxMs: c1.process.eventLoopDelayMaxMs,
      upstreamBytes: rig.upstreamBytes - upstreamBytes0,
    };
    log(
      `  ${mode}: sync ${sync.ms.toFixed(0)} ms (CPU ${sync.delta.cpuMs.toFixed(0)} ms); churn latency p50 ${result.latencyP50Ms.toFixed(0)} ms p99 ${result.latencyP99Ms.toFixed(0)} ms, CPU ${result.delta.cpuMs.toFixed(0)} ms`,
    );
    return { sync, churn: result };
  } finally {
    await server.stop();
  }
}

/**
 * On the baseline fleet: meshmux's churn, the naive server's sync, then istiod-like and Nacos-like
 * churn.
 */
export async function measureBaselines(rig: ShapeRig, timing: Timing, log: Log): Promise<BaselineResults> {
  const meshmux = await baselineChurn('meshmux', rig, timing, log);
  if (!timing.allBaselines) {
    return {
      clients: rig.shape.baselineClients,
      meshmux,
      istiod: await baselineChurn('istiod', rig, timing, log),
    };
  }
  const naive = await ServerProcess.start({ mode: 'naive', shape: rig.shape.name, upstreams: rig.addresses });
  let naiveSync: SyncResult;
  try {
    const fleet = new Fleet(naive.xdsAddress, rig.shape.baselineClients);
    naiveSync = await measureSync(naive, fleet);
    verify(fleet, rig.model, 'naive sync');
    fleet.close();
    log(
      `  naive: sync ${naiveSync.ms.toFixed(0)} ms, CPU ${naiveSync.delta.cpuMs.toFixed(0)} ms, ${naiveSync.delta.encodes} encodes`,
    );
  } finally {
    await naive.stop();
  }
  const istiod = await baselineChurn('istiod', rig, timing, log);
  const nacos = await baselineChurn('nacos', rig, timing, log);
  return { clients: rig.shape.baselineClients, naiveSync, meshmux, istiod, nacos };
}
