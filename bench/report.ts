/**
 * Turns one shape's measurements into the ratios of the design's goal table, and the whole run
 * into `bench/results.json` and the table in `BENCHMARKS.md` (between its generated markers).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { Shape } from './fixtures.js';
import { percentile } from './fleet.js';
import { DEFAULT_WRITE_BUDGET } from '../src/downstream/write-budget.js';
import type { BaselineResults, ChurnResult, MeshmuxResults, RawResults } from './phases.js';
import { receiveFigures, type BareReceive } from './bare-receive.js';
import type { StartupResults, TierResults } from './scale-phases.js';

/** Everything measured on one shape. */
export interface ShapeMeasurements {
  readonly shape: Shape;
  readonly raw: RawResults;
  readonly meshmux: MeshmuxResults;
  readonly baselines: BaselineResults | undefined;
  readonly tier?: TierResults;
  readonly startup?: StartupResults | undefined;
  /** A bare process receiving the upstream state of a change to the small view (the CPU's floor). */
  readonly receive?: BareReceive;
  /** A bare process receiving the states an identical resync brings, a new stream per upstream. */
  readonly resyncReceive?: BareReceive;
}

const round = (n: number, digits = 2): number => (Number.isFinite(n) ? Number(n.toFixed(digits)) : n);

