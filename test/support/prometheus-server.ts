/**
 * A real Prometheus server and `promtool` for tests, from Debian's `prometheus` package, which
 * .ci/run installs. When the binaries are missing, the tests that need them fail in CI and skip
 * elsewhere, naming the package (see required-peer.ts).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { onFreePort } from './free-port.js';
import { missingPeerLine } from './required-peer.js';

const run = promisify(execFile);

/** Paths of the binaries, or the line saying they are missing. */
export type PrometheusTools =
  { readonly prometheus: string; readonly promtool: string } | { readonly missing: string };

async function which(name: string): Promise<string | undefined> {
  try {
    const { stdout } = await run('sh', ['-c', `command -v ${name}`]);
    const found = stdout.trim();
    return found === '' ? undefined : found;
  } catch {
    return undefined;
  }
}

let tools: Promise<PrometheusTools> | undefined;

/** Finds `prometheus` and `promtool` on the PATH. */
export function prometheusTools(): Promise<PrometheusTools> {
  tools ??= locate();
  return tools;
}

async function locate(): Promise<PrometheusTools> {
  const prometheus = await which('prometheus');
  const promtool = await which('promtool');
  if (prometheus !== undefined && promtool !== undefined) return { prometheus, promtool };
  return { missing: missingPeerLine('prometheus/promtool', 'prometheus') };
}

/** Runs `promtool check metrics` on an exposition; resolves to its exit code and output. */
export function promtoolCheckMetrics(
  promtool: string,
  exposition: string,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(promtool, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, output }));
    child.stdin.end(exposition);
  });
}

/** One sample of an instant query: its labels and value. */
export interface PromSample {
  readonly metric: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A Prometheus server of the test's own: temporary storage, loopback only, one scrape job. */
export class PrometheusServer {
  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly log: () => string,
  ) {}

  /** Starts Prometheus scraping `targets` (host:port) every `scrapeIntervalMs`, and waits until it is ready. */
  static async start(
    binary: string,
    targets: readonly string[],
    options: { scrapeIntervalMs?: number; readyTimeoutMs?: number } = {},
  ): Promise<PrometheusServer> {
    // A fresh folder and port per attempt: another process may take the port first.
    return onFreePort(async (port) => {
      const dir = await mkdtemp(path.join(tmpdir(), 'meshmux-prometheus-'));
      const interval = `${options.scrapeIntervalMs ?? 500}ms`;
      await writeFile(
        path.join(dir, 'prometheus.yml'),
        [
          'global:',
          `  scrape_interval: ${interval}`,
          `  scrape_timeout: ${interval}`,
          'scrape_configs:',
          '  - job_name: meshmux',
          '    static_configs:',
          `      - targets: [${targets.map((t) => JSON.stringify(t)).join(', ')}]`,
          '',
        ].join('\n'),
      );
      const child = spawn(
        binary,
        [
          `--config.file=${path.join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${path.join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
          '--web.enable-lifecycle',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let log = '';
      const keep = (d: Buffer): void => {
        log = (log + d.toString()).slice(-20_000);
      };
      child.stdout?.on('data', keep);
      child.stderr?.on('data', keep);
      const server = new PrometheusServer(`http://127.0.0.1:${port}`, child, dir, () => log);
      const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
      for (;;) {
        if (child.exitCode !== null) {
          await server.stop();
          throw new Error(`prometheus exited with ${child.exitCode}:\n${log}`);
        }
        try {
          if ((await fetch(`${server.url}/-/ready`)).ok) return server;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) {
          await server.stop();
          throw new Error(`prometheus not ready in time:\n${log}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    });
  }

  /** Prometheus' own log so far, for failure messages. */
  get output(): string {
    return this.log();
  }

  /** An instant query over the HTTP API. */
  async query(promql: string): Promise<PromSample[]> {
    const res = await fetch(`${this.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await res.json()) as {
      status: string;
      error?: string;
      data?: {
        resultType: string;
        result: Array<{ metric: Record<string, string>; value: [number, string] }>;
      };
    };
    if (body.status !== 'success' || body.data === undefined) {
      throw new Error(`query ${promql} failed: ${body.error ?? res.status}`);
    }
    return body.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  }

  /** Polls `promql` until `predicate` holds for its samples (Prometheus scrapes on its own schedule). */
  async waitFor(
    promql: string,
    predicate: (samples: PromSample[]) => boolean,
    timeoutMs = 20_000,
  ): Promise<PromSample[]> {
    const deadline = Date.now() + timeoutMs;
    let last: PromSample[] = [];
    for (;;) {
      last = await this.query(promql);
      if (predicate(last)) return last;
      if (Date.now() > deadline) {
        throw new Error(`${promql} never matched; last: ${JSON.stringify(last)}\n${this.log().slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** The state of every scrape target (`up`, `down`, `unknown`) with its last error. */
  async targets(): Promise<Array<{ scrapeUrl: string; health: string; lastError: string }>> {
    const body = (await (await fetch(`${this.url}/api/v1/targets`)).json()) as {
      data: { activeTargets: Array<{ scrapeUrl: string; health: string; lastError: string }> };
    };
    return body.data.activeTargets;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
