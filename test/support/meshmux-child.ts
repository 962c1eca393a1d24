import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PACKAGE_ROOT } from '../../src/core/paths.js';

/** The built command line entry point. */
const CLI = path.join(PACKAGE_ROOT, 'dist', 'src', 'cli.js');

/** Lines of output kept for failure messages. */
const KEPT_LINES = 400;

/**
 * `meshmux serve` as a child process, on ephemeral loopback ports, as an operator runs it: the
 * way to test what survives a SIGKILL and a restart. Its log (JSON lines) is kept for failure
 * messages and for waiting on what it reports.
 */
export class MeshmuxChild {
  /** `performance.now()` when the process was spawned: measure "time to serve" from here. */
  readonly spawnedAt: number;
  /** `127.0.0.1:port` of ADS. */
  xds = '';
  /** `http://127.0.0.1:port`. */
  http = '';
  private readonly lines: string[] = [];
  private readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined;
  private lineWaiters: Array<() => void> = [];

  private constructor(
    private readonly child: ChildProcess,
    private readonly describe: string,
  ) {
    this.spawnedAt = performance.now();
    let partial = '';
    const onData = (chunk: Buffer): void => {
      const text = partial + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) {
        this.lines.push(line);
        if (this.lines.length > KEPT_LINES) this.lines.shift();
      }
      for (const w of this.lineWaiters.splice(0)) w();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    this.exited = new Promise((resolve) => {
      child.on('exit', (code) => {
        this.exitCode = code;
        for (const w of this.lineWaiters.splice(0)) w();
        resolve(code);
      });
    });
  }

  /**
   * Spawns `meshmux serve --config <configFile>` in `cwd` and resolves once it reports its ports.
   * Rejects (killing it) when it exits first or does not start within `timeoutMs`.
   */
  static async start(
    configFile: string,
    options: {
      cwd: string;
      /** ADS address; default an ephemeral port. Give the previous one to restart where istiods redial. */
      xds?: string;
      env?: Readonly<Record<string, string>>;
      timeoutMs?: number;
    },
  ): Promise<MeshmuxChild> {
    const child = spawn(
      process.execPath,
      [CLI, 'serve', '--config', configFile, '--xds', options.xds ?? '127.0.0.1:0', '--http', '127.0.0.1:0'],
      {
        cwd: options.cwd,
        env: { ...process.env, MESHMUX_LOG_LEVEL: 'info', ...options.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const running = new MeshmuxChild(child, `meshmux serve --config ${configFile}`);
    try {
      const started = await running.waitForLog(
        (entry) => entry['msg'] === 'meshmux started',
        options.timeoutMs ?? 20_000,
        'the "meshmux started" line',
      );
      running.xds = `127.0.0.1:${String(started['xdsPort'])}`;
      running.http = `http://127.0.0.1:${String(started['httpPort'])}`;
      return running;
    } catch (err) {
      await running.kill();
      throw err;
    }
  }

  /** Log entries so far (parsed JSON lines; other lines as `{ msg: line }`). */
  get log(): Array<Record<string, unknown>> {
    return this.lines.map(parseLine);
  }

  /** Resolves with the first log entry (so far or later) that matches; rejects after `timeoutMs` or on exit. */
  waitForLog(
    match: (entry: Record<string, unknown>) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => {
        this.lineWaiters = this.lineWaiters.filter((w) => w !== check);
        reject(new Error(`${this.describe}: no ${what} within ${timeoutMs} ms; output:\n${this.tail()}`));
      }, timeoutMs);
      const check = (): void => {
        const found = this.log.find(match);
        if (found !== undefined) {
          clearTimeout(deadline);
          resolve(found);
          return;
        }
        if (this.exitCode !== undefined) {
          clearTimeout(deadline);
          reject(
            new Error(`${this.describe} exited (${String(this.exitCode)}) before ${what}:\n${this.tail()}`),
          );
          return;
        }
        this.lineWaiters.push(check);
      };
      check();
    });
  }

  /** The last lines of output, for failure messages. */
  tail(lines = 40): string {
    return this.lines.slice(-lines).join('\n');
  }

  /** Sends `signal` (default SIGKILL: no goodbye, no flush) and resolves once the process is gone. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.exitCode === undefined) this.child.kill(signal);
    await this.exited;
  }
}

function parseLine(line: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(line);
    if (parsed !== null && typeof parsed === 'object') return parsed as Record<string, unknown>;
  } catch {
    // not JSON: a plain line
  }
  return { msg: line };
}
