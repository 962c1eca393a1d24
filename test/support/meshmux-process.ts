/**
 * meshmux as a real child process (`node dist/bundle/cli.js serve`), on ephemeral loopback ports, as
 * an operator runs it: for tests that must prove the process itself survives (it keeps running,
 * keeps its streams and says what went wrong) and for what survives a SIGKILL and a restart.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { mkdir, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { CLI } from './meshmux-cli.js';

/** One JSON log line of the child (a line that is not JSON becomes `{ msg: line }`). */
export type LogLine = Readonly<Record<string, unknown>> & { readonly msg?: string };

/** Options of {@link MeshmuxProcess.start}. */
export interface MeshmuxProcessOptions {
  /** The working directory: relative paths of the configuration resolve from here. */
  readonly cwd: string;
  /** ADS address; default an ephemeral port. Give the previous one to restart where istiods redial. */
  readonly xds?: string;
  /** Extra environment variables, over the test's own (log level info unless given here). */
  readonly env?: Readonly<Record<string, string>>;
  /** How long it may take to report its ports. Default 30 s. */
  readonly timeoutMs?: number;
  /** The entry point to run with node; default this checkout's `dist/bundle/cli.js` (an installed `bin/meshmux`, say). */
  readonly cli?: string;
  /** The user and group to run as (the test must run as root); default the test's own. */
  readonly user?: { readonly uid: number; readonly gid: number };
  /** The Node binary; default this process's (another user may need a copy it can reach). */
  readonly node?: string;
}

interface LogWaiter {
  readonly from: number;
  readonly predicate: (line: LogLine) => boolean;
  readonly what: string;
  readonly resolve: (line: LogLine) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** A running `meshmux serve`, its ports, its log, and its HTTP pages. */
export class MeshmuxProcess {
  /** Every JSON line it wrote to stdout, in order; never altered, only appended to. */
  readonly logs: LogLine[] = [];
  /** `performance.now()` when the process was spawned: measure "time to serve" from here. */
  readonly spawnedAt: number;
  /** `127.0.0.1:<port>` of its plaintext ADS listener. */
  xds = '';
  /** `http://127.0.0.1:<port>` of its HTTP listener (metrics, probes, webhooks). */
  http = '';
  /** `http://127.0.0.1:<port>` of its admin listener (status page, `/debug/*`, confirmations). */
  admin = '';
  private stderr = '';
  private waiters: LogWaiter[] = [];
  private readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined;

  private constructor(
    private readonly child: ChildProcess,
    private readonly describe: string,
  ) {
    this.spawnedAt = performance.now();
    this.exited = new Promise((resolve) =>
      child.once('exit', (code) => {
        this.exitCode = code;
        for (const w of this.waiters.splice(0)) {
          clearTimeout(w.timer);
          w.reject(new Error(`${this.describe} exited (${String(code)}) before ${w.what}:\n${this.tail()}`));
        }
        resolve(code);
      }),
    );
    child.stderr?.on('data', (chunk: Buffer) => (this.stderr += chunk.toString('utf8')));
    if (child.stdout !== null) {
      createInterface({ input: child.stdout }).on('line', (text) => {
        let line: LogLine;
        try {
          const parsed: unknown = JSON.parse(text);
          line = parsed !== null && typeof parsed === 'object' ? (parsed as LogLine) : { msg: text };
        } catch {
          line = { msg: text };
        }
        this.logs.push(line);
        const index = this.logs.length - 1;
        for (const w of [...this.waiters]) {
          if (index < w.from || !w.predicate(line)) continue;
          clearTimeout(w.timer);
          this.waiters = this.waiters.filter((x) => x !== w);
          w.resolve(line);
        }
      });
    }
  }

  /**
   * Spawns `meshmux serve --config <configFile>` in `options.cwd` on loopback ports (ADS on
   * `options.xds` or a free one), at log level info, and resolves once it reports its ports.
   * Rejects (killing it, with its output) when it exits first or does not start within
   * `options.timeoutMs`.
   */
  static async start(configFile: string, options: MeshmuxProcessOptions): Promise<MeshmuxProcess> {
    const child = spawn(
      options.node ?? process.execPath,
      [
        options.cli ?? CLI,
        'serve',
        '--config',
        configFile,
        '--xds',
        options.xds ?? '127.0.0.1:0',
        '--http',
        '127.0.0.1:0',
        '--admin',
        '127.0.0.1:0',
      ],
      {
        cwd: options.cwd,
        env: { ...process.env, MESHMUX_LOG_LEVEL: 'info', ...options.env },
        stdio: ['ignore', 'pipe', 'pipe'],
        ...options.user,
      },
    );
    const meshmux = new MeshmuxProcess(child, `meshmux serve --config ${configFile}`);
    try {
      const started = await meshmux.waitForLog(
        (l) => l.msg === 'meshmux started',
        0,
        options.timeoutMs ?? 30_000,
        'the "meshmux started" line',
      );
      meshmux.xds = `127.0.0.1:${String(started['xdsPort'])}`;
      meshmux.http = `http://127.0.0.1:${String(started['httpPort'])}`;
      meshmux.admin = `http://127.0.0.1:${String(started['adminPort'])}`;
      return meshmux;
    } catch (err) {
      await meshmux.kill();
      throw err;
    }
  }

  /** Whether the process is still running. */
  get alive(): boolean {
    return this.exitCode === undefined;
  }

  /** What it wrote to stderr so far. */
  get errorOutput(): string {
    return this.stderr;
  }

