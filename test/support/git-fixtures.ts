/**
 * Real git repositories and servers for the git source's tests: a work tree that commits and
 * pushes to a bare "remote", `git daemon` on a loopback port, and `git http-backend` behind a
 * tiny Node HTTP server (which can demand a token). Every git command runs with the test's own
 * identity and no global or system config.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';
import { devNull } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { onFreePort } from './free-port.js';
import { within } from './deadline.js';

const GIT_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: devNull,
  GIT_TERMINAL_PROMPT: '0',
  LC_ALL: 'C',
};

const IDENTITY = [
  '-c',
  'user.name=meshmux test',
  '-c',
  'user.email=test@meshmux.invalid',
  '-c',
  'commit.gpgsign=false',
  '-c',
  'tag.gpgsign=false',
];

/** Runs git in `cwd` and resolves to its trimmed standard output. */
export function git(cwd: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      [...IDENTITY, ...args],
      { cwd, env: GIT_ENV, maxBuffer: 256 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err !== null) reject(new Error(`git ${args.join(' ')}: ${stderr || err.message}`));
        else resolve(stdout.trim());
      },
    );
  });
}

/** A work tree whose `main` is pushed to a bare repository standing in for the remote. */
export class TestRepo {
  private constructor(
    /** The work tree commits are made in. */
    readonly work: string,
    /** The bare repository sources fetch from. */
    readonly remote: string,
  ) {}

  /** Creates `<root>/<name>.git` (bare) and a work tree pushing to it. */
  static async create(root: string, name = 'mesh-config'): Promise<TestRepo> {
    const remote = path.join(root, `${name}.git`);
    const work = path.join(root, `${name}-work`);
    await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', remote);
    await git(root, 'init', '--quiet', '--initial-branch=main', work);
    await git(work, 'remote', 'add', 'origin', remote);
    return new TestRepo(work, remote);
  }

  /** The remote as a `file://` URL. */
  get fileUrl(): string {
    return pathToFileURL(this.remote).href;
  }

  /** Writes files (repository path → content) into the work tree. */
  async write(files: Readonly<Record<string, string>>): Promise<void> {
    for (const [p, content] of Object.entries(files)) {
      const file = path.join(this.work, p);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, content);
    }
  }

  /** Removes files from the work tree. */
  async remove(...paths: string[]): Promise<void> {
    for (const p of paths) await rm(path.join(this.work, p));
  }

  /** Commits everything in the work tree; resolves to the new commit id. */
  async commit(message: string): Promise<string> {
    await git(this.work, 'add', '--all');
    await git(this.work, 'commit', '--quiet', '--allow-empty', '-m', message);
    return git(this.work, 'rev-parse', 'HEAD');
  }

  /** Pushes refspecs (default `main`) to the remote. */
  async push(...refspecs: string[]): Promise<void> {
    await git(this.work, 'push', '--quiet', 'origin', ...(refspecs.length === 0 ? ['main'] : refspecs));
  }

  /** Writes, commits and pushes `main`; resolves to the commit id. */
  async commitAndPush(files: Readonly<Record<string, string>>, message: string): Promise<string> {
    await this.write(files);
    const sha = await this.commit(message);
    await this.push();
    return sha;
  }

  /** Runs git in the work tree. */
  git(...args: string[]): Promise<string> {
    return git(this.work, ...args);
  }
}

/** `git daemon` exporting every repository under `basePath` on a loopback port. */
export class GitDaemon {
  private child: ChildProcess | undefined;

  private constructor(
    readonly basePath: string,
    readonly port: number,
  ) {}

  /** Starts a daemon on `port` (default: a free one); resolves once it accepts connections. */
  static async start(basePath: string, port?: number): Promise<GitDaemon> {
    const on = async (p: number): Promise<GitDaemon> => {
      const daemon = new GitDaemon(basePath, p);
      await daemon.restart();
      return daemon;
    };
    return port === undefined ? onFreePort(on) : on(port);
  }