/** The figures of one shape as `results.json` holds them. */
export function summarize(m: ShapeMeasurements): Record<string, unknown> {
  const { raw, meshmux: mm, baselines: b, shape } = m;
  const mb = (bytes: number): number => bytes / 1e6;
  const transport = (bytes: number): number => mb(bytes) * raw.cpuMsPerMB;
  const smallView = mm.isolated.edge.edge ?? [];
  const bigView = [...(mm.isolated.east.core ?? []), ...(mm.isolated.west.core ?? [])];
  const eastView = mm.isolated.east.east ?? [];
  const receiveFloor = m.receive === undefined ? undefined : receiveFigures(m.receive);
  const resyncFloor =
    m.resyncReceive === undefined
      ? undefined
      : { ...receiveFigures(m.resyncReceive), stateMb: mb(m.resyncReceive.bytes) };
  const servingSmall = mm.isolatedSplit.servingMs.edge ?? [];
  const servingLargest = mm.isolatedSplit.servingMs.core ?? [];
  const fleetBytes =
    mm.memory.afterFleetBytes - mm.memory.baseBytes - shape.clients * mm.memory.perClientBytes;
  // The same as RSS, the whole process: what the operator's dashboard and the OOM killer see.
  const fleetRssBytes =
    mm.memory.afterFleetRssBytes - mm.memory.baseRssBytes - shape.clients * mm.memory.perClientBytes;
  const settledRssBytes =
    mm.memory.settledRssBytes - mm.memory.baseRssBytes - shape.clients * mm.memory.perClientBytes;
  return {
    shape: {
      name: shape.name,
      serviceEntries: shape.serviceEntries,
      virtualServices: shape.virtualServices,
      clients: shape.clients,
      servedObjects: mm.memory.servedObjects,
    },
    ratios: {
      syncVsRaw: { cold: round(mm.cold.ms / raw.syncMs), warm: round(mm.warm.ms / raw.syncMs) },
      // Both to clients that only count bytes: the servers' own floor, without the checking fleet's cost.
      warmSyncVsRawDiscarding: round(mm.discardingSyncMs / raw.discardingSyncMs),
      coldSyncVsRawDiscarding: round(mm.discardingColdSyncMs / raw.discardingSyncMs),
      latencyP99VsRaw: round(mm.churn.latencyP99Ms / raw.pushMs.core),
      latencyP99VsRawAllViews: round(mm.churn.latencyP99Ms / raw.pushMs.all),
      cpuVsTransport: {
        cold: round(mm.cold.delta.cpuMs / transport(mm.cold.delta.bytesSent)),
        warm: round(mm.warm.delta.cpuMs / transport(mm.warm.delta.bytesSent)),
        churn: round(mm.churn.delta.cpuMs / transport(mm.churn.delta.bytesSent)),
        // The upstreams' states received as well, at the same cost per MB: the part of the churn's
        // CPU a state-of-the-world upstream asks for whatever meshmux does with the states.
        churnSentAndReceived: round(
          mm.churn.delta.cpuMs / transport(mm.churn.delta.bytesSent + mm.churn.upstreamBytes),
        ),
      },
      isolatedVsRawPush: {
        smallView: round(percentile(smallView, 50) - raw.pushMs.edge, 1),
        largestView: round(percentile(bigView, 50) - raw.pushMs.core, 1),
        smallViewServingPath: round(percentile(servingSmall, 50) - raw.pushMs.edge, 1),
        largestViewServingPath: round(percentile(servingLargest, 50) - raw.pushMs.core, 1),
      },
    },
    vsIstiod: b === undefined ? undefined : versusBaseline(b.istiod, b, mm),
    vsNacos: b?.nacos === undefined ? undefined : versusBaseline(b.nacos, b, mm),
    counters: {
      encodesPerChangedResource: round(mm.churn.delta.encodes / Math.max(1, mm.churn.servedChanges)),
      encodesPerChangedResourceResync: round(
        mm.changedResync.delta.encodes / Math.max(1, mm.changedResync.servedChanges),
      ),
      coldEncodesPerServedObject: round(mm.cold.delta.encodes / mm.memory.servedObjects),
      warmEncodes: mm.warm.delta.encodes,
      wastedPushesAtClients: mm.clientWastedPushes,
      wastedPushes:
        mm.cold.delta.wastedPushes +
        mm.warm.delta.wastedPushes +
        mm.churn.delta.wastedPushes +
        mm.changedResync.delta.wastedPushes,
      resyncBytes: mm.identicalResync.bytes,
      resyncPushes: mm.identicalResync.pushes,
      resyncCpuVsFullPush: round(mm.identicalResync.cpuMs / mm.warm.delta.cpuMs, 3),
      resyncGrossCpuVsFullPush: round(mm.identicalResync.grossCpuMs / mm.warm.delta.cpuMs, 3),
      firstResyncCpuVsFullPush: round(mm.identicalResync.firstCpuMs / mm.warm.delta.cpuMs, 3),
      ...(resyncFloor === undefined
        ? {}
        : {
            resyncFloorVsFullPush: round(resyncFloor.p50Ms / mm.warm.delta.cpuMs, 3),
            resyncStateMb: round(resyncFloor.stateMb, 1),
            resyncFloorMs: round(resyncFloor.p50Ms, 1),
            resyncFloorLowestMs: round(resyncFloor.lowestMs, 1),
          }),
      bytesOverMinimal: {
        cold: round(mm.cold.bytesOverMinimal, 3),
        changedResync: round(mm.changedResync.bytesOverMinimal, 3),
      },
    },
    delta:
      m.tier === undefined
        ? undefined
        : {
            bytesPerChangeAcrossTier: percentile(m.tier.bytesPerChange, 50),
            bytesPerChangeAcrossTierMax: Math.max(...m.tier.bytesPerChange),
            firstStateMb: round(mb(m.tier.firstStateBytes), 1),
          },
    startup:
      m.startup === undefined
        ? undefined
        : {
            readyMsAt100k: round(percentile(m.startup.readyMs, 50), 0),
            readyMsAt100kRuns: m.startup.readyMs.map((ms) => round(ms, 0)),
            readyCpuMsAt100kRuns: m.startup.readyCpuMs.map((ms) => round(ms, 0)),
            readySystemCpuMsAt100k: round(percentile(m.startup.readySystemCpuMs, 50), 0),
            readyPageFaultsAt100kRuns: m.startup.readyPageFaults,
          },
    perChange: {
      cpuMsBeforeFirstByte: round(percentile(mm.cpuBeforeFirstByteMs, 50), 1),
      cpuMsBeforeFirstByteMax: round(Math.max(...mm.cpuBeforeFirstByteMs), 1),
      upstreamStateMb: round(mb(percentile(mm.smallViewStateBytes, 50)), 1),
      ...(receiveFloor === undefined
        ? {}
        : {
            receiveFloorMs: round(receiveFloor.p50Ms, 1),
            receiveFloorLowestMs: round(receiveFloor.lowestMs, 1),
          }),
    },
    memory: {
      rssMbPer10kResources: round(mb(fleetRssBytes) / (mm.memory.servedObjects / 10_000), 1),
      rssMbPer10kSettled: round(mb(settledRssBytes) / (mm.memory.servedObjects / 10_000), 1),
      settledRssMb: round(mb(mm.memory.settledRssBytes), 0),
      settledAfterS: round(mm.memory.settledAfterMs / 1000, 0),
      mbPer10kResources: round(mb(fleetBytes) / (mm.memory.servedObjects / 10_000), 1),
      kbPerClient: round(mm.memory.perClientBytes / 1024, 1),
      peakRssMb: round(mb(mm.memory.peakRssBytes), 0),
      peakRssPhase: mm.memory.peakRssPhase,
      steadyRssMb: round(mb(mm.memory.steadyRssBytes), 0),
      writeBudgetMb: round(mb(DEFAULT_WRITE_BUDGET.maxBytes), 0),
      peakBytesInFlightMb: round(mb(mm.memory.peakBytesInFlight), 1),
    },
    latency: {
      churnP50Ms: round(mm.churn.latencyP50Ms, 1),
      churnP99Ms: round(mm.churn.latencyP99Ms, 1),
      churnMaxMs: round(mm.churn.latencyMaxMs, 1),
      churnChanges: mm.churn.changes,
      churnUnresolved: mm.churn.unresolved,
      isolatedSmallViewP50Ms: round(percentile(smallView, 50), 1),
      isolatedSmallViewMaxMs: round(Math.max(...smallView), 1),
      isolatedTeamViewP50Ms: round(percentile(eastView, 50), 1),
      isolatedLargestViewP50Ms: round(percentile(bigView, 50), 1),
      floorMs: round(mm.floorMs, 2),
      floorServingPathMs: round(mm.floorServingMs, 2),
      isolatedSourcePathP50Ms: round(percentile(mm.isolatedSplit.sourceMs, 50), 1),
      isolatedSmallViewServingPathP50Ms: round(percentile(servingSmall, 50), 1),
      isolatedLargestViewServingPathP50Ms: round(percentile(servingLargest, 50), 1),
      changedResyncMs: round(mm.changedResync.ms, 0),
      baselineFleetChurnP99Ms: b === undefined ? undefined : round(b.meshmux.churn.latencyP99Ms, 0),
      istiodChurnP99Ms: b === undefined ? undefined : round(b.istiod.churn.latencyP99Ms, 0),
      nacosChurnP99Ms: b?.nacos === undefined ? undefined : round(b.nacos.churn.latencyP99Ms, 0),
    },
    loopDelay: {
      churnP99Ms: round(mm.churn.loopDelayP99Ms, 1),
      churnMaxMs: round(mm.churn.loopDelayMaxMs, 1),
    },
    raw: {
      syncMs: round(raw.syncMs, 0),
      bytesMb: round(mb(raw.bytes), 0),
      cpuMsPerMb: round(raw.cpuMsPerMB, 3),
      pushMs: Object.fromEntries(Object.entries(raw.pushMs).map(([k, v]) => [k, round(v, 1)])),
      pushMsCoreCountBounded: round(raw.pushMsCountBounded, 1),
      discardingSyncMs: round(raw.discardingSyncMs, 0),
      floorMs: round(raw.floorMs, 2),
    },
    meshmux: {
      coldSyncMs: round(mm.cold.ms, 0),
      warmSyncMs: round(mm.warm.ms, 0),
      discardingWarmSyncMs: round(mm.discardingSyncMs, 0),
      discardingColdSyncMs: round(mm.discardingColdSyncMs, 0),
      coldCpuMs: round(mm.cold.delta.cpuMs, 0),
      warmCpuMs: round(mm.warm.delta.cpuMs, 0),
      churnCpuMs: round(mm.churn.delta.cpuMs, 0),
      coldEncodes: mm.cold.delta.encodes,
      coldAssemblies: mm.cold.delta.assemblies,
      bytesSentColdMb: round(mb(mm.cold.delta.bytesSent), 0),
      churnBytesMb: round(mb(mm.churn.delta.bytesSent), 0),
      churnUpstreamMb: round(mb(mm.churn.upstreamBytes), 0),
      identicalResyncCpuMs: round(mm.identicalResync.cpuMs, 0),
      identicalResyncGrossCpuMs: round(mm.identicalResync.grossCpuMs, 0),
      identicalResyncFirstCpuMs: round(mm.identicalResync.firstCpuMs, 0),
      idleCpuMsPerSecond: round(mm.identicalResync.idle.cpuMsPerSecond, 1),
      counterReadCpuMs: round(mm.identicalResync.idle.cpuMsPerRead, 2),
    },
    baselines:
      b === undefined
        ? undefined
        : {
            clients: b.clients,
            ...(b.naiveSync === undefined
              ? {}
              : {
                  naiveSyncMs: round(b.naiveSync.ms, 0),
                  naiveSyncCpuMs: round(b.naiveSync.delta.cpuMs, 0),
                  naiveEncodes: b.naiveSync.delta.encodes,
                }),
            meshmuxSyncMs: round(b.meshmux.sync.ms, 0),
            meshmuxChurnP50Ms: round(b.meshmux.churn.latencyP50Ms, 0),
            meshmuxChurnP99Ms: round(b.meshmux.churn.latencyP99Ms, 0),
            meshmuxChurnCpuMs: round(b.meshmux.churn.delta.cpuMs, 0),
            istiodSyncMs: round(b.istiod.sync.ms, 0),
            istiodChurnP50Ms: round(b.istiod.churn.latencyP50Ms, 0),
            istiodChurnP99Ms: round(b.istiod.churn.latencyP99Ms, 0),
            istiodChurnCpuMs: round(b.istiod.churn.delta.cpuMs, 0),
            ...(b.nacos === undefined
              ? {}
              : {
                  nacosSyncMs: round(b.nacos.sync.ms, 0),
                  nacosChurnP50Ms: round(b.nacos.churn.latencyP50Ms, 0),
                  nacosChurnP99Ms: round(b.nacos.churn.latencyP99Ms, 0),
                  nacosChurnCpuMs: round(b.nacos.churn.delta.cpuMs, 0),
                }),
          },
  };
}

