/**
 * `npm run bench`: meshmux against this machine's limit, in one run of under 5 minutes on 2 cores.
 * Per shape (S = 10k ServiceEntries + 2k VirtualServices and 50 istiods; L = 50k + 2k and 200):
 * the raw fan-out limit, meshmux's phases, then the baselines (on L, which moves gigabytes per
 * push: 8 s of churn instead of 20, no isolated change to the middle view and only the
 * istiod-like baseline); figures go to bench/results.json and the table in BENCHMARKS.md. The
 * server runs pinned to core 0, this process (upstreams and fleet) to core 1.
 *
 *   BENCH_SHAPES=S npm run bench       one shape
 *   npm run bench -- --quick           S only, short phases (development)
 *   npm run bench -- --no-baselines    skip the naive, istiod-like and Nacos-like servers
 *   npm run bench -- --write-budget-mb=N   meshmux's in-flight byte budget (default its own)
 *   npm run bench -- --slow-clients-only   only the slow-client phase (stalled clients vs a healthy fleet)
 *
 * A quick run (or a partial one) prints its figures and writes nothing: bench/results.json and
 * BENCHMARKS.md hold full runs only.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { PACKAGE_ROOT } from '../src/core/paths.js';
import { SHAPES } from './fixtures.js';
import {
  calibrate,
  FULL_TIMING,
  FULL_TIMING_L,
  measureBaselines,
  measureMeshmux,
  QUICK_TIMING,
  ShapeRig,
  type Timing,
} from './phases.js';
import {
  goalsMet,
  isFullRun,
  markdownTable,
  summarize,
  updateBenchmarksMd,
  withHistory,
  type ShapeMeasurements,
} from './report.js';
import { CAN_PIN, pinSelf } from './server-process.js';
import { measureBareReceive, receiveFigures } from './bare-receive.js';
import { percentile } from './fleet.js';
import { measureDeltaTier, measureStartup, type StartupResults } from './scale-phases.js';
import { measureSlowClients, type SlowClientResults } from './slow-clients.js';

const args = new Set(process.argv.slice(2));
const quick = args.has('--quick');
const slowClientsOnly = args.has('--slow-clients-only');
const withBaselines = !args.has('--no-baselines') && !slowClientsOnly;
const shapes = (process.env['BENCH_SHAPES'] ?? (quick ? 'S' : 'S,L'))
  .split(',')
  .map((s) => s.trim().toUpperCase())
  .filter((s): s is 'S' | 'L' => s === 'S' || s === 'L');
/** Only full runs are recorded. */
const recorded = isFullRun({ quick, slowClientsOnly, withBaselines, shapes });
const budgetArg = process.argv.find((a) => a.startsWith('--write-budget-mb='));
const writeBudgetMb = budgetArg === undefined ? undefined : Number(budgetArg.split('=')[1]);
const timingOf = (shape: 'S' | 'L'): Timing => ({
  ...(quick ? QUICK_TIMING : shape === 'L' ? FULL_TIMING_L : FULL_TIMING),
  ...(writeBudgetMb === undefined ? {} : { writeBudgetMb }),
});

const started = performance.now();
const log = (line: string): void => {
  console.log(`[${((performance.now() - started) / 1000).toFixed(1).padStart(5)} s] ${line}`);
};

