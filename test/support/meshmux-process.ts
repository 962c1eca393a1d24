/**
 * meshmux as a real child process (`node dist/src/cli.js serve`), for tests that must prove the
 * process itself survives: it keeps running, keeps its streams, and says what went wrong.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { PACKAGE_ROOT } from '../../src/core/paths.js';

const CLI = path.join(PACKAGE_ROOT, 'dist', 'src', 'cli.js');

/** One JSON log line of the child. */
export type LogLine = Readonly<Record<string, unknown>> & { readonly msg?: string };

interface LogWaiter {
  readonly from: number;
  readonly predicate: (line: LogLine) => boolean;
  readonly resolve: (line: LogLine) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** A running `meshmux serve`, its ports, its log, and its HTTP pages. */
export class MeshmuxProcess {
  /** Every JSON line it wrote to stdout, in order. */
  readonly logs: LogLine[] = [];
  private stderr = '';
  private waiters: LogWaiter[] = [];
  private exited: Promise<number | null>;
  private exitCode: number | null | undefined;

  private constructor(
    private readonly child: ChildProcess,
    /** `127.0.0.1:<port>` of its plaintext ADS listener. */
    public xds = '',
    /** `http://127.0.0.1:<port>` of its HTTP listener. */
    public http = '',
  ) {
    this.exited = new Promise((resolve) =>
      child.once('exit', (code) => {
        this.exitCode = code;
        for (const w of this.waiters.splice(0)) {
          clearTimeout(w.timer);
          w.reject(
            new Error(`meshmux exited with ${String(code)} while a log line was awaited:\n${this.stderr}`),
          );
        }
        resolve(code);
      }),
    );
    child.stderr?.on('data', (chunk: Buffer) => (this.stderr += chunk.toString('utf8')));
    if (child.stdout !== null) {
      createInterface({ input: child.stdout }).on('line', (text) => {
        let line: LogLine;
        try {
          line = JSON.parse(text) as LogLine;
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
   * Starts `meshmux serve --config <config>` in `cwd` on free loopback ports, at log level info,
   * and resolves once it listens. Rejects (with its stderr) if it exits first or takes over 30 s.
   */
  static async start(config: string, cwd: string): Promise<MeshmuxProcess> {
    const child = spawn(
      process.execPath,
      [CLI, 'serve', '--config', config, '--xds', '127.0.0.1:0', '--http', '127.0.0.1:0'],
      { cwd, env: { ...process.env, MESHMUX_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const meshmux = new MeshmuxProcess(child);
    try {
      const started = await meshmux.waitForLog(
        (l) => l.msg === 'meshmux started',
        0,
        30_000,
        'meshmux started',
      );
      meshmux.xds = `127.0.0.1:${String(started.xdsPort)}`;
      meshmux.http = `http://127.0.0.1:${String(started.httpPort)}`;
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    return meshmux;
  }

  /** Whether the process is still running. */
  get alive(): boolean {
    return this.exitCode === undefined;
  }

  /** What it wrote to stderr so far. */
  get errorOutput(): string {
    return this.stderr;
  }

  /** The first log line at index `from` or later that matches; rejects after `timeoutMs` naming `what`. */
  waitForLog(
    predicate: (line: LogLine) => boolean,
    from: number,
    timeoutMs: number,
    what: string,
  ): Promise<LogLine> {
    const found = this.logs.slice(from).find(predicate);
    if (found !== undefined) return Promise.resolve(found);
    if (!this.alive) return Promise.reject(new Error(`meshmux has exited; waited for ${what}`));
    return new Promise((resolve, reject) => {
      const waiter: LogWaiter = {
        from,
        predicate,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          reject(new Error(`no log line "${what}" within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** The value of an unlabelled metric on `/metrics`, or undefined when absent. */
  async metric(name: string): Promise<number | undefined> {
    const text = await (await fetch(`${this.http}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.slice(name.length + 1));
  }

  /** The HTML of the status page. */
  async statusPage(): Promise<string> {
    return (await fetch(`${this.http}/`)).text();
  }

  /** `/debug/counters`: CPU, memory and event-loop delay since the last reset. */
  async counters(): Promise<{
    readonly process: {
      readonly rssBytes: number;
      readonly maxRssBytes: number;
      readonly eventLoopDelayMaxMs: number;
    };
  }> {
    return (await (await fetch(`${this.http}/debug/counters`)).json()) as {
      process: { rssBytes: number; maxRssBytes: number; eventLoopDelayMaxMs: number };
    };
  }

  /** Starts a new event-loop delay window. */
  async resetCounters(): Promise<void> {
    const res = await fetch(`${this.http}/debug/counters/reset`, { method: 'POST' });
    await res.arrayBuffer();
  }

  /** A JSON debug page, e.g. `counters`. */
  async debug<T>(page: string): Promise<T> {
    const response = await fetch(`${this.http}/debug/${page}`, { signal: AbortSignal.timeout(10_000) });
    if (response.status !== 200) throw new Error(`/debug/${page} answered ${response.status}`);
    return (await response.json()) as T;
  }

  /** Log lines whose message is `msg`. */
  lines(msg: string): LogLine[] {
    return this.logs.filter((l) => l.msg === msg);
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

  /** Kills the process if it still runs (teardown). */
  kill(): void {
    if (this.alive) this.child.kill('SIGKILL');
  }
}
