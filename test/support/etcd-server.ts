/**
 * A real single-member etcd for tests: Debian's `etcd-server` package (which .ci/run installs),
 * on free loopback ports with its data in a temporary folder. `stop` and `start` again keep the
 * data (a restart), `stop(true)` kills it as a crash would. When etcd is missing, the tests fail in
 * CI and skip elsewhere, naming the package (see required-peer.ts).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { onFreePort } from './free-port.js';
import { missingPeerLine } from './required-peer.js';
import { stopChild } from './stop-child.js';

/** Why etcd cannot run here (the one line naming the package), or undefined when it can. */
export function etcdMissing(): string | undefined {
  return spawnSync('etcd', ['--version'], { stdio: 'ignore' }).status === 0
    ? undefined
    : missingPeerLine('etcd', 'etcd-server');
}

/** One etcd process. */
export class EtcdServer {
  private process: ChildProcess | undefined;
  private output = '';

  private constructor(
    private readonly dir: string,
    readonly clientPort: number,
    private readonly peerPort: number,
    private readonly quotaBytes: number | undefined,
  ) {}

  /**
   * Starts etcd on free ports with an empty data folder; resolves once it answers `/health`.
   * `quotaBytes`: its backend quota (`--quota-backend-bytes`; etcd's default is 2 GiB).
   */
  static async start(options: { quotaBytes?: number } = {}): Promise<EtcdServer> {
    const missing = etcdMissing();
    if (missing !== undefined) throw new Error(missing);
    const dir = await mkdtemp(path.join(tmpdir(), 'meshmux-etcd-'));
    return onFreePort((clientPort) =>
      onFreePort(async (peerPort) => {
        const server = new EtcdServer(dir, clientPort, peerPort, options.quotaBytes);
        await server.start();
        return server;
      }),
    );
  }

  /** `http://127.0.0.1:<port>`, as clients name it. */
  get endpoint(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  get running(): boolean {
    return this.process !== undefined;
  }

  /** Starts the process (again, after `stop`) and resolves once it reports itself healthy. */
  async start(): Promise<void> {
    if (this.process !== undefined) return;
    this.output = '';
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const child = spawn(
      'etcd',
      [
        '--name=meshmux-test',
        `--data-dir=${path.join(this.dir, 'data')}`,
        `--listen-client-urls=${this.endpoint}`,
        `--advertise-client-urls=${this.endpoint}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=meshmux-test=${peer}`,
        '--log-level=error',
        ...(this.quotaBytes === undefined ? [] : [`--quota-backend-bytes=${this.quotaBytes}`]),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (d: Buffer): void => {
      this.output = (this.output + d.toString('utf8')).slice(-8_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.process = child;
    const killOnExit = (): void => void child.kill('SIGKILL');
    process.once('exit', killOnExit);
    let exited = false;
    child.once('exit', () => {
      process.removeListener('exit', killOnExit);
      exited = true;
      if (this.process === child) this.process = undefined;
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (exited) throw new Error(`etcd exited while starting:\n${this.output}`);
      try {
        const res = await fetch(`${this.endpoint}/health`, { signal: AbortSignal.timeout(1_000) });
        if (res.ok && ((await res.json()) as { health?: string }).health === 'true') return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await this.stop(true);
    throw new Error(`etcd did not report healthy within 30 s:\n${this.output}`);
  }

  /** Stops the process (SIGKILL with `hard`, as a crash would); its data stays for a restart. */
  async stop(hard = false): Promise<void> {
    const child = this.process;
    if (child === undefined) return;
    this.process = undefined;
    await stopChild(child, hard);
  }

  /** Stops the server and removes its data. */
  async dispose(): Promise<void> {
    await this.stop(true);
    await rm(this.dir, { recursive: true, force: true });
  }
}