async function main(): Promise<void> {
  const pinned = pinSelf(1);
  const loadBefore = loadavg();
  log(
    `meshmux bench: shapes ${shapes.join(', ')}${quick ? ' (quick)' : ''}; pinned: ${pinned ? 'server core 0, fleet and upstreams core 1' : 'no'}; load ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`,
  );
  const summaries = new Map<string, ReturnType<typeof summarize>>();
  const slowClients = new Map<string, SlowClientResults>();
  for (const name of shapes) {
    const shape = SHAPES[name];
    log(
      `shape ${name}: ${shape.serviceEntries} ServiceEntries + ${shape.virtualServices} VirtualServices, ${shape.clients} istiods`,
    );
    // Start to ready at 100k objects, measured with shape L (the large deployment), before the
    // shape's rig exists: the upstreams the starts read from run in this process, and timed after
    // the shape's phases, beside its fleet of 200 clients, the same starts took 5.30-5.43 s where
    // they took 4.73-4.84 s in a process of their own just after (4.50-4.75 s timed here first).
    // Three timed starts: the median (nearest rank) is the middle one, where of two it would be
    // the faster.
    let startup: StartupResults | undefined;
    if (name === 'L' && !slowClientsOnly) {
      log('start to ready at 100k objects');
      startup = await measureStartup({ ...shape, serviceEntries: 100_000 - shape.virtualServices }, 3, log);
    }
    const rig = new ShapeRig(shape);
    await rig.start();
    try {
      const slow = async (): Promise<void> => {
        log(`slow clients (${quick ? 10 : 20} stalled)`);
        const options = { stalled: quick ? 10 : 20, changes: quick ? 4 : 6 };
        slowClients.set(name, await measureSlowClients(rig, options, log));
      };
      if (slowClientsOnly) {
        await slow();
        continue;
      }
      log('calibration (raw fan-out)');
      const raw = await calibrate(rig, log);
      log('meshmux');
      const meshmux = await measureMeshmux(rig, timingOf(name), log);
      // The floor under the CPU before the first byte: the state each of those changes brought,
      // received by a bare process set up as the server is, with the rig's upstreams and fleet idle.
      const stateBytes = percentile(meshmux.smallViewStateBytes, 50);
      const receive = await measureBareReceive(stateBytes, quick ? 6 : 20);
      const { p50Ms, lowestMs } = receiveFigures(receive);
      log(
        `  a bare process receiving the upstream state of a change (${(stateBytes / 1e6).toFixed(1)} MB): CPU p50 ${p50Ms.toFixed(1)} ms, lowest ${lowestMs.toFixed(1)} ms`,
      );
      // The floor under an identical resync: every upstream's state again, each on a new stream of
      // a connection of its own, as the resyncs brought them.
      const resyncReceive = await measureBareReceive(meshmux.identicalResync.upstreamBytes, quick ? 6 : 20);
      const resyncFloor = receiveFigures(resyncReceive);
      log(
        `  a bare process receiving the states an identical resync brings (${meshmux.identicalResync.upstreamBytes.map((b) => (b / 1e6).toFixed(1)).join(' + ')} MB): CPU p50 ${resyncFloor.p50Ms.toFixed(1)} ms, lowest ${resyncFloor.lowestMs.toFixed(1)} ms`,
      );
      log('delta tier (a regional meshmux fed by a central one)');
      const tier = await measureDeltaTier(rig, quick ? 3 : 10, log);
      // After meshmux's phases: the raw fan-out serves the fixtures' initial state, and this phase changes it.
      await slow();
      let baselines;
      if (withBaselines) {
        log(`baselines (${shape.baselineClients} istiods)`);
        baselines = await measureBaselines(rig, timingOf(name), log);
      }
      const m: ShapeMeasurements = { shape, raw, meshmux, baselines, tier, startup, receive, resyncReceive };
      summaries.set(name, summarize(m));
    } finally {
      await rig.close();
    }
  }
  const loadAfter = loadavg();
  const totalS = (performance.now() - started) / 1000;
  const machine = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    pinned: CAN_PIN,
    quick,
    loadAverageBefore: loadBefore.map((l) => Number(l.toFixed(2))),
    loadAverageAfter: loadAfter.map((l) => Number(l.toFixed(2))),
    totalSeconds: Number(totalS.toFixed(0)),
  };
  const results = {
    machine,
    ...Object.fromEntries(
      [...summaries].map(([name, s]) => [
        name,
        { ...s, goalsMet: goalsMet(s), slowClients: slowClients.get(name) },
      ]),
    ),
  };
  if (!recorded) {
    log(
      `done in ${totalS.toFixed(0)} s; not a full run, so bench/results.json and BENCHMARKS.md are left as they are`,
    );
    return;
  }
  const resultsFile = path.join(PACKAGE_ROOT, 'bench', 'results.json');
  let previous: unknown;
  try {
    previous = JSON.parse(readFileSync(resultsFile, 'utf8'));
  } catch {
    previous = undefined;
  }
  const history = withHistory(previous, machine.date, summaries);
  writeFileSync(resultsFile, `${JSON.stringify({ ...results, history }, null, 2)}\n`);
  const loaded = Math.max(...loadBefore.slice(0, 1), ...loadAfter.slice(0, 1)) > 1.5;
  const context = [
    `Run of ${machine.date}: ${process.version}, ${CAN_PIN ? 'server pinned to one core, fleet and upstreams to the other' : 'not pinned'}, ${totalS.toFixed(0)} s${quick ? ', quick mode' : ''}.`,
    `Load average before/after: ${machine.loadAverageBefore.join(' ')} / ${machine.loadAverageAfter.join(' ')}${loaded ? ' — other work was running on this machine, so absolute times are inflated; ratios are measured within the same run' : ''}.`,
  ].join(' ');
  updateBenchmarksMd(
    path.join(PACKAGE_ROOT, 'BENCHMARKS.md'),
    markdownTable(
      summaries,
      `${context} In brackets: the range over the last ${history.runs.length} full runs.`,
      history.ranges,
    ),
  );
  log(`done in ${totalS.toFixed(0)} s; bench/results.json and BENCHMARKS.md written`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
