/**
 * Registers Dubbo providers in ZooKeeper the way Dubbo does: persistent `<root>/<interface>` and
 * `<root>/<interface>/providers` nodes, and one ephemeral node per provider named after the
 * provider URL encoded once with Java's URLEncoder rules. Ephemeral nodes live as long as this
 * client's session.
 */
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { ACL, CreateMode, createClient, Exception, Id, Permission, type Client } from 'node-zookeeper-client';

export interface ProviderSpec {
  readonly iface: string;
  readonly ip: string;
  readonly port?: number;
  readonly protocol?: string;
  readonly application?: string;
  readonly group?: string;
  readonly version?: string;
  /** More query parameters. */
  readonly params?: Readonly<Record<string, string>>;
}

/** A provider URL as Dubbo writes it: parameters sorted, `side=provider`. */
export function providerUrl(spec: ProviderSpec): string {
  const params: Record<string, string> = {
    anyhost: 'true',
    application: spec.application ?? 'demo-provider',
    dubbo: '2.0.2',
    interface: spec.iface,
    methods: 'sayHello,sayGoodbye',
    pid: '4242',
    release: '2.7.23',
    side: 'provider',
    timestamp: '1700000000000',
    ...(spec.group === undefined ? {} : { group: spec.group }),
    ...(spec.version === undefined ? {} : { version: spec.version }),
    ...spec.params,
  };
  const query = Object.keys(params)
    .sort()
    .map((k) => `${k}=${params[k] ?? ''}`)
    .join('&');
  const host = spec.ip.includes(':') ? `[${spec.ip}]` : spec.ip;
  return `${spec.protocol ?? 'dubbo'}://${host}:${spec.port ?? 20880}/${spec.iface}?${query}`;
}

/** Java's `URLEncoder.encode(text, "UTF-8")`: only `A-Za-z0-9.-*_` stay, a space becomes `+`. */
export function encodeLikeJava(text: string): string {
  return encodeURIComponent(text)
    .replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, '+');
}

function settle<T>(
  resolve: (v: T) => void,
  reject: (e: Error) => void,
): (err: Error | Exception | null, v: T) => void {
  return (err, v) => (err === null ? resolve(v) : reject(new Error(String(err))));
}

/** How long a connection may go without ZooKeeper's answer to its handshake before it is dialled again. */
const HANDSHAKE_MS = 2_000;

/**
 * ZooKeeper can accept a connection while it starts and never answer its handshake, and the
 * library then waits on that socket for good (it times out the TCP connect only). Like the
 * connection timeout of the clients Dubbo providers use, a socket that has stayed unconnected
 * for a whole period is destroyed, and the library dials again on the same session. Returns the
 * function that stops the watch.
 */