/** The part of a server's run {@link versusBaseline} reads. */
interface ChurnP99 {
  readonly churn: Pick<ChurnResult, 'latencyP99Ms'>;
}

/**
 * How much later a baseline's churn latency p99 is than meshmux's: against meshmux's churn on the
 * baseline's own fleet (`latencyP99`, the goal: the same clients, changes and duration for each
 * server), and against meshmux's churn on the full fleet (`latencyP99FullFleet`, for reference: many
 * times the clients on meshmux's side).
 */
export function versusBaseline(
  baseline: ChurnP99,
  b: { readonly clients: number; readonly meshmux: ChurnP99 },
  mm: ChurnP99,
): { latencyP99: number; latencyP99FullFleet: number; clients: number } {
  return {
    latencyP99: round(baseline.churn.latencyP99Ms / b.meshmux.churn.latencyP99Ms, 1),
    latencyP99FullFleet: round(baseline.churn.latencyP99Ms / mm.churn.latencyP99Ms, 1),
    clients: b.clients,
  };
}

type Summary = ReturnType<typeof summarize>;

/** A figure of the summary as the table shows it. */
function figure(v: unknown): string {
  return (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'string' ? String(v) : 'n/a';
}

function get(summary: Summary | undefined, path: string): unknown {
  let v: unknown = summary;
  for (const part of path.split('.')) v = (v as Record<string, unknown> | undefined)?.[part];
  return v;
}

interface GoalRow {
  readonly metric: string;
  readonly goal: string;
  readonly path: string;
  readonly met: (value: number, summary: Summary) => boolean;
  readonly unit?: string;
}

const GOALS: readonly GoalRow[] = [
  {
    metric: 'initial sync, warm / raw fan-out',
    goal: '≤ 1.3',
    path: 'ratios.syncVsRaw.warm',
    met: (v) => v <= 1.3,
  },
  {
    metric: '… warm, both to clients that only count bytes',
    goal: '(reference)',
    path: 'ratios.warmSyncVsRawDiscarding',
    met: () => true,
  },
  {
    metric: 'initial sync, cold / raw fan-out',
    goal: '≤ 1.6',
    path: 'ratios.syncVsRaw.cold',
    met: (v) => v <= 1.6,
  },
  {
    metric: '… cold, both to clients that only count bytes',
    goal: '(reference)',
    path: 'ratios.coldSyncVsRawDiscarding',
    met: () => true,
  },
  {
    metric: 'one-object change: server CPU before the first byte (p50)',
    goal: '≤ 5 ms',
    path: 'perChange.cpuMsBeforeFirstByte',
    met: (v) => v <= 5,
    unit: 'ms',
  },
  {
    metric: '… a bare process receiving the state the change came in (p50; the floor)',
    goal: '(reference)',
    path: 'perChange.receiveFloorMs',
    met: () => true,
    unit: 'ms',
  },
  {
    metric: 'one-object change across a delta tier',
    goal: '≈ 1 KB',
    path: 'delta.bytesPerChangeAcrossTier',
    met: (v) => v <= 2048,
    unit: 'B',
  },
  {
    metric: 'start to ready, 100k objects upstream',
    goal: '≤ 3 s',
    path: 'startup.readyMsAt100k',
    met: (v) => v <= 3000,
    unit: 'ms',
  },
  {
    metric: '… of it the server’s time in the kernel (p50; mostly page faults on this machine)',
    goal: '(reference)',
    path: 'startup.readySystemCpuMsAt100k',
    met: () => true,
    unit: 'ms',
  },
  {
    metric: 'isolated change, small view (p50)',
    goal: '≤ 25 ms',
    path: 'latency.isolatedSmallViewP50Ms',
    met: (v) => v <= 25,
    unit: 'ms',
  },
  {
    metric: 'isolated change, small view − raw push of the view',
    goal: '≤ 10 ms',
    path: 'ratios.isolatedVsRawPush.smallView',
    met: (v) => v <= 10,
    unit: 'ms',
  },
  {
    metric: 'isolated change, largest view − raw push of the view',
    goal: '≤ 10 ms',
    path: 'ratios.isolatedVsRawPush.largestView',
    met: (v) => v <= 10,
    unit: 'ms',
  },
  {
    metric: '… serving path only (snapshot at the ADS server → clients), small view p50',
    goal: '(reference)',
    path: 'latency.isolatedSmallViewServingPathP50Ms',
    met: () => true,
    unit: 'ms',
  },
  {
    metric: '… serving path only, largest view − raw push of the view',
    goal: '(reference)',
    path: 'ratios.isolatedVsRawPush.largestViewServingPath',
    met: () => true,
    unit: 'ms',
  },
  {
    metric: '… source path (upstream write → snapshot at the ADS server), p50',
    goal: '(reference)',
    path: 'latency.isolatedSourcePathP50Ms',
    met: () => true,
    unit: 'ms',
  },
  {
    metric: 'churn latency p99 / raw push of the largest view',
    goal: '≤ 2',
    path: 'ratios.latencyP99VsRaw',
    met: (v) => v <= 2,
  },
  {
    metric: 'churn latency p99 / raw push of every view at once',
    goal: '(reference)',
    path: 'ratios.latencyP99VsRawAllViews',
    met: () => true,
  },
  {
    metric: 'istiod-like p99 / meshmux p99 (churn, the same fleet of each)',
    goal: '≥ 10',
    path: 'vsIstiod.latencyP99',
    met: (v) => v >= 10,
  },
  {
    metric: '… meshmux on the full fleet',
    goal: '(reference)',
    path: 'vsIstiod.latencyP99FullFleet',
    met: () => true,
  },
  {
    metric: 'wasted pushes, counted at the clients (resources they already held)',
    goal: '0',
    path: 'counters.wastedPushesAtClients',
    met: (v) => v === 0,
  },
  {
    metric: '… as the server counts them',
    goal: '(reference)',
    path: 'counters.wastedPushes',
    met: () => true,
  },
  {
    metric: 'bytes sent / minimal, cold sync',
    goal: '1.00',
    path: 'counters.bytesOverMinimal.cold',
    met: (v) => v <= 1.0,
  },
  {
    metric: 'bytes sent / minimal, 1%-changed resync',
    goal: '1.00',
    path: 'counters.bytesOverMinimal.changedResync',
    met: (v) => v <= 1.0,
  },
  {
    metric: 'identical resync: bytes to clients',
    goal: '0',
    path: 'counters.resyncBytes',
    met: (v) => v === 0,
  },
  {
    metric: 'identical resync: CPU / one full push',
    goal: '≤ 0.05',
    path: 'counters.resyncCpuVsFullPush',
    met: (v) => v <= 0.05,
  },
  {
    metric: '… with what the idle server costs over as long',
    goal: '(reference)',
    path: 'counters.resyncGrossCpuVsFullPush',
    met: () => true,
  },
  {
    metric: '… the process’s first identical resync (V8 compiles the code resyncs run)',
    goal: '(reference)',
    path: 'counters.firstResyncCpuVsFullPush',
    met: () => true,
  },
  {
    metric:
      '… a bare process receiving the states a resync brings, a new stream per upstream (p50; the floor)',
    goal: '(reference)',
    path: 'counters.resyncFloorVsFullPush',
    met: () => true,
  },
  {
    metric: 'encodes per changed resource (churn)',
    goal: '≤ 1',
    path: 'counters.encodesPerChangedResource',
    met: (v) => v <= 1,
  },
  {
    metric: 'encodes per changed resource (1% resync)',
    goal: '≤ 1',
    path: 'counters.encodesPerChangedResourceResync',
    met: (v) => v <= 1,
  },
  {
    metric: 'server CPU / transport cost, warm sync',
    goal: '≤ 1.3',
    path: 'ratios.cpuVsTransport.warm',
    met: (v) => v <= 1.3,
  },
  {
    metric: 'server CPU / transport cost, cold sync',
    goal: '≤ 1.3',
    path: 'ratios.cpuVsTransport.cold',
    met: (v) => v <= 1.3,
  },
  {
    metric: 'server CPU / transport cost, churn',
    goal: '≤ 1.3',
    path: 'ratios.cpuVsTransport.churn',
    met: (v) => v <= 1.3,
  },
  {
    metric: "… with the upstreams' states received counted as transport too",
    goal: '(reference)',
    path: 'ratios.cpuVsTransport.churnSentAndReceived',
    met: () => true,
  },
  {
    metric: 'memory per 10k resources (RSS)',
    goal: '≤ 20 MB',
    path: 'memory.rssMbPer10kResources',
    met: (v) => v <= 20,
    unit: 'MB',
  },
  {
    metric: '… once settled: the istiods connected and idle, V8 having handed back what the sync left unused',
    goal: '(reference)',
    path: 'memory.rssMbPer10kSettled',
    met: () => true,
    unit: 'MB',
  },
  {
    metric: '… heap + external per 10k resources',
    goal: '(reference)',
    path: 'memory.mbPer10kResources',
    met: () => true,
    unit: 'MB',
  },
  {
    metric: 'memory per client',
    goal: '≤ 150 KB',
    path: 'memory.kbPerClient',
    met: (v) => v <= 150,
    unit: 'KB',
  },
  {
    metric: 'peak RSS vs steady + write budget',
    goal: '≤ steady + budget',
    path: 'memory.peakRssMb',
    met: (v, s) => v <= Number(get(s, 'memory.steadyRssMb')) + Number(get(s, 'memory.writeBudgetMb')),
    unit: 'MB',
  },
  {
    metric: 'event-loop delay p99 under churn',
    goal: '≤ 50 ms (S), ≤ 100 ms (L)',
    path: 'loopDelay.churnP99Ms',
    met: (v, s) => v <= (get(s, 'shape.name') === 'S' ? 50 : 100),
    unit: 'ms',
  },
];

function cell(summary: Summary | undefined, row: GoalRow): string {
  if (summary === undefined) return '–';
  const v = get(summary, row.path);
  if (typeof v !== 'number' || Number.isNaN(v)) return 'n/a';
  const mark = row.goal === '(reference)' ? '' : row.met(v, summary) ? ' ✅' : ' ❌';
  return `${v}${row.unit === undefined ? '' : ` ${row.unit}`}${mark}`;
}

/** One full run's goal figures per shape, as `results.json` keeps them across runs. */
export interface RunFigures {
  readonly date: string;
  readonly shapes: Readonly<Record<string, Readonly<Record<string, number>>>>;
}

/** Per shape, per goal path: the lowest and highest figure over the runs kept. */
export type Ranges = Record<string, Record<string, readonly [number, number]>>;

/** How a run was asked for, as far as whether it is a full run goes. */
export interface RunScope {
  readonly quick: boolean;
  readonly slowClientsOnly: boolean;
  readonly withBaselines: boolean;
  readonly shapes: readonly string[];
}

/**
 * Whether a run is a full one, the only kind that rewrites `results.json` and BENCHMARKS.md: both
 * shapes, with the baselines, not quick. A run of one shape would leave the other's column and the
 * published ranges describing runs that did not happen.
 */
export function isFullRun(scope: RunScope): boolean {
  return (
    !scope.quick &&
    !scope.slowClientsOnly &&
    scope.withBaselines &&
    scope.shapes.includes('S') &&
    scope.shapes.includes('L')
  );
}

/** How many full runs `results.json` keeps the goal figures of. */
const RUNS_KEPT = 7;

/**
 * This run's goal figures added to those `results.json` held (`previous`: its parsed content, or
 * anything else when there is none), the last seven kept, with each figure's range over them.
 */
export function withHistory(
  previous: unknown,
  date: string,
  byShape: ReadonlyMap<string, Summary>,
): { runs: RunFigures[]; ranges: Ranges } {
  const figuresOf = (shapes: Iterable<[string, Summary]>): Record<string, Record<string, number>> => {
    const out: Record<string, Record<string, number>> = {};
    for (const [name, summary] of shapes) {
      const figures: Record<string, number> = {};
      for (const row of GOALS) {
        const v = get(summary, row.path);
        if (typeof v === 'number' && Number.isFinite(v)) figures[row.path] = v;
      }
      out[name] = figures;
    }
    return out;
  };
  const file = previous as
    { history?: { runs?: unknown }; machine?: { date?: string }; S?: Summary; L?: Summary } | undefined;
  const earlier = file?.history?.runs;
  const runs: RunFigures[] = Array.isArray(earlier) ? (earlier as RunFigures[]).slice() : [];
  // A file written before runs were kept still holds one run: its own figures.
  if (!Array.isArray(earlier) && file?.S !== undefined) {
    const shapes = [['S', file.S], ...(file.L === undefined ? [] : [['L', file.L]])] as Array<
      [string, Summary]
    >;
    runs.push({ date: file.machine?.date ?? '', shapes: figuresOf(shapes) });
  }
  runs.push({ date, shapes: figuresOf(byShape) });
  const kept = runs.slice(-RUNS_KEPT);
  const ranges: Ranges = {};
  for (const run of kept) {
    for (const [name, figures] of Object.entries(run.shapes)) {
      const perShape = (ranges[name] ??= {});
      for (const [path, v] of Object.entries(figures)) {
        const [lo, hi] = perShape[path] ?? [v, v];
        perShape[path] = [Math.min(lo, v), Math.max(hi, v)];
      }
    }
  }
  return { runs: kept, ranges };
}

/** Which goals each shape met. */
export function goalsMet(summary: Summary): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const row of GOALS) {
    if (row.goal === '(reference)') continue;
    const v = get(summary, row.path);
    // A figure measured on one shape only (start to ready: L) is no goal of the other.
    if (v === undefined) continue;
    out[row.metric] = typeof v === 'number' && row.met(v, summary);
  }
  return out;
}