  /**
   * The first log line at index `from` or later (so far or to come) that matches. Rejects after
   * `timeoutMs`, or when the process exits first, naming `what` and with the last output.
   * Pass `from = logs.length` before causing an event to ignore earlier lines of the same kind.
   */
  waitForLog(
    predicate: (line: LogLine) => boolean,
    from: number,
    timeoutMs: number,
    what: string,
  ): Promise<LogLine> {
    const found = this.logs.slice(from).find(predicate);
    if (found !== undefined) return Promise.resolve(found);
    if (!this.alive)
      return Promise.reject(
        new Error(`${this.describe} exited (${String(this.exitCode)}) before ${what}:\n${this.tail()}`),
      );
    return new Promise((resolve, reject) => {
      const waiter: LogWaiter = {
        from,
        predicate,
        what,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          reject(new Error(`${this.describe}: no ${what} within ${timeoutMs} ms; output:\n${this.tail()}`));
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** Log lines whose message is `msg`. */
  lines(msg: string): LogLine[] {
    return this.logs.filter((l) => l.msg === msg);
  }

  /** The last `count` lines of its log, then its stderr, for failure messages. */
  tail(count = 40): string {
    const log = this.logs.slice(-count).map((l) => JSON.stringify(l));
    return [...log, this.stderr.split('\n').slice(-count).join('\n')].join('\n');
  }

  /** The value of an unlabelled metric on `/metrics`, or undefined when absent. */
  async metric(name: string): Promise<number | undefined> {
    const text = await (await fetch(`${this.http}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.slice(name.length + 1));
  }

  /** The HTML of the status page. */
  async statusPage(): Promise<string> {
    return (await fetch(`${this.admin}/`)).text();
  }

  /** `/debug/counters`: CPU, memory and event-loop delay since the last reset. */
  async counters(): Promise<{
    readonly process: {
      readonly rssBytes: number;
      readonly maxRssBytes: number;
      readonly eventLoopDelayMaxMs: number;
    };
  }> {
    return (await (await fetch(`${this.admin}/debug/counters`)).json()) as {
      process: { rssBytes: number; maxRssBytes: number; eventLoopDelayMaxMs: number };
    };
  }

  /** Starts a new event-loop delay window. */
  async resetCounters(): Promise<void> {
    const res = await fetch(`${this.admin}/debug/counters/reset`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    await res.arrayBuffer();
  }

  /** A JSON debug page, e.g. `counters`; rejects after 10 s or on a status other than 200. */
  async debug<T>(page: string): Promise<T> {
    const response = await fetch(`${this.admin}/debug/${page}`, { signal: AbortSignal.timeout(10_000) });
    if (response.status !== 200) throw new Error(`/debug/${page} answered ${response.status}`);
    return (await response.json()) as T;
  }

  /**
   * Sends `signal` (SIGTERM by default), then SIGKILL after `timeoutMs`; resolves with the exit
   * code, how long the exit took and whether it had to be killed.
   */
  async stop(
    signal: NodeJS.Signals = 'SIGTERM',
    timeoutMs = 10_000,
  ): Promise<{ code: number | null; ms: number; killed: boolean }> {
    const started = performance.now();
    if (!this.alive) return { code: await this.exited, ms: 0, killed: false };
    let killed = false;
    const killer = setTimeout(() => {
      killed = true;
      this.child.kill('SIGKILL');
    }, timeoutMs);
    this.child.kill(signal);
    try {
      return { code: await this.exited, ms: performance.now() - started, killed };
    } finally {
      clearTimeout(killer);
    }
  }

  /**
   * Stops reading its standard output (a log driver that blocks): once the pipe is full, what it
   * writes there waits. `readLog(true)` reads on.
   */
  readLog(reading: boolean): void {
    if (reading) this.child.stdout?.resume();
    else this.child.stdout?.pause();
  }

  /** Sends `signal` if it still runs and returns at once: SIGSTOP freezes it, SIGCONT resumes it. */
  signal(signal: NodeJS.Signals): void {
    if (this.alive) this.child.kill(signal);
  }

  /**
   * Sends `signal` (default SIGKILL: no goodbye, no flush) if it still runs, and resolves once
   * the process is gone. Idempotent: the teardown of every test.
   */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.alive) this.child.kill(signal);
    await this.exited;
  }
}

/**
 * Starts one replica of a fleet sharing state through etcd: its configuration is written to
 * `<dir>/<name>.yaml` with its own state folder `state-<name>`, the etcd endpoint and prefix, a
 * writer lease of `leaseTtl`, and the `sources` YAML lines given (indented as list items); `env`
 * adds to the process's environment.
 */
export async function startReplica(
  dir: string,
  name: string,
  etcd: {
    readonly endpoint: string;
    readonly prefix: string;
    readonly leaseTtl: string;
    /** More fields of `state.etcd`, as YAML flow mapping entries (`compaction: 1s`). */
    readonly more?: string;
  },
  sources: readonly string[],
  env?: Readonly<Record<string, string>>,
): Promise<MeshmuxProcess> {
  const file = path.join(dir, `${name}.yaml`);
  await mkdir(path.join(dir, `state-${name}`), { recursive: true });
  await writeFile(
    file,
    [
      'state:',
      `  dir: state-${name}`,
      `  etcd: { endpoints: ['${etcd.endpoint}'], prefix: ${etcd.prefix}, leaseTtl: ${etcd.leaseTtl}${etcd.more === undefined ? '' : `, ${etcd.more}`} }`,
      'sources:',
      ...sources,
      '',
    ].join('\n'),
  );
  return MeshmuxProcess.start(file, { cwd: dir, ...(env === undefined ? {} : { env }) });
}