function redialSilentHandshakes(client: Client): () => void {
  // The library's connection manager is not part of its typed surface; its socket is.
  const manager = (client as unknown as { connectionManager?: { socket?: Socket } }).connectionManager;
  let connected = false;
  client.on('connected', () => (connected = true));
  client.on('disconnected', () => (connected = false));
  let waitingOn: Socket | undefined;
  const timer = setInterval(() => {
    const socket = connected ? undefined : manager?.socket;
    if (socket !== undefined && socket === waitingOn) socket.destroy();
    waitingOn = socket;
  }, HANDSHAKE_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** A provider-side ZooKeeper client. */
export class DubboRegistry {
  private constructor(
    private readonly client: Client,
    readonly root: string,
    private readonly stopWatch: () => void,
  ) {}

  /** Connects with its own session (`sessionTimeoutMs`, default 5 s); `digest` = `user:password`. */
  static connect(
    connectString: string,
    options: { root?: string; sessionTimeoutMs?: number; digest?: string } = {},
  ): Promise<DubboRegistry> {
    const client = createClient(connectString, { sessionTimeout: options.sessionTimeoutMs ?? 5_000 });
    if (options.digest !== undefined) client.addAuthInfo('digest', Buffer.from(options.digest));
    const stopWatch = redialSilentHandshakes(client);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        stopWatch();
        client.close();
        reject(new Error(`cannot connect to ZooKeeper at ${connectString}`));
      }, 15_000);
      client.once('connected', () => {
        clearTimeout(timer);
        resolve(new DubboRegistry(client, options.root ?? '/dubbo', stopWatch));
      });
      client.connect();
    });
  }

  /** The session's id in hex: the providers registered live as long as it does. */
  get sessionId(): string {
    return this.client.getSessionId().toString('hex');
  }

  /** Resolves when the client next loses its connection. */
  disconnected(): Promise<void> {
    return new Promise((resolve) => this.client.once('disconnected', () => resolve()));
  }

  /** The znode path a provider is registered at. */
  pathOf(spec: ProviderSpec | string): string {
    const url = typeof spec === 'string' ? spec : providerUrl(spec);
    const iface = typeof spec === 'string' ? (/^[^:]+:\/\/[^/]+\/([^?]+)/.exec(url)?.[1] ?? '') : spec.iface;
    return `${this.root}/${iface}/providers/${encodeLikeJava(url)}`;
  }

  /** Registers a provider (or a raw, possibly malformed, URL under `iface`); returns its path. */
  async register(spec: ProviderSpec | { readonly iface: string; readonly rawUrl: string }): Promise<string> {
    const iface = spec.iface;
    const node = 'rawUrl' in spec ? `${this.root}/${iface}/providers/${spec.rawUrl}` : this.pathOf(spec);
    await this.mkdirp(`${this.root}/${iface}/providers`);
    await new Promise<string>((resolve, reject) =>
      this.client.create(node, CreateMode.EPHEMERAL, settle(resolve, reject)),
    );
    return node;
  }

  /**
   * Registers many providers quickly: one multi-operation per interface creating its folders (if
   * new) and its provider nodes, all sent at once.
   */
  async registerMany(specs: readonly ProviderSpec[]): Promise<void> {
    const byIface = new Map<string, ProviderSpec[]>();
    for (const s of specs) byIface.set(s.iface, [...(byIface.get(s.iface) ?? []), s]);
    await this.mkdirp(this.root);
    await Promise.all(
      [...byIface].map(
        ([iface, list]) =>
          new Promise<void>((resolve, reject) => {
            const tx = this.client.transaction();
            tx.create(`${this.root}/${iface}`, CreateMode.PERSISTENT);
            tx.create(`${this.root}/${iface}/providers`, CreateMode.PERSISTENT);
            for (const s of list) tx.create(this.pathOf(s), CreateMode.EPHEMERAL);
            tx.commit((err) => (err === null ? resolve() : reject(new Error(String(err)))));
          }),
      ),
    );
  }

  /** Removes a node (a provider's, when it unregisters). */
  unregister(path: string): Promise<void> {
    return new Promise((resolve, reject) => this.client.remove(path, settle(resolve, reject)));
  }

  /** Creates a persistent node and its parents; existing nodes are fine. */
  mkdirp(path: string, data?: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (err: Error | Exception | null): void =>
        err === null || (err instanceof Exception && err.getCode() === Exception.NODE_EXISTS)
          ? resolve()
          : reject(new Error(String(err)));
      if (data === undefined) this.client.mkdirp(path, done);
      else this.client.mkdirp(path, data, done);
    });
  }

  /** Creates a persistent node readable and writable only by the digest user `user:password`. */
  createProtected(path: string, digest: string): Promise<void> {
    const [user = '', password = ''] = digest.split(':');
    const hash = createDigest(user, password);
    const acl = [new ACL(Permission.ALL, new Id('digest', `${user}:${hash}`))];
    return new Promise((resolve, reject) =>
      this.client.create(
        path,
        acl,
        CreateMode.PERSISTENT,
        settle(() => resolve(), reject),
      ),
    );
  }

  /** Ends the session: every provider it registered disappears. */
  close(): Promise<void> {
    this.stopWatch();
    return new Promise((resolve) => {
      this.client.once('disconnected', () => resolve());
      this.client.close();
      setTimeout(resolve, 2_000).unref();
    });
  }
}

/** ZooKeeper's digest ACL id: base64(sha1("user:password")). */
function createDigest(user: string, password: string): string {
  return createHash('sha1').update(`${user}:${password}`).digest('base64');
}
