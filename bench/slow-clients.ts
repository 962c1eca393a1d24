/**
 * The slow-client phase: isolated changes to the fleet with and without clients that subscribe to
 * the largest view's ServiceEntries and then never read. meshmux sends per stream under a shared
 * byte budget; a stalled receiver must delay only itself, so the two latencies should match (goal:
 * within 1.5×). A regression shows as the ratio.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { StalledAdsClient } from '../test/support/stalled-ads-client.js';
import { nodeIdOfClient, SE_URL, type Zone } from './fixtures.js';
import { Fleet, LatencyTracker, percentile } from './fleet.js';
import type { ShapeRig } from './phases.js';
import { ServerProcess } from './server-process.js';

/** What the phase measured. Latencies are per change, until every affected client holds it. */
export interface SlowClientResults {
  readonly stalledClients: number;
  /** Size of the ServiceEntry response each stalled client was sent and never read. */
  readonly stalledResponseBytes: number;
  readonly aloneP50Ms: number;
  readonly aloneMaxMs: number;
  readonly withStalledP50Ms: number;
  readonly withStalledMaxMs: number;
  /** With stalled clients over alone, at the median and at the maximum. */
  readonly ratioP50: number;
  readonly ratioMax: number;
  /** Streams the server parked, and closed by its send deadline, during the phase. */
  readonly parked: number;
  readonly sendTimeouts: number;
}

interface StallCounters {
  readonly stalls?: number;
  readonly sendTimeouts?: number;
}

type Log = (line: string) => void;

const ZONES: readonly Zone[] = ['east', 'west', 'edge'];

/** `count` isolated changes, one zone after another; the latency of each. */
async function isolatedChanges(rig: ShapeRig, fleet: Fleet, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const tracker = new LatencyTracker(fleet);
    rig.track(tracker);
    const pick = rig.model.servedInZone(ZONES[i % ZONES.length] as Zone);
    rig.apply(rig.model.change('endpoints', pick.upstream, pick), tracker, true);
    const settled = await tracker.settle(30_000);
    rig.track(undefined);
    tracker.close();
    if (!settled) throw new Error(`slow clients: change ${i} did not reach every affected client in 30 s`);
    out.push(...tracker.latencies());
    await sleep(300);
  }
  return out;
}

/** Runs the phase against a meshmux of its own (default limits: 30 s send timeout). */
export async function measureSlowClients(
  rig: ShapeRig,
  options: { stalled: number; changes: number },
  log: Log,
): Promise<SlowClientResults> {
  const server = await ServerProcess.start({
    mode: 'meshmux',
    shape: rig.shape.name,
    upstreams: rig.addresses,
  });
  const stallCounters = async (): Promise<Required<StallCounters>> => {
    const c = (await server.counters()) as StallCounters;
    return { stalls: c.stalls ?? 0, sendTimeouts: c.sendTimeouts ?? 0 };
  };
  const fleet = new Fleet(server.xdsAddress, rig.shape.clients).start();
  const stalled: StalledAdsClient[] = [];
  try {
    await fleet.synced(performance.now(), 180_000);
    const alone = await isolatedChanges(rig, fleet, options.changes);
    const c0 = await stallCounters();
    for (let i = 0; i < options.stalled; i++) {
      stalled.push(new StalledAdsClient(server.xdsAddress, [SE_URL], nodeIdOfClient(100_000 + i, 'core')));
    }
    // On L each stalled client is owed tens of MB and they queue for the write budget: parking them
    // all can take a few send timeouts (30 s each).
    const deadline = performance.now() + 120_000;
    while ((await stallCounters()).stalls - c0.stalls < options.stalled) {
      if (performance.now() > deadline)
        throw new Error('slow clients: the stalled clients were not parked in 120 s');
      await sleep(100);
    }
    const withStalled = await isolatedChanges(rig, fleet, options.changes);
    const c1 = await stallCounters();
    const stalledResponseBytes = Math.max(
      ...fleet.members.filter((m) => m.policy === 'core').map((m) => m.held.get(SE_URL)?.bytes ?? 0),
    );
    const result: SlowClientResults = {
      stalledClients: options.stalled,
      stalledResponseBytes,
      aloneP50Ms: percentile(alone, 50),
      aloneMaxMs: Math.max(...alone),
      withStalledP50Ms: percentile(withStalled, 50),
      withStalledMaxMs: Math.max(...withStalled),
      ratioP50: percentile(withStalled, 50) / percentile(alone, 50),
      ratioMax: Math.max(...withStalled) / Math.max(...alone),
      parked: c1.stalls - c0.stalls,
      sendTimeouts: c1.sendTimeouts - c0.sendTimeouts,
    };
    log(
      `  slow clients: ${options.stalled} clients never reading a ${(stalledResponseBytes / 1024 / 1024).toFixed(1)} MB response; isolated change p50 ${result.aloneP50Ms.toFixed(0)} → ${result.withStalledP50Ms.toFixed(0)} ms (${result.ratioP50.toFixed(2)}×), max ${result.aloneMaxMs.toFixed(0)} → ${result.withStalledMaxMs.toFixed(0)} ms (${result.ratioMax.toFixed(2)}×); ${result.parked} parked, ${result.sendTimeouts} closed by the send timeout`,
    );
    return result;
  } finally {
    for (const s of stalled) s.close();
    fleet.close();
    await server.stop();
  }
}