/** The Markdown table of goals per shape, plus the absolute figures it derives from. */
export function markdownTable(
  byShape: ReadonlyMap<string, Summary>,
  context: string,
  ranges: Ranges = {},
): string {
  const s = byShape.get('S');
  const l = byShape.get('L');
  // This run's figure, then its range over the runs kept when they differ.
  const withRange = (shape: string, summary: Summary | undefined, row: GoalRow): string => {
    const range = ranges[shape]?.[row.path];
    const text = cell(summary, row);
    return range === undefined || range[0] === range[1] ? text : `${text} [${range[0]}–${range[1]}]`;
  };
  const lines = [
    context,
    '',
    '| metric | goal | S | L |',
    '|---|---|---|---|',
    ...GOALS.map(
      (row) => `| ${row.metric} | ${row.goal} | ${withRange('S', s, row)} | ${withRange('L', l, row)} |`,
    ),
    '',
    '| absolute figure | S | L |',
    '|---|---|---|',
  ];
  const figures: Array<[string, string]> = [
    ['raw fan-out sync (ms)', 'raw.syncMs'],
    ['meshmux cold / warm sync (ms)', 'meshmux.coldSyncMs|meshmux.warmSyncMs'],
    [
      'to clients that only count bytes: raw sync / meshmux cold / warm sync (ms)',
      'raw.discardingSyncMs|meshmux.discardingColdSyncMs|meshmux.discardingWarmSyncMs',
    ],
    ['bytes to the fleet, cold sync (MB)', 'meshmux.bytesSentColdMb'],
    [
      'raw push: small view / east view / largest view / every view (ms)',
      'raw.pushMs.edge|raw.pushMs.east|raw.pushMs.core|raw.pushMs.all',
    ],
    [
      'isolated change: small view / east view / largest view, p50 (ms)',
      'latency.isolatedSmallViewP50Ms|latency.isolatedTeamViewP50Ms|latency.isolatedLargestViewP50Ms',
    ],
    [
      '1-client floor: meshmux / its serving path / raw (ms)',
      'latency.floorMs|latency.floorServingPathMs|raw.floorMs',
    ],
    ['churn latency p50 / p99 / max (ms)', 'latency.churnP50Ms|latency.churnP99Ms|latency.churnMaxMs'],
    [
      'baseline fleet: meshmux / istiod-like / Nacos-like churn p99 (ms)',
      'latency.baselineFleetChurnP99Ms|latency.istiodChurnP99Ms|latency.nacosChurnP99Ms',
    ],
    [
      'upstream state a small-view change came in (MB); bare receive of it, p50 / lowest (ms)',
      'perChange.upstreamStateMb|perChange.receiveFloorMs|perChange.receiveFloorLowestMs',
    ],
    ['1%-changed resync to every client (ms)', 'latency.changedResyncMs'],
    ['server CPU: cold / warm / churn (ms)', 'meshmux.coldCpuMs|meshmux.warmCpuMs|meshmux.churnCpuMs'],
    [
      'churn: MB sent to the fleet / MB of upstream states received',
      'meshmux.churnBytesMb|meshmux.churnUpstreamMb',
    ],
    [
      'identical resync CPU: net / measured / the first, net (ms); idle server: ms per s / per counters read',
      'meshmux.identicalResyncCpuMs|meshmux.identicalResyncGrossCpuMs|meshmux.identicalResyncFirstCpuMs|meshmux.idleCpuMsPerSecond|meshmux.counterReadCpuMs',
    ],
    [
      'upstream states an identical resync brings (MB); bare receive of them, p50 / lowest (ms)',
      'counters.resyncStateMb|counters.resyncFloorMs|counters.resyncFloorLowestMs',
    ],
    ['raw transport cost (CPU ms per MB)', 'raw.cpuMsPerMb'],
    [
      'naive per-client encoder: sync (ms) / CPU (ms) / encodes',
      'baselines.naiveSyncMs|baselines.naiveSyncCpuMs|baselines.naiveEncodes',
    ],
    ['baseline fleet (clients)', 'baselines.clients'],
    ['peak RSS / steady RSS (MB)', 'memory.peakRssMb|memory.steadyRssMb'],
    ['settled RSS (MB); settled after (s)', 'memory.settledRssMb|memory.settledAfterS'],
  ];
  for (const [label, paths] of figures) {
    const render = (summary: Summary | undefined): string =>
      summary === undefined
        ? '–'
        : paths
            .split('|')
            .map((p) => figure(get(summary, p)))
            .join(' / ');
    lines.push(`| ${label} | ${render(s)} | ${render(l)} |`);
  }
  return lines.join('\n');
}

const BEGIN = '<!-- bench:results:begin -->';
const END = '<!-- bench:results:end -->';

/** Replaces the generated part of BENCHMARKS.md (or appends it when the markers are missing). */
export function updateBenchmarksMd(file: string, table: string): void {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    text = '# Benchmarks\n';
  }
  const block = `${BEGIN}\n${table}\n${END}`;
  const at = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  text =
    at >= 0 && end > at
      ? `${text.slice(0, at)}${block}${text.slice(end + END.length)}`
      : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, text);
}
