/**
 * Two phases of `npm run bench` beside the fleet's: what a one-object change costs between two
 * tiers of meshmux over delta ADS (bytes, exact whatever the load), and how long meshmux takes from
 * its start to ready with 100k objects upstream.
 */
import { benchConfigYaml } from './bench-config.js';
import { MeshModel, nodeIdOfClient, SE, type Shape } from './fixtures.js';
import { percentile } from './fleet.js';
import { startInProcess as start, until } from './in-process.js';
import type { ShapeRig } from './phases.js';
import { ServerProcess } from './server-process.js';
import { UpstreamSimulator, type SimulatedUpstream } from './upstream-simulator.js';

type Log = (line: string) => void;

const SE_KIND = 'networking.istio.io/ServiceEntry';

export interface TierResults {
  /** Bytes the central tier sent per one-object change, each change measured alone. */
  readonly bytesPerChange: readonly number[];
  /** Bytes of the first state, for scale. */
  readonly firstStateBytes: number;
}

/**
 * A central meshmux reads the shape's upstreams; a regional meshmux subscribes to it with an `xds`
 * source over delta ADS. Each change edits one ServiceEntry upstream and waits until the regional
 * tier holds a new generation of the kind; the central's bytes sent in between cross the tier.
 */
export async function measureDeltaTier(rig: ShapeRig, changes: number, log: Log): Promise<TierResults> {
  const central = await start(benchConfigYaml(rig.addresses));
  const regional = await start(
    [
      // Nothing restored from an earlier run: the tier starts empty, as the central does.
      'state: { dir: none }',
      'sources:',
      '  - name: central',
      '    type: xds',
      `    address: 127.0.0.1:${central.xdsPort}`,
      '    delta: true',
      '    apiVersions: current',
      '    kinds: [ServiceEntry, VirtualService]',
      // The central serves the fleet's policies: the regional tier takes the largest view's place.
      `    node: { id: ${JSON.stringify(nodeIdOfClient(0, 'core'))} }`,
    ].join('\n'),
  );
  try {
    const held = (): number => regional.engine.current().kinds.get(SE_KIND)?.resources.length ?? 0;
    // The largest view: every ServiceEntry outside the edge zone.
    const want = rig.model.expectedCount('core', SE);
    await until(
      () => held() === want,
      300_000,
      `${want} ServiceEntries at the regional tier`,
      () =>
        `it holds ${held()}; the central serves ${central.engine.current().kinds.get(SE_KIND)?.resources.length ?? 0} in all`,
    );
    const firstStateBytes = central.ads.counters().bytesSent;
    const bytesPerChange: number[] = [];
    for (let i = 0; i < changes; i++) {
      const generation = regional.engine.current().kinds.get(SE_KIND)?.generation;
      const before = central.ads.counters().bytesSent;
      const pick = rig.model.servedInZone('west');
      const change = rig.model.change('endpoints', pick.upstream, pick);
      const sim = rig.simulators[change.upstream] as SimulatedUpstream;
      sim.changed(SE);
      sim.flush();
      await until(
        () => regional.engine.current().kinds.get(SE_KIND)?.generation !== generation,
        60_000,
        `change ${i + 1} at the regional tier`,
      );
      // Anything else the change causes (another type's answer) has time to cross too.
      await new Promise((resolve) => setTimeout(resolve, 200));
      bytesPerChange.push(central.ads.counters().bytesSent - before);
    }
    log(
      `  delta tier: first state ${(firstStateBytes / 1e6).toFixed(1)} MB; per one-object change p50 ${percentile(bytesPerChange, 50)} B, max ${Math.max(...bytesPerChange)} B`,
    );
    return { bytesPerChange, firstStateBytes };
  } finally {
    await regional.stop();
    await central.stop();
  }
}

export interface StartupResults {
  readonly objects: number;
  /** From spawning the server to ready (every upstream synced), per run. */
  readonly readyMs: readonly number[];
  /**
   * The server's CPU (user and system) from its start to ready, per run: apart from the time, it
   * says whether a slow start was the server's own work or the wait for this process's upstreams.
   */
  readonly readyCpuMs: readonly number[];
  /** Of it, the kernel's, per run: on a virtual machine much of it page faults. */
  readonly readySystemCpuMs: readonly number[];
  /** The page faults the server took from its start to ready, per run. */
  readonly readyPageFaults: readonly number[];
}

/**
 * meshmux as shipped, in a process of its own, started against upstreams holding `shape`'s
 * objects: the time from spawning it to ready, `runs` times after a first start that warms the
 * upstreams (each start with an empty state folder).
 */
export async function measureStartup(shape: Shape, runs: number, log: Log): Promise<StartupResults> {
  const model = new MeshModel(shape);
  const simulators = model.upstreams.map((u) => new UpstreamSimulator(u.index, model));
  try {
    const addresses = await Promise.all(simulators.map((s) => s.listen()));
    const readyMs: number[] = [];
    const readyCpuMs: number[] = [];
    const readySystemCpuMs: number[] = [];
    const readyPageFaults: number[] = [];
    // The first start also waits for the upstreams to encode their objects once: not counted.
    for (let run = 0; run <= runs; run++) {
      const t = performance.now();
      const server = await ServerProcess.start(
        { mode: 'meshmux', shape: shape.name, upstreams: addresses, withoutBase: true },
        300_000,
      );
      if (run > 0) {
        readyMs.push(performance.now() - t);
        const { process } = await server.counters();
        readyCpuMs.push(process.cpuUserMs + process.cpuSystemMs);
        readySystemCpuMs.push(process.cpuSystemMs);
        readyPageFaults.push(process.minorPageFaults);
      }
      await server.stop();
    }
    const objects = shape.serviceEntries + shape.virtualServices;
    log(
      `  start to ready with ${objects} objects upstream: ${readyMs.map((ms) => `${ms.toFixed(0)} ms`).join(', ')} (server CPU at ready ${readyCpuMs.map((ms) => `${ms.toFixed(0)} ms`).join(', ')}; of it the kernel's ${readySystemCpuMs.map((ms) => `${ms.toFixed(0)} ms`).join(', ')}; page faults ${readyPageFaults.join(', ')})`,
    );
    return { objects, readyMs, readyCpuMs, readySystemCpuMs, readyPageFaults };
  } finally {
    await Promise.all(simulators.map((s) => s.close()));
  }
}
