/**
 * A real standalone ZooKeeper for tests: Debian's `zookeeper` package (which .ci/run installs),
 * started on a free loopback port with its data in a temporary folder. When it is missing, the
 * tests fail in CI and skip elsewhere, naming the package (see required-peer.ts).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { onFreePort } from './free-port.js';
import { missingPeerLine } from './required-peer.js';
import { stopChild } from './stop-child.js';

/** Debian's jar; its manifest's Class-Path names every dependency jar. */
const DEBIAN_JAR = '/usr/share/java/zookeeper.jar';
const MAIN_CLASS = 'org.apache.zookeeper.server.ZooKeeperServerMain';

export interface ZookeeperServerOptions {
  /** ZooKeeper's tick; sessions may last 2–20 ticks. Default 250 ms (sessions of 0.5–5 s). */
  readonly tickTimeMs?: number;
  /** How long to wait for the server to answer `ruok`. Default 60 s. */
  readonly startTimeoutMs?: number;
  /** Lines added to `zoo.cfg` (a server that enforces authentication, say). */
  readonly extraConfig?: readonly string[];
}

function hasJava(): boolean {
  return spawnSync('java', ['-version'], { stdio: 'ignore' }).status === 0;
}

/** Why ZooKeeper cannot run here (the one line naming the package), or undefined when it can. */
export function zookeeperMissing(): string | undefined {
  const home = process.env['ZOOKEEPER_HOME'];
  const installed = (home !== undefined && existsSync(path.join(home, 'lib'))) || existsSync(DEBIAN_JAR);
  return installed && hasJava() ? undefined : missingPeerLine('ZooKeeper (or java)', 'zookeeper');
}

/** `java` and a class path that runs ZooKeeper; throws the missing-package line when it cannot. */
function locateZookeeper(): string {
  const missing = zookeeperMissing();
  if (missing !== undefined) throw new Error(missing);
  const home = process.env['ZOOKEEPER_HOME'];
  if (home !== undefined && existsSync(path.join(home, 'lib'))) {
    return `${path.join(home, 'lib', '*')}${path.delimiter}${path.join(home, 'conf')}`;
  }
  return DEBIAN_JAR;
}

/** Sends a four-letter command (`ruok`, `srvr`, `cons`, ...) and returns the answer; '' when unreachable. */
export function fourLetterWord(port: number, command: string, timeoutMs = 2_000): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => socket.write(command));
    socket.setTimeout(timeoutMs, () => socket.destroy());
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

/** One standalone ZooKeeper process; `stop` and `start` again keep its data (a restart). */
export class ZookeeperServer {
  private process: ChildProcess | undefined;
  private stderr = '';

  private constructor(
    private readonly classPath: string,
    private readonly dir: string,
    readonly port: number,
    private readonly startTimeoutMs: number,
    private readonly tickTimeMs: number,
  ) {}

  /** Starts a server on a free port with an empty data folder; resolves once it answers `ruok`. */
  static async start(options: ZookeeperServerOptions = {}): Promise<ZookeeperServer> {
    const classPath = locateZookeeper();
    const dir = await mkdtemp(path.join(tmpdir(), 'meshmux-zk-'));
    await mkdir(path.join(dir, 'data'));
    return onFreePort(async (port) => {
      const server = new ZookeeperServer(
        classPath,
        dir,
        port,
        options.startTimeoutMs ?? 60_000,
        options.tickTimeMs ?? 250,
      );
      await server.writeConfig(options.extraConfig ?? []);
      await server.start();
      return server;
    });
  }

  /**
   * Stops the server, rewrites `zoo.cfg` with `extraConfig` in place of the lines given before, and
   * starts it again on the same port and data, as operators change a setting of an ensemble.
   */
  async restartWith(extraConfig: readonly string[]): Promise<void> {
    await this.stop();
    await this.writeConfig(extraConfig);
    await this.start();
  }

  private async writeConfig(extraConfig: readonly string[]): Promise<void> {
    await writeFile(
      path.join(this.dir, 'zoo.cfg'),
      [
        `tickTime=${this.tickTimeMs}`,
        `dataDir=${path.join(this.dir, 'data')}`,
        `clientPort=${this.port}`,
        'clientPortAddress=127.0.0.1',
        'admin.enableServer=false',
        '4lw.commands.whitelist=ruok,srvr,cons,mntr',
        'maxClientCnxns=0',
        // Sessions may ask for up to a minute (the default cap is 20 ticks, 5 s here): a client
        // that must outlive a restart of this server asks for more than the restart takes.
        'maxSessionTimeout=60000',
        // Tests need speed, not durability across power loss.
        'forceSync=no',
        ...extraConfig,
        '',
      ].join('\n'),
    );
  }

  /** `127.0.0.1:<port>`. */
  get connectString(): string {
    return `127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.process !== undefined;
  }

  /** Starts the process (again, after `stop`) and resolves once it answers `ruok`. */
  async start(): Promise<void> {
    if (this.process !== undefined) return;
    this.stderr = '';
    const child = spawn(
      'java',
      [
        '-Xmx256m',
        '-XX:+UseSerialGC',
        '-XX:TieredStopAtLevel=1',
        '-Dzookeeper.admin.enableServer=false',
        '-cp',
        this.classPath,
        MAIN_CLASS,
        path.join(this.dir, 'zoo.cfg'),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    child.stderr?.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString('utf8')).slice(-4_000);
    });
    this.process = child;
    // A test process that dies must not leave a JVM behind.
    const killOnExit = (): void => void child.kill('SIGKILL');
    process.once('exit', killOnExit);
    let exited = false;
    child.once('exit', () => {
      process.removeListener('exit', killOnExit);
      exited = true;
      if (this.process === child) this.process = undefined;
    });
    const deadline = Date.now() + this.startTimeoutMs;
    while (Date.now() < deadline) {
      if (exited) throw new Error(`ZooKeeper exited while starting:\n${this.stderr}`);
      if ((await fourLetterWord(this.port, 'ruok', 500)) === 'imok') return;
      await new Promise((r) => setTimeout(r, 100));
    }
    await this.stop();
    throw new Error(`ZooKeeper did not answer ruok within ${this.startTimeoutMs} ms:\n${this.stderr}`);
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

  /** How many packets the server has received from clients since it started (`mntr`). */
  async packetsReceived(): Promise<number> {
    const text = await fourLetterWord(this.port, 'mntr');
    const m = /zk_packets_received\s+(\d+)/.exec(text);
    if (m === null) throw new Error('ZooKeeper did not answer mntr');
    return Number(m[1]);
  }

  /** Session ids (`0x…`) of the connections from `localPort` (or every connection), via `cons`. */
  async sessions(localPort?: number): Promise<string[]> {
    const text = await fourLetterWord(this.port, 'cons');
    // `cons` always lists at least its own connection: an empty answer means no answer.
    if (text === '') throw new Error('ZooKeeper did not answer cons');
    const out: string[] = [];
    for (const line of text.split('\n')) {
      const m = /:(\d+)\[.*sid=(0x[0-9a-f]+)/.exec(line);
      if (m !== null && (localPort === undefined || Number(m[1]) === localPort)) out.push(m[2] ?? '');
    }
    return out;
  }
}
