/**
 * The parent's handle on the server under test: spawns `server-main` (bundled) pinned to core 0
 * (when `taskset` exists and the machine has two cores or more), waits for it to listen, and reads
 * its counters: meshmux's from its own `/debug/counters` endpoint, a baseline's over IPC.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChildMessage, HeapSampling, ParentMessage, RetainedMemory, ServerArgs } from './server-main.js';
import type { ProcessCounters } from '../src/telemetry/process-counters.js';
import type { PolicyName } from './fixtures.js';
import { PACKAGE_ROOT } from '../src/core/paths.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** What `npm start` (and the image) gives node: its young generation's bound and malloc's tunables. */
export const SHIPPED = ((): { readonly semiSpaceFlag: string; readonly tunables: string } => {
  const pkg = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const start = pkg.scripts['start'] ?? '';
  const semiSpaceFlag = /--max-semi-space-size=\d+/.exec(start)?.[0];
  if (semiSpaceFlag === undefined) throw new Error('npm start gives node no --max-semi-space-size');
  const tunables = /^GLIBC_TUNABLES=(\S+) /.exec(start)?.[1];
  if (tunables === undefined) throw new Error('npm start sets no GLIBC_TUNABLES');
  return { semiSpaceFlag, tunables };
})();

/** Whether processes can be pinned to cores here. */
export const CAN_PIN = availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0;

/** Pins this process (all its threads) to `core`; false when it cannot. */
export function pinSelf(core: number): boolean {
  if (!CAN_PIN) return false;
  return (
    spawnSync('taskset', ['-a', '-cp', String(core), String(process.pid)], { stdio: 'ignore' }).status === 0
  );
}

/** Counters as every server reports them; `process` figures are milliseconds and bytes. */
export interface ServerCounters {
  readonly encodes: number;
  readonly assemblies: number;
  readonly pushes: number;
  readonly bytesSent: number;
  readonly wastedPushes: number;
  readonly streams: number;
  readonly peakBytesInFlight?: number;
  /** meshmux only: subscribed types its streams looked at when snapshots arrived. */
  readonly snapshotChecks?: number;
  /** meshmux only: when the last snapshot reached its ADS server, epoch ms. */
  readonly lastSnapshotAtMs?: number;
  readonly process: ProcessCounters;
}

/** CPU milliseconds (user + system) in a counters reading. */
export function cpuMs(c: ServerCounters): number {
  return c.process.cpuUserMs + c.process.cpuSystemMs;
}

export class ServerProcess {
  private nextId = 1;
  private readonly pending = new Map<number, (body: unknown) => void>();

  private constructor(
    private readonly child: ChildProcess,
    readonly mode: ServerArgs['mode'],
    readonly xdsAddress: string,
    private readonly httpBase: string | undefined,
    /** Memory of the process before it started serving (modules loaded). */
    readonly base: RetainedMemory,
  ) {
    child.on('message', (message: ChildMessage) => {
      if (message.type !== 'reply') return;
      this.pending.get(message.id)?.(message.body);
      this.pending.delete(message.id);
    });
  }

  /** Starts a server and resolves once it listens (and, with sources, has synced them). */
  static async start(args: ServerArgs, timeoutMs = 120_000): Promise<ServerProcess> {
    // Bundled as the shipped CLI is (see bundle.mjs), so a server loads its code as a real start does.
    const script = path.join(HERE, 'bundle', 'server-main.js');
    // BENCH_SERVER_PROFILE=<folder> writes a CPU profile of each server there (development aid).
    const profile = process.env['BENCH_SERVER_PROFILE'];
    const flags = profile === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profile}`];
    // BENCH_SERVER_FLAGS="--trace-gc ..." passes node and V8 flags to each server (development aid).
    flags.push(...(process.env['BENCH_SERVER_FLAGS'] ?? '').split(' ').filter((f) => f !== ''));
    const node = [
      process.execPath,
      '--expose-gc',
      '--max-old-space-size=8192',
      SHIPPED.semiSpaceFlag,
      ...flags,
      script,
      JSON.stringify(args),
    ];
    const [command, ...argv] = CAN_PIN ? ['taskset', '-c', '0', ...node] : node;
    const child = spawn(command as string, argv, {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        GLIBC_TUNABLES: SHIPPED.tunables,
        MESHMUX_LOG_LEVEL: process.env['BENCH_SERVER_LOG'] ?? 'silent',
      },
    });
    const ready = await new Promise<Extract<ChildMessage, { type: 'ready' }>>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${args.mode} server did not start in ${timeoutMs} ms`)),
        timeoutMs,
      );
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${args.mode} server exited with ${String(code)}`));
      });
      child.on('message', (m: ChildMessage) => {
        if (m.type !== 'ready') return;
        clearTimeout(timer);
        resolve(m);
      });
    });
    child.removeAllListeners('exit');
    return new ServerProcess(
      child,
      args.mode,
      `127.0.0.1:${ready.xdsPort}`,
      ready.httpPort === undefined ? undefined : `http://127.0.0.1:${ready.httpPort}`,
      ready.base,
    );
  }

  private request(
    message: ParentMessage extends infer M ? (M extends ParentMessage ? Omit<M, 'id'> : never) : never,
  ): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.child.send({ ...message, id });
    });
  }

  /** Counters now: meshmux's from `/debug/counters`, a baseline's over IPC. */
  async counters(): Promise<ServerCounters> {
    if (this.httpBase !== undefined) {
      const res = await fetch(`${this.httpBase}/debug/counters`);
      return (await res.json()) as ServerCounters;
    }
    return (await this.request({ type: 'counters' })) as ServerCounters;
  }

  /** Starts a new event-loop delay window (meshmux only). */
  async resetLoopDelay(): Promise<void> {
    if (this.httpBase === undefined) return;
    await fetch(`${this.httpBase}/debug/counters/reset`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
  }

  /** Memory retained after a full collection. */
  async memory(): Promise<RetainedMemory> {
    return (await this.request({ type: 'memory' })) as RetainedMemory;
  }

  /** Writes a heap snapshot of the server to `file` (the server collects first); resolves with its path. */
  async heapSnapshot(file: string): Promise<string> {
    return (await this.request({ type: 'heapSnapshot', file })) as string;
  }

  /** Starts the server's sampling heap profiler now (see `heapSampleFrom`), unless sampling already. */
  async startHeapSample(mode: HeapSampling): Promise<void> {
    await this.request({ type: 'heapSampleFrom', mode });
  }

  /**
   * The sampling heap profile of the server since its start (V8's `SamplingHeapProfile`), for a
   * server started with `heapSampling`, or since {@link startHeapSample}; undefined otherwise.
   * Sampling stops.
   */
  async heapSample(): Promise<unknown> {
    return (await this.request({ type: 'heapSample' })) ?? undefined;
  }

  /** meshmux only: the server notes its CPU now, and again at its next push. */
  async mark(): Promise<void> {
    await this.request({ type: 'mark' });
  }

  /** meshmux only: server CPU milliseconds from the last `mark` to the first push after it, if any. */
  async firstPushCpuMs(): Promise<number | undefined> {
    return ((await this.request({ type: 'firstPush' })) as number | null) ?? undefined;
  }

  /**
   * Raw fan-out only: pushes a ServiceEntry response naming `u9-<seq>` to a view's clients, within
   * meshmux's byte budget, or (`byCount`) 16 writes at a time.
   */
  async push(policy: PolicyName | 'all', seq: number, byCount = false): Promise<void> {
    await this.request({ type: 'push', policy, seq, byCount });
  }

  async stop(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    try {
      await Promise.race([this.request({ type: 'stop' }), exited]);
      await exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
