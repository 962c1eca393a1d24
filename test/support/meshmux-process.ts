import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { PACKAGE_ROOT } from '../../src/core/paths.js';

const CLI = path.join(PACKAGE_ROOT, 'dist', 'src', 'cli.js');

/** One JSON log line of the child. */
export type LogLine = Readonly<Record<string, unknown>> & { readonly msg?: string };

/**
 * `meshmux serve` in a child process, as it runs in production, on ephemeral loopback ports
 * (read from its "meshmux started" line). Its log lines are kept for assertions.
 */
export class MeshmuxProcess {
  readonly logs: LogLine[] = [];
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(
    private readonly child: ChildProcess,
    readonly xds: string,
    readonly http: string,
    exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
    logs: LogLine[],
  ) {
    this.exited = exited;
    this.logs = logs;
  }

  /** Starts `meshmux serve --config <configFile>` in `cwd`; rejects when it has not started within `timeoutMs`. */
  static async start(configFile: string, cwd: string, timeoutMs = 60_000): Promise<MeshmuxProcess> {
    const child = spawn(
      process.execPath,
      [CLI, 'serve', '--config', configFile, '--xds', '127.0.0.1:0', '--http', '127.0.0.1:0'],
      { cwd, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, MESHMUX_LOG_LEVEL: 'info' } },
    );
    const logs: LogLine[] = [];
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const started = new Promise<{ xdsPort: number; httpPort: number }>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`meshmux did not log "meshmux started" within ${timeoutMs} ms`)),
        timeoutMs,
      );
      void exited.then(({ code }) => {
        clearTimeout(timer);
        reject(new Error(`meshmux exited with ${String(code)} before it started`));
      });
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (text) => {
        let line: LogLine;
        try {
          line = JSON.parse(text) as LogLine;
        } catch {
          return;
        }
        logs.push(line);
        if (line.msg === 'meshmux started') {
          clearTimeout(timer);
          resolve({ xdsPort: Number(line['xdsPort']), httpPort: Number(line['httpPort']) });
        }
      });
    });
    const { xdsPort, httpPort } = await started;
    return new MeshmuxProcess(child, `127.0.0.1:${xdsPort}`, `http://127.0.0.1:${httpPort}`, exited, logs);
  }

  /** A JSON debug page, e.g. `counters`. */
  async debug<T>(page: string): Promise<T> {
    const response = await fetch(`${this.http}/debug/${page}`);
    if (response.status !== 200) throw new Error(`/debug/${page} answered ${response.status}`);
    return (await response.json()) as T;
  }

  /** Log lines whose message is `msg`. */
  lines(msg: string): LogLine[] {
    return this.logs.filter((l) => l.msg === msg);
  }

  /** Sends a signal; resolves with how the process exited and how long that took. Kills it after `timeoutMs`. */
  async stop(
    signal: NodeJS.Signals = 'SIGTERM',
    timeoutMs = 30_000,
  ): Promise<{ code: number | null; ms: number; killed: boolean }> {
    const started = performance.now();
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      this.child.kill('SIGKILL');
    }, timeoutMs);
    this.child.kill(signal);
    const { code } = await this.exited;
    clearTimeout(timer);
    return { code, ms: performance.now() - started, killed };
  }

  /** Kills the process if it still runs (teardown). */
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}