  /** The `git://` URL of a repository folder under the base path. */
  url(repoFolder: string): string {
    return `git://127.0.0.1:${this.port}/${path.relative(this.basePath, repoFolder)}`;
  }

  /** Starts it again on the same port after `stop()`. */
  async restart(): Promise<void> {
    const child = spawn(
      'git',
      [
        'daemon',
        '--verbose',
        '--export-all',
        '--reuseaddr',
        `--base-path=${this.basePath}`,
        `--port=${this.port}`,
        '--listen=127.0.0.1',
        this.basePath,
      ],
      { env: GIT_ENV, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.child = child;
    // The daemon says so on stderr once it listens: wait for that line rather than for time.
    const ready = new Promise<void>((resolve, reject) => {
      let text = '';
      const onData = (chunk: Buffer): void => {
        text += chunk.toString('utf8');
        if (text.includes('Ready to rumble')) {
          child.stderr?.off('data', onData);
          child.stderr?.resume();
          resolve();
        }
      };
      child.stderr?.on('data', onData);
      child.once('exit', (code) => reject(new Error(`git daemon exited (${String(code)}): ${text}`)));
    });
    await within(ready, 15_000, 'git daemon to say "Ready to rumble"');
  }

  /** Stops it; resolves once the process has exited and the port is closed. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await within(exited, 10_000, 'git daemon to exit after SIGTERM');
  }
}

/**
 * `git http-backend` (smart HTTP, protocol v2) behind a Node HTTP server on a loopback port.
 * With `requireAuthorization`, requests without exactly that `Authorization` header get 401.
 */
export class GitHttpServer {
  /** The `Authorization` header of each request received, in order. */
  readonly authorizations: Array<string | undefined> = [];
  private readonly server: Server;

  private constructor(
    readonly projectRoot: string,
    requireAuthorization: string | undefined,
  ) {
    this.server = createServer((req, res) => {
      this.authorizations.push(req.headers.authorization);
      if (requireAuthorization !== undefined && req.headers.authorization !== requireAuthorization) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
        res.end();
        return;
      }
      serveCgi(projectRoot, req, res);
    });
  }

  static async start(projectRoot: string, requireAuthorization?: string): Promise<GitHttpServer> {
    const http = new GitHttpServer(projectRoot, requireAuthorization);
    http.server.listen(0, '127.0.0.1');
    await once(http.server, 'listening');
    return http;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The `http://` URL of a repository folder under the project root. */
  url(repoFolder: string): string {
    return `http://127.0.0.1:${this.port}/${path.relative(this.projectRoot, repoFolder)}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Runs one request through `git http-backend` as a CGI program. */
function serveCgi(projectRoot: string, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://git');
  const child = spawn('git', ['http-backend'], {
    env: {
      ...GIT_ENV,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      REMOTE_ADDR: '127.0.0.1',
    },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'status') status = Number.parseInt(value, 10);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end + 4));
  });
  child.stdout.on('end', () => {
    if (!headersDone) res.writeHead(502);
    res.end();
  });
}

/** A ServiceEntry document. */
export function serviceEntry(name: string, namespace: string, host: string): string {
  return (
    `apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: ${name}\n  namespace: ${namespace}\n` +
    `spec:\n  hosts: [${host}]\n  location: MESH_EXTERNAL\n  resolution: DNS\n` +
    `  ports:\n    - {number: 443, name: https, protocol: TLS}\n`
  );
}

/** A VirtualService document routing `host` with a timeout. */
export function virtualService(name: string, namespace: string, host: string, timeout = '3s'): string {
  return (
    `apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: ${name}\n  namespace: ${namespace}\n` +
    `spec:\n  hosts: [${host}]\n  http:\n    - route:\n        - destination: {host: ${host}}\n      timeout: ${timeout}\n`
  );
}
