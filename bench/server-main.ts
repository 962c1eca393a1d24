import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
/**
 * The server under test, in a process of its own (the benchmark pins it to one core): meshmux as
 * shipped, or one of the baselines. Started by {@link ServerProcess} with `--expose-gc`; talks to
 * the parent over the IPC channel: `ready` once listening (and, for servers with sources, synced
 * with every upstream), then answers `counters`, `memory` and `push` requests until `stop`.
 */
import { Session } from 'node:inspector';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { writeHeapSnapshot } from 'node:v8';
import { startMeshmux, type RunningMeshmux } from '../src/app.js';
import { heapCollections } from '../src/core/heap-collections.js';
import { filter, firstValueFrom, type Observable } from '../src/core/rx.js';
import { processCounters, type ProcessCounters } from '../src/telemetry/process-counters.js';
import { parseMeshmuxConfig, type MeshmuxConfig } from '../src/settings/meshmux-config.js';
import type { BaselineCounters } from './baselines.js';
import { benchConfigYaml } from './bench-config.js';
import type { PolicyName, Shape } from './fixtures.js';

/** What the parent asks for. */
export interface ServerArgs {
  readonly mode: 'meshmux' | 'raw' | 'naive' | 'istiod' | 'nacos';
  readonly shape: Shape['name'];
  /** `host:port` of each upstream simulator, in configuration order. */
  readonly upstreams: readonly string[];
  /** meshmux's write budget in MB (default the server's own). */
  readonly writeBudgetMb?: number;
  /**
   * Leave out the idle process's memory (`base` reads zero): it costs two full collections before
   * the server starts, which a start timed to ready should not carry.
   */
  readonly withoutBase?: boolean;
  /**
   * Sample the heap's allocations from the server's start (answered by `heapSample`): `allocated`
   * keeps every sample; `survivors` the samples of objects that outlived a young collection,
   * whether a full one freed them later or not; `live` only those still alive. The difference of
   * the last two is what a start promoted in vain.
   */
  readonly heapSampling?: HeapSampling;
}

export type HeapSampling = 'allocated' | 'survivors' | 'live';

export type ParentMessage =
  | { readonly type: 'counters'; readonly id: number }
  | { readonly type: 'memory'; readonly id: number }
  | {
      readonly type: 'push';
      readonly id: number;
      readonly policy: PolicyName | 'all';
      readonly seq: number;
      /** Bound the writes by count (16 at a time) instead of by meshmux's byte budget. */
      readonly byCount?: boolean;
    }
  | { readonly type: 'stop'; readonly id: number }
  /** meshmux only: remember this process's CPU now; the next push records its CPU too (see `firstPush`). */
  | { readonly type: 'mark'; readonly id: number }
  /** meshmux only: CPU milliseconds from the last `mark` to the first push after it (null: none yet). */
  | { readonly type: 'firstPush'; readonly id: number }
  /** Writes a heap snapshot of the server to `file` (after a full collection) and replies when done. */
  | { readonly type: 'heapSnapshot'; readonly id: number; readonly file: string }
  /**
   * Starts sampling the heap's allocations as `heapSampling` would, from now on (nothing when
   * sampling already): what a phase allocates, without the start's allocations.
   */
  | { readonly type: 'heapSampleFrom'; readonly id: number; readonly mode: HeapSampling }
  /** Stops the sampling `heapSampling` started and replies with its profile (V8's `SamplingHeapProfile`). */
  | { readonly type: 'heapSample'; readonly id: number };

/** Memory retained by the process after a full collection. */
export interface RetainedMemory {
  readonly heapUsedBytes: number;
  /** V8's heap as committed, its room for new objects included. */
  readonly heapTotalBytes: number;
  readonly externalBytes: number;
  readonly rssBytes: number;
}

export type ChildMessage =
  | {
      readonly type: 'ready';
      readonly xdsPort: number;
      readonly httpPort?: number;
      readonly base: RetainedMemory;
    }
  | { readonly type: 'reply'; readonly id: number; readonly body: unknown };

function retained(): RetainedMemory {
  const collect = (globalThis as { gc?: () => void }).gc;
  collect?.();
  collect?.();
  const m = process.memoryUsage();
  return {
    heapUsedBytes: m.heapUsed,
    heapTotalBytes: m.heapTotal,
    externalBytes: m.external,
    rssBytes: m.rss,
  };
}

function send(message: ChildMessage): void {
  process.send?.(message);
}

/** Resolves when the engine publishes its first ready snapshot (a start is timed to that moment). */
async function waitReady(engine: {
  readonly snapshots$: Observable<{ readonly ready: boolean }>;
}): Promise<void> {
  await firstValueFrom(engine.snapshots$.pipe(filter((s) => s.ready)));
}

