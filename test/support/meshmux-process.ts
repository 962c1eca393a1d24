/**
 * meshmux as a child process (`node dist/src/cli.js serve`), with its structured log captured, for
 * tests that assert on what meshmux logs as well as on what it serves.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { DeadlineError, within } from './deadline.js';

const CLI = path.join(PACKAGE_ROOT, 'dist', 'src', 'cli.js');

/** One JSON line of meshmux's log. */
export type LogLine = Readonly<Record<string, unknown>> & { readonly msg?: string };

interface LogWaiter {
  readonly predicate: (line: LogLine) => boolean;
  readonly resolve: (line: LogLine) => void;
}

/** A running `meshmux serve`; `stop()` ends it (SIGTERM, then SIGKILL after 10 s). */
export class MeshmuxProcess {
  /** Every log line so far, parsed. */
  readonly log: LogLine[] = [];
  private waiters: LogWaiter[] = [];
  private stderr = '';
  private buffered = '';
  xds = '';
  http = '';

  private constructor(private readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => this.onStdout(chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString('utf8')).slice(-4_000);
    });
  }

  /**
   * Starts meshmux on ephemeral loopback ports with `configFile`, at log level `info`, in the
   * configuration's folder (relative paths in it resolve there).
   */
  static async start(configFile: string, timeoutMs = 20_000): Promise<MeshmuxProcess> {
    const child = spawn(
      process.execPath,
      [CLI, 'serve', '--config', configFile, '--xds', '127.0.0.1:0', '--http', '127.0.0.1:0'],
      {
        cwd: path.dirname(configFile),
        env: { ...process.env, MESHMUX_LOG_LEVEL: 'info' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const running = new MeshmuxProcess(child);
    let onExit: ((code: number | null) => void) | undefined;
    const exited = new Promise<never>((_, reject) => {
      onExit = (code) =>
        reject(new Error(`meshmux exited (${String(code)}) while starting:\n${running.stderr}`));
      child.once('exit', onExit);
    });
    let started: LogLine;
    try {
      started = await Promise.race([
        running.waitForLog((l) => l.msg === 'meshmux started', timeoutMs, 'the "meshmux started" log line'),
        exited,
      ]);
    } catch (err) {
      await running.stop();
      throw err;
    } finally {
      if (onExit !== undefined) child.off('exit', onExit);
    }
    running.xds = `127.0.0.1:${String(started['xdsPort'])}`;
    running.http = `http://127.0.0.1:${String(started['httpPort'])}`;
    return running;
  }

  /** The first log line (already written or later) matching `predicate`; rejects after `timeoutMs`. */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs: number, what: string): Promise<LogLine> {
    const found = this.log.find(predicate);
    if (found !== undefined) return Promise.resolve(found);
    let waiter: LogWaiter | undefined;
    const seen = new Promise<LogLine>((resolve) => {
      waiter = { predicate, resolve };
      this.waiters.push(waiter);
    });
    return within(seen, timeoutMs, `log line: ${what}`).catch((err: unknown) => {
      this.waiters = this.waiters.filter((w) => w !== waiter);
      if (err instanceof DeadlineError) {
        const tail = this.log.slice(-5).map((l) => l.msg ?? '');
        throw new Error(`${err.message}; last lines: ${JSON.stringify(tail)}\n${this.stderr}`);
      }
      throw err;
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  private onStdout(text: string): void {
    const lines = (this.buffered + text).split('\n');
    this.buffered = lines.pop() ?? '';
    for (const raw of lines) {
      if (raw.trim() === '') continue;
      let line: LogLine;
      try {
        line = JSON.parse(raw) as LogLine;
      } catch {
        line = { msg: raw };
      }
      this.log.push(line);
      for (const w of [...this.waiters]) {
        if (!w.predicate(line)) continue;
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve(line);
      }
    }
  }
}