/** Starts V8's sampling heap profiler (see {@link ServerArgs.heapSampling}); returns how to stop it. */
function startHeapSampling(mode: HeapSampling): () => Promise<unknown> {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 8192,
    includeObjectsCollectedByMajorGC: mode !== 'live',
    includeObjectsCollectedByMinorGC: mode === 'allocated',
  });
  return () =>
    new Promise((resolve, reject) => {
      session.post('HeapProfiler.stopSampling', (err, result) => {
        session.disconnect();
        if (err === null) resolve(result.profile);
        else reject(err);
      });
    });
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '{}') as ServerArgs;
  let stopSampling = args.heapSampling === undefined ? undefined : startHeapSampling(args.heapSampling);
  // meshmux persists as in production, into a folder of this run's own.
  const stateDir = mkdtempSync(path.join(tmpdir(), 'meshmux-bench-state-'));
  process.once('exit', () => rmSync(stateDir, { recursive: true, force: true }));
  const base: RetainedMemory =
    args.withoutBase === true
      ? { heapUsedBytes: 0, heapTotalBytes: 0, externalBytes: 0, rssBytes: 0 }
      : retained();
  const config: MeshmuxConfig | undefined =
    args.upstreams.length === 0
      ? undefined
      : parseMeshmuxConfig(
          benchConfigYaml(args.upstreams, args.mode === 'meshmux' ? stateDir : 'none'),
          'bench',
          process.cwd(),
        );
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  // The heap's collections are counted from here on, for the same counters.
  heapCollections();
  let counters: () => unknown;
  let push: (policy: PolicyName | 'all', seq: number, byCount: boolean) => void = () => undefined;
  let stop: () => Promise<void>;
  const cpuNowMs = (): number => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  let marked: { cpuMs: number; firstPushCpuMs?: number } | undefined;
  let xdsPort: number;
  let httpPort: number | undefined;

  if (args.mode === 'meshmux') {
    if (config === undefined) throw new Error('meshmux needs upstreams');
    const running: RunningMeshmux = await startMeshmux(
      config,
      args.writeBudgetMb === undefined ? {} : { writeBudget: { maxBytes: args.writeBudgetMb * 1024 * 1024 } },
    );
    await waitReady(running.engine);
    // The first push after a mark: when the first byte of a change leaves, and the CPU spent till then.
    const onPush = running.metrics.onPush.bind(running.metrics);
    running.metrics.onPush = (...pushed) => {
      if (marked !== undefined && marked.firstPushCpuMs === undefined) marked.firstPushCpuMs = cpuNowMs();
      onPush(...pushed);
    };
    xdsPort = running.xdsPort;
    // The admin listener: the parent reads /debug/counters there.
    httpPort = running.adminPort;
    // The parent reads meshmux's own /debug/counters; this answer is for symmetry only.
    counters = () => running.ads.counters();
    stop = () => running.stop();
  } else if (args.mode === 'raw') {
    // The baselines' modules are loaded by the baselines only: a start of meshmux is timed to
    // ready, and meshmux as shipped loads none of them.
    const [{ RawFanout }, { MeshModel, SHAPES }] = await Promise.all([
      import('./baselines.js'),
      import('./fixtures.js'),
    ]);
    const raw = new RawFanout(new MeshModel(SHAPES[args.shape]));
    xdsPort = await raw.listen();
    counters = (): BaselineCounters & { process: ProcessCounters } => ({
      ...raw.counters,
      process: processCounters(loopDelay),
    });
    push = (policy, seq, byCount) => raw.push(policy, seq, byCount);
    stop = () => raw.close();
  } else {
    if (config === undefined) throw new Error(`${args.mode} needs upstreams`);
    const [{ EmulatedServer, STRATEGIES }, { MergeEngine }, { semanticRuleOf }, { XdsSource }] =
      await Promise.all([
        import('./baselines.js'),
        import('../src/merge/merge-engine.js'),
        import('../src/schema/semantic-keys.js'),
        import('../src/upstream/xds/xds-source.js'),
      ]);
    const engine = new MergeEngine(
      config.sources.map((source) => {
        if (source.type !== 'xds') throw new Error('bench sources are xds');
        const s = new XdsSource(source);
        return { descriptor: s.descriptor, events$: s.events$ };
      }),
      { syncTimeoutMs: config.syncTimeout, semanticRules: semanticRuleOf },
    );
    engine.start();
    const server = new EmulatedServer(engine, config, STRATEGIES[args.mode]);
    await waitReady(engine);
    xdsPort = await server.listen();
    counters = () => ({ ...server.counters, process: processCounters(loopDelay) });
    stop = async () => {
      await server.close();
      engine.stop();
    };
  }

  process.on('message', (message: ParentMessage) => {
    const reply = (body: unknown): void => send({ type: 'reply', id: message.id, body });
    switch (message.type) {
      case 'counters':
        reply(counters());
        return;
      case 'memory':
        reply(retained());
        return;
      case 'mark':
        marked = { cpuMs: cpuNowMs() };
        reply(true);
        return;
      case 'firstPush':
        reply(marked?.firstPushCpuMs === undefined ? null : marked.firstPushCpuMs - marked.cpuMs);
        return;
      case 'heapSnapshot':
        reply(writeHeapSnapshot(message.file));
        return;
      case 'heapSampleFrom':
        stopSampling ??= startHeapSampling(message.mode);
        reply(true);
        return;
      case 'heapSample':
        if (stopSampling === undefined) reply(null);
        else void stopSampling().then(reply);
        stopSampling = undefined;
        return;
      case 'push':
        push(message.policy, message.seq, message.byCount === true);
        reply(true);
        return;
      case 'stop':
        void stop().then(() => {
          reply(true);
          process.disconnect();
          setTimeout(() => process.exit(0), 50).unref();
        });
        return;
    }
  });
  send({ type: 'ready', xdsPort, ...(httpPort === undefined ? {} : { httpPort }), base });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
