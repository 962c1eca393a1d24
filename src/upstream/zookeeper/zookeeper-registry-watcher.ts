import { createRequire } from 'node:module';
import type * as ZooKeeperClient from 'node-zookeeper-client';
import type { Client, Option } from 'node-zookeeper-client';
import { MeshmuxError, toMeshmuxError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { SYSTEM_CLOCK, type SourceClock } from '../runtime/source-clock.js';
import { RedialPacer } from './redial-pacer.js';

/** Children of the root that Dubbo 2.7+ uses for metadata, not for interfaces. */
const NOT_INTERFACES: ReadonlySet<string> = new Set(['config', 'mapping', 'metadata']);
/** ZooKeeper's own node, present when the registry root is the server's root. */
const ZOOKEEPER_NODE = 'zookeeper';
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;
const PATH_RETRY_MS = 5_000;
/** A connection that stays up this long is healthy, whether or not the registry could be read on it. */
const HEALTHY_CONNECTION_MS = 10_000;

export interface ZookeeperRegistryWatcherOptions {
  /** Connection string: `host:port[,host:port...]`. */
  readonly servers: string;
  /** Registry root without a trailing slash, e.g. `/dubbo`; '' for the server's root. */
  readonly root: string;
  readonly sessionTimeoutMs: number;
  /**
   * How long a connection may leave a request unanswered before the client is replaced by a new
   * session. The client library never times out a silent connection (a peer that vanished without
   * closing it); the server has expired the session long before this. Default: 3 × the session
   * timeout, at least 10 s.
   */
  readonly deadConnectionMs?: number;
  /**
   * How long the client may stay without a connection before it is replaced by a new client that
   * resumes the same session. The client library times out the TCP connect but not ZooKeeper's
   * handshake after it, so a server that accepts a connection and never answers it (seen while
   * ZooKeeper starts) would hold it forever. Default: the session timeout, within 3–10 s.
   */
  readonly handshakeTimeoutMs?: number;
  /**
   * How long a connection must stay up to prove healthy: until then, each dial after a lost
   * connection waits a growing backoff (see {@link RedialPacer}). Default 10 s.
   */
  readonly healthyConnectionMs?: number;
  /** `user:password` for the digest scheme; read again for every new session, so rotation works. */
  readonly digest?: () => Promise<string>;
  /** Interfaces it rejects are never read nor watched. */
  readonly acceptInterface: (name: string) => boolean;
  readonly log: Logger;
  /** Times handshakes, liveness probes and retries; default the wall clock. */
  readonly clock?: SourceClock | undefined;
}

/** What the watcher reports. Called synchronously; must not throw. */
export interface ZookeeperRegistryWatcherEvents {
  /** Provider lists or read errors changed. During a sync, more changes follow before `synced`. */
  changed(): void;
  /** Every provider list was read on the current connection: the view is complete and current. */
  synced(): void;
  /** The view may be out of date (connection lost, session expired, root unreadable); it is kept. */
  unavailable(error: MeshmuxError): void;
  /** A new ZooKeeper session was established (the first, or one replacing an expired one). */
  session?(sessionId: string): void;
}

/** A session a replacement client takes over. */
interface ResumedSession {
  readonly id: Buffer;
  readonly password: Buffer;
}

let library: typeof ZooKeeperClient | undefined;

/** The ZooKeeper client library, loaded by the first watcher that connects: a process without a ZooKeeper source never loads it. */
function zookeeperClient(): typeof ZooKeeperClient {
  if (library === undefined) {
    const require = createRequire(import.meta.url);
    library = require('node-zookeeper-client') as typeof ZooKeeperClient;
    guardAnswers(
      library,
      require('node-zookeeper-client/lib/ConnectionManager.js') as ConnectionManagerModule,
    );
  }
  return library;
}

/**
 * Error codes of ZooKeeper servers newer than the client library, which knows those down to -115.
 * A server that enforces authentication answers every request of a client without it with -124.
 */
const NEWER_CODES: ReadonlyMap<number, string> = new Map([
  [-13, 'NEW_CONFIG_NO_QUORUM'],
  [-14, 'RECONFIG_IN_PROGRESS'],
  [-120, 'EPHEMERAL_ON_LOCAL_SESSION'],
  [-121, 'NO_WATCHER'],
  [-122, 'REQUEST_TIMEOUT'],
  [-123, 'RECONFIG_DISABLED'],
  [-124, 'SESSION_CLOSED_REQUIRE_SASL_AUTH'],
  [-125, 'QUOTA_EXCEEDED'],
  [-127, 'THROTTLED_OP'],
]);

interface ConnectionManagerModule {
  prototype: {
    onSocketData: (this: ConnectionManager, buffer: Buffer) => void;
  };
}

/** What {@link guardAnswers} touches of the library's connection to a server. */
interface ConnectionManager {
  socket?: { destroy(): void };
  pendingBuffer: unknown;
  refusal?: Error | undefined;
}

/** What the watcher touches of a client's connection to a server: every dial goes through `connect`. */
interface DialingConnection {
  socket?: unknown;
  connect(): void;
  /**
   * The last answer with a code the library does not know, set by {@link guardAnswers}. A server
   * enforcing authentication refuses the first request of a resumed session, the watches set
   * again, whose answer nobody waits for, and closes the connection: only this says why.
   */
  refusal?: Error | undefined;
}

/** The library's connection of `client`, which it does not type. */
function connectionOf(client: Client): DialingConnection {
  return (client as unknown as { connectionManager: DialingConnection }).connectionManager;
}

/** The connection whose answers are being read, for {@link guardAnswers}. */
let answering: ConnectionManager | undefined;

/**
 * Makes what a server answers unable to throw out of the library. It throws, from the socket's data
 * handler and so out of the process, on an error code it does not know (a real ZooKeeper 3.8 that
 * enforces authentication stopped meshmux at its first request) and on bytes it cannot parse (a
 * port that is not ZooKeeper's). Now an unknown code reaches the request's callback as an error
 * naming it (kept as the connection's `refusal` too), and bytes that cannot be parsed drop the
 * connection, which is dialled again when the watcher's pacer lets it.
 */
function guardAnswers(lib: typeof ZooKeeperClient, connections: ConnectionManagerModule): void {
  const exceptions = lib.Exception as unknown as {
    create: (this: void, code: number, path?: string) => ZooKeeperClient.Exception;
    readonly SYSTEM_ERROR: number;
  };
  const create = exceptions.create;
  exceptions.create = (code: number, path?: string) => {
    try {
      return create(code, path);
    } catch {
      // A code it does not know: an error of the library's kind all the same, named by the code.
      const error = create(exceptions.SYSTEM_ERROR, path) as ZooKeeperClient.Exception & {
        code: number;
        name: string;
        message: string;
      };
      error.code = code;
      error.name = NEWER_CODES.get(code) ?? `UNKNOWN_${code}`;
      error.message = `Exception: ${error.name}[${code}]${path === undefined ? '' : `@${path}`}`;
      if (answering !== undefined) answering.refusal = error;
      return error;
    }
  };
  const onSocketData = connections.prototype.onSocketData;
  connections.prototype.onSocketData = function (this: ConnectionManager, buffer: Buffer): void {
    readAnswers(this, () => {
      try {
        onSocketData.call(this, buffer);
      } catch {
        this.pendingBuffer = null;
        this.socket?.destroy();
      }
    });
  };
}

/**
 * Runs `read` with `connection` as the one whose answers are read. Answers are read synchronously
 * (a frame after another, recursively): `create` in {@link guardAnswers} is called while the
 * connection it reads for is the innermost one set.
 */
function readAnswers(connection: ConnectionManager, read: () => void): void {
  const outer = answering;
  answering = connection;
  try {
    read();
  } finally {
    answering = outer;
  }
}

interface SyncRound {
  pending: number;
  failure?: MeshmuxError;
}

/** The library's error code of `err`; undefined for any other error. */
function zookeeperCode(err: unknown): number | undefined {
  return library !== undefined && err instanceof library.Exception ? err.getCode() : undefined;
}

function isConnectionProblem(err: unknown): boolean {
  const code = zookeeperCode(err);
  return (
    code !== undefined &&
    (code === library?.Exception.CONNECTION_LOSS || code === library?.Exception.SESSION_EXPIRED)
  );
}

function isNoNode(err: unknown): boolean {
  const code = zookeeperCode(err);
  return code !== undefined && code === library?.Exception.NO_NODE;
}

/**
 * Mirrors `<root>/<interface>/providers` children from ZooKeeper, driven by watches: one child
 * watch on the root and one per interface's `providers` node (an existence watch while a node
 * is missing). Nothing is polled.
 *
 * On every (re)connection it reads the whole registry again (a sync), because reads that failed
 * while disconnected left no watch behind; `synced` is reported when that read is complete.
 * When the session expires it opens a new one and syncs. Throughout, the last view is kept:
 * only a completed read of the root removes interfaces. Every dial, the library's own included,
 * waits for a {@link RedialPacer}: a server that keeps closing connections before they prove
 * healthy (10 s up; a complete read is not enough) is dialled less and less often, said once in the log, and
 * the source's status names why when a refused request says so.
 *
 * Owns one ZooKeeper client at a time; `stop` closes it. Not restartable.
 */
export class ZookeeperRegistryWatcher {
  private client: Client | undefined;
  /** Bumped for every client: callbacks of an older client are ignored. */
  private generation = 0;
  private stopped = false;
  private round: SyncRound | undefined;
  /** What a read of the root last failed with, said once until a read succeeds or it changes. */
  private rootError: string | undefined;
  private retryDelayMs = RETRY_MIN_MS;
  /** Clients replaced since the last connection for want of one. */
  private redials = 0;
  /** Cancels of the pending retries. */
  private readonly timers = new Set<() => void>();
  /** Interfaces seen in the root's last listing. */
  private readonly tracked = new Set<string>();
  private readonly lists = new Map<string, readonly string[]>();
  private readonly pathErrors = new Map<string, MeshmuxError>();
  private readonly watchers = new Map<string, () => void>();
  /** The pending retry of each interface whose providers could not be read: one per interface. */
  private readonly pathRetries = new Map<string, () => void>();
  private readonly rootWatcher = (): void => this.readRoot();
  private cancelProbe: (() => void) | undefined;
  /** Cancels the pending retry of a sync round that failed: one at a time. */
  private cancelRoundRetry: (() => void) | undefined;
  /** Cancels the current client's dial waiting for the pacer. */
  private cancelDial: (() => void) | undefined;
  private readonly clock: SourceClock;
  /** Paces every dial of every client: see {@link RedialPacer}. */
  private readonly pacer: RedialPacer;
  /**
   * What a read failed with since the connection was last healthy. A connection the server closes
   * right after refusing a read (one that enforces authentication) is reported failing for that
   * reason, not as a lost connection: the reason stays on the source's status, said once.
   */
  private connectionFailure: MeshmuxError | undefined;
  /**
   * The reason logged for the current run of connections that dropped before proving healthy;
   * undefined while none was.
   */
  private outageLogged: string | undefined;

  constructor(
    private readonly options: ZookeeperRegistryWatcherOptions,
    private readonly events: ZookeeperRegistryWatcherEvents,
  ) {
    this.clock = options.clock ?? SYSTEM_CLOCK;
    this.pacer = new RedialPacer(this.clock);
  }

  /** Provider znode names per interface, sorted. Must not be altered; changes after `changed`. */
  get providers(): ReadonlyMap<string, readonly string[]> {
    return this.lists;
  }

  /** Paths that could not be read (their last good list is kept). */
  get readErrors(): readonly MeshmuxError[] {
    return [...this.pathErrors.values()];
  }

  /** True while a full read of the registry is under way: the view may be incomplete. */
  get syncing(): boolean {
    return this.round !== undefined;
  }

  start(): void {
    this.openSession();
  }

  stop(): void {
    this.stopped = true;
    this.generation++;
    for (const cancel of this.timers) cancel();
    this.timers.clear();
    this.cancelProbe?.();
    this.closeClient();
  }

  /**
   * Closes the current client. One whose dial still waits for the pacer has no socket, and the
   * library's `close` would write to it: such a client is dropped (it never dials, see openSession).
   */
  private closeClient(): void {
    this.cancelDial?.();
    this.cancelDial = undefined;
    const client = this.client;
    this.client = undefined;
    if (client !== undefined && connectionOf(client).socket !== undefined) client.close();
  }

  /** Opens a new session, or with `resume` a new client on an existing one. */
  private openSession(resume?: ResumedSession): void {
    if (this.stopped) return;
    const generation = ++this.generation;
    this.cancelProbe?.();
    this.closeClient();
    this.round = undefined;
    this.cancelRoundRetry?.();
    // The new session's sync reads every interface again.
    for (const cancel of this.pathRetries.values()) cancel();
    this.pathRetries.clear();
    const { servers, sessionTimeoutMs, log } = this.options;
    const clientOptions: Partial<Option> & { sessionId?: Buffer; sessionPassword?: Buffer } = {
      sessionTimeout: sessionTimeoutMs,
      retries: 0,
      // Every dial waits for the pacer instead, which knows whether the last connection was healthy.
      spinDelay: 0,
      ...(resume === undefined ? {} : { sessionId: resume.id, sessionPassword: resume.password }),
    };
    const client = zookeeperClient().createClient(servers, clientOptions);
    let established = resume !== undefined;
    const current = (): boolean => !this.stopped && generation === this.generation;
    this.cancelProbe = this.probeLiveness(client, current);
    const handshakeMs =
      this.options.handshakeTimeoutMs ?? Math.min(Math.max(sessionTimeoutMs, 3_000), 10_000);
    let cancelHandshake: (() => void) | undefined;
    let cancelHealthy: (() => void) | undefined;
    let connected = false;
    // Timed from the first dial without a connection, through the pacer's waits and the library's
    // redials: a client that keeps failing its handshake (one whose last seen zxid is ahead of
    // the server's, which refuses it) is replaced by a new one on the same session.
    const awaitConnection = (): void => {
      if (cancelHandshake !== undefined) return;
      cancelHandshake = this.clock.after(handshakeMs, () => {
        cancelHandshake = undefined;
        if (!current() || connected) return;
        const id = client.getSessionId();
        const known = id.some((b) => b !== 0);
        // Once per outage at warn level: while ZooKeeper stays away this repeats every period.
        const level = this.redials++ === 0 ? 'warn' : 'debug';
        log[level](
          { waitedMs: handshakeMs, resume: known },
          'no ZooKeeper connection completed in time; dialling again with a new client',
        );
        this.openSession(known ? { id, password: client.getSessionPassword() } : undefined);
      });
    };
    // Every dial of this client, the library's own after a closed connection included, waits for
    // the pacer; a client replaced meanwhile dials no more.
    const connection = connectionOf(client);
    const dial = connection.connect.bind(connection);
    connection.connect = () => {
      this.cancelDial?.();
      this.cancelDial = undefined;
      if (!current()) return;
      this.cancelDial = this.pacer.schedule(() => {
        if (!current()) return;
        awaitConnection();
        dial();
      });
    };
    client.on('state', (state) => {
      if (current()) log.debug({ state: String(state) }, 'ZooKeeper client state');
    });
    const stopHandshake = (): void => {
      cancelHandshake?.();
      cancelHandshake = undefined;
    };
    client.on('connected', () => {
      stopHandshake();
      connected = true;
      if (!current()) return;
      this.retryDelayMs = RETRY_MIN_MS;
      this.redials = 0;
      cancelHealthy?.();
      cancelHealthy = this.later(this.options.healthyConnectionMs ?? HEALTHY_CONNECTION_MS, () => {
        if (current() && connected) this.connectionHealthy();
      });
      const sessionId = client.getSessionId().toString('hex');
      // Within a run of connections the server keeps closing, each is said at debug level only.
      const level = this.outageLogged !== undefined ? 'debug' : 'info';
      if (!established || (resume !== undefined && !client.getSessionId().equals(resume.id))) {
        established = true;
        log[level]({ sessionId, timeoutMs: client.getSessionTimeout() }, 'ZooKeeper session established');
        this.events.session?.(sessionId);
      } else {
        log[level]({ sessionId }, 'reconnected to ZooKeeper; reading the registry again');
      }
      resume = undefined;
      this.startRound();
    });
    client.on('disconnected', () => {
      connected = false;
      cancelHealthy?.();
      if (!current()) return;
      this.round = undefined;
      this.cancelRoundRetry?.();
      const refusal = connection.refusal;
      connection.refusal = undefined;
      if (refusal !== undefined)
        this.connectionFailure ??= toMeshmuxError(refusal, 'UNAVAILABLE', { file: servers });
      this.events.unavailable(this.connectionLost());
    });
    client.on('expired', () => {
      if (!current()) return;
      log[this.outageLogged !== undefined ? 'debug' : 'warn']('ZooKeeper session expired; opening a new one');
      this.events.unavailable(
        new MeshmuxError('UNAVAILABLE', 'the ZooKeeper session expired; opening a new one', {
          file: servers,
        }),
      );
      this.openSession();
    });
    client.on('authenticationFailed', () => {
      stopHandshake();
      if (!current()) return;
      this.events.unavailable(
        new MeshmuxError('PERMISSION_DENIED', 'ZooKeeper rejected the credentials', { file: servers }),
      );
      this.retrySession();
    });
    this.client = client;
    this.later(sessionTimeoutMs, () => {
      if (current() && !established) {
        this.events.unavailable(
          new MeshmuxError(
            'UNAVAILABLE',
            `cannot reach ZooKeeper within ${sessionTimeoutMs} ms; still trying`,
            {
              file: servers,
            },
          ),
        );
      }
    });
    const digest = this.options.digest;
    if (digest === undefined) {
      client.connect();
      return;
    }
    digest().then(
      (credentials) => {
        if (!current()) return;
        client.addAuthInfo('digest', Buffer.from(credentials));
        client.connect();
      },
      (err: unknown) => {
        stopHandshake();
        if (!current()) return;
        this.events.unavailable(toMeshmuxError(err, 'CONFIG', { file: servers }));
        this.retrySession();
      },
    );
  }

  /**
   * Logs a closed connection and returns why the view is out of date. A healthy connection lost
   * is said at once; a run of connections that drop before proving healthy is said once, again
   * when a read fails for another reason than the one said, and then only at 10, 100, 1000… dials.
   */
  private connectionLost(): MeshmuxError {
    const { log, servers } = this.options;
    const lost = new MeshmuxError('UNAVAILABLE', 'lost the connection to ZooKeeper; reconnecting', {
      file: servers,
    });
    const dials = this.pacer.attempts;
    if (dials === 0) {
      log.warn({ servers }, 'lost the connection to ZooKeeper');
      return lost;
    }
    const error = this.connectionFailure ?? lost;
    const reason = error.describe();
    const newReason = this.connectionFailure !== undefined && reason !== this.outageLogged;
    if (this.outageLogged === undefined || newReason) {
      this.outageLogged = reason;
      log.warn(
        { servers, error: reason },
        'ZooKeeper closed the connection before it proved healthy; dialling again with backoff',
      );
    } else if (/^10+$/.test(String(dials))) {
      log.warn(
        { servers, dials, error: reason },
        'still no healthy ZooKeeper connection; dialling again with backoff',
      );
    } else {
      log.debug({ servers, dials }, 'ZooKeeper closed the connection; dialling again with backoff');
    }
    return error;
  }

  /** The connection stayed up a while: the next dial goes at once. */
  private connectionHealthy(): void {
    const dials = this.pacer.healthy();
    this.connectionFailure = undefined;
    if (this.outageLogged === undefined) return;
    this.outageLogged = undefined;
    this.options.log.info({ dials }, 'ZooKeeper connection healthy again');
  }

  /**
   * Sends a cheap read every third of the session timeout while connected. A read unanswered for
   * the negotiated session timeout means the connection is silent although open: the view is reported stale
   * (and read again in full if the answer comes after all); unanswered for `deadConnectionMs`, the
   * client is replaced by a new session. Not a poll of the registry: changes still come by watches.
   */
  private probeLiveness(client: Client, current: () => boolean): () => void {
    const { sessionTimeoutMs, log, servers } = this.options;
    const deadMs = this.options.deadConnectionMs ?? Math.max(3 * sessionTimeoutMs, 10_000);
    const root = this.options.root === '' ? '/' : this.options.root;
    let connected = false;
    let sentAt: number | undefined;
    let silent = false;
    client.on('connected', () => (connected = true));
    client.on('disconnected', () => {
      connected = false;
      sentAt = undefined;
      silent = false;
    });
    const periodMs = Math.max(Math.floor(sessionTimeoutMs / 3), 100);
    let cancel: (() => void) | undefined;
    const arm = (): void => {
      cancel = this.clock.after(periodMs, () => {
        arm();
        probe();
      });
    };
    const probe = (): void => {
      if (!current() || !connected) return;
      const now = this.clock.now();
      if (sentAt === undefined) {
        const sent = (sentAt = now);
        client.exists(root, (err) => {
          if (!current() || sentAt !== sent || isConnectionProblem(err)) return;
          sentAt = undefined;
          if (!silent) return;
          silent = false;
          log.info('ZooKeeper answers again; reading the registry again');
          this.startRound();
        });
        return;
      }
      const waited = now - sentAt;
      if (waited > deadMs) {
        log.warn({ waitedMs: Math.round(waited) }, 'ZooKeeper connection is dead; opening a new session');
        this.openSession();
      } else if (waited > client.getSessionTimeout() && !silent) {
        silent = true;
        log.warn({ waitedMs: Math.round(waited) }, 'ZooKeeper does not answer');
        this.events.unavailable(
          new MeshmuxError('UNAVAILABLE', `ZooKeeper has not answered for ${Math.round(waited)} ms`, {
            file: servers,
          }),
        );
      }
    };
    arm();
    return () => cancel?.();
  }

  private retrySession(): void {
    const delay = this.retryDelayMs;
    this.retryDelayMs = Math.min(delay * 2, RETRY_MAX_MS);
    this.later(delay, () => this.openSession());
  }

  /** Calls `fn` after `ms` unless stopped first; returns the cancel function. */
  private later(ms: number, fn: () => void): () => void {
    const cancelTimer = this.clock.after(ms, () => {
      this.timers.delete(cancel);
      if (!this.stopped) fn();
    });
    const cancel = (): void => {
      this.timers.delete(cancel);
      cancelTimer();
    };
    this.timers.add(cancel);
    return cancel;
  }

  private startRound(): void {
    this.cancelRoundRetry?.();
    this.cancelRoundRetry = undefined;
    this.round = { pending: 0 };
    this.readRoot();
  }

  /**
   * Counts a read in the current sync round; the returned function ends it. The round completes
   * when its count returns to zero, which cannot happen early: a read starts its follow-up reads
   * before it ends.
   */
  private track(): () => void {
    const round = this.round;
    if (round !== undefined) round.pending++;
    return () => {
      if (round === undefined || round !== this.round) return;
      round.pending--;
      if (round.pending > 0) return;
      this.round = undefined;
      if (round.failure === undefined) {
        // Not proof of a healthy connection: a server may let a full read finish and then close
        // each connection, and redialling it at once reads the whole registry again in a loop.
        this.connectionFailure = undefined;
        this.events.synced();
        return;
      }
      this.connectionFailure = round.failure;
      this.events.unavailable(round.failure);
      const delay = this.retryDelayMs;
      this.retryDelayMs = Math.min(delay * 2, RETRY_MAX_MS);
      this.cancelRoundRetry?.();
      this.cancelRoundRetry = this.later(delay, () => this.startRound());
    };
  }

  /** Runs `read` with the current client, unless there is none. */
  private withClient(read: (client: Client, current: () => boolean) => void): void {
    const client = this.client;
    if (client === undefined || this.stopped) return;
    const generation = this.generation;
    read(client, () => !this.stopped && generation === this.generation);
  }

  private readRoot(): void {
    const root = this.options.root === '' ? '/' : this.options.root;
    this.withClient((client, current) => {
      const done = this.track();
      client.getChildren(root, this.rootWatcher, (err, children) => {
        if (!current() || isConnectionProblem(err)) return;
        if (isNoNode(err)) {
          // No registry yet: watch for its creation and serve nothing meanwhile.
          client.exists(root, this.rootWatcher, (err2, stat) => {
            if (!current() || isConnectionProblem(err2)) return;
            if (err2 !== null) this.failRoot(err2);
            else if (stat !== null && stat !== undefined) this.readRoot();
            else this.applyRoot([]);
            done();
          });
          return;
        }
        if (err !== null) this.failRoot(err);
        else {
          this.rootError = undefined;
          this.applyRoot(children);
        }
        done();
      });
    });
  }

  private failRoot(err: unknown): void {
    const error = toMeshmuxError(err, 'UNAVAILABLE', { file: this.options.root || '/' });
    // A server that refuses every request of this client (one enforcing authentication) closes
    // the session each time, and the library dials again at once: said once, not per dial.
    const described = error.describe();
    if (described !== this.rootError) {
      this.rootError = described;
      this.options.log.error({ error: described }, 'cannot read the registry root');
    }
    if (this.round !== undefined) {
      this.round.failure = error;
      return;
    }
    this.connectionFailure = error;
    this.events.unavailable(error);
    this.later(PATH_RETRY_MS, () => this.readRoot());
  }

  private applyRoot(children: readonly string[]): void {
    const atServerRoot = this.options.root === '';
    const names = new Set(
      children.filter(
        (n) =>
          !NOT_INTERFACES.has(n) &&
          !(atServerRoot && n === ZOOKEEPER_NODE) &&
          this.options.acceptInterface(n),
      ),
    );
    let changed = false;
    for (const iface of [...this.tracked]) {
      if (names.has(iface)) continue;
      this.tracked.delete(iface);
      this.watchers.delete(iface);
      this.cancelPathRetry(iface);
      changed = this.lists.delete(iface) || changed;
      changed = this.pathErrors.delete(this.providersPath(iface)) || changed;
    }
    const syncing = this.round !== undefined;
    for (const iface of [...names].sort()) {
      const known = this.tracked.has(iface);
      this.tracked.add(iface);
      if (syncing || !known) this.readProviders(iface);
    }
    if (changed) this.events.changed();
  }

  private watcherFor(iface: string): () => void {
    let watcher = this.watchers.get(iface);
    if (watcher === undefined) {
      // One function per interface: the client keeps one registration per function and path.
      watcher = () => {
        if (this.tracked.has(iface)) this.readProviders(iface);
      };
      this.watchers.set(iface, watcher);
    }
    return watcher;
  }

  private providersPath(iface: string): string {
    return `${this.options.root}/${iface}/providers`;
  }

  private readProviders(iface: string): void {
    const path = this.providersPath(iface);
    const watcher = this.watcherFor(iface);
    // This read replaces a pending retry: every sync round and watch reads each interface again, and
    // a retry kept alongside would start one more chain of reads for each of them.
    this.cancelPathRetry(iface);
    this.withClient((client, current) => {
      const done = this.track();
      client.getChildren(path, watcher, (err, children) => {
        if (!current() || isConnectionProblem(err)) return;
        if (!this.tracked.has(iface)) {
          done();
          return;
        }
        if (isNoNode(err)) {
          // An interface node without providers yet: wait for `providers` to appear.
          client.exists(path, watcher, (err2, stat) => {
            if (!current() || isConnectionProblem(err2)) return;
            if (err2 !== null) this.failPath(iface, err2);
            else if (stat !== null && stat !== undefined) this.readProviders(iface);
            else this.setProviders(iface, []);
            done();
          });
          return;
        }
        if (err !== null) this.failPath(iface, err);
        else this.setProviders(iface, children);
        done();
      });
    });
  }

  private failPath(iface: string, err: unknown): void {
    const path = this.providersPath(iface);
    const error = toMeshmuxError(err, 'UNAVAILABLE', { file: path });
    const before = this.pathErrors.get(path);
    this.pathErrors.set(path, error);
    if (before?.message !== error.message) {
      this.options.log.warn({ error: error.describe() }, 'cannot read providers; keeping the last list');
      this.events.changed();
    }
    this.cancelPathRetry(iface);
    this.pathRetries.set(
      iface,
      this.later(PATH_RETRY_MS, () => {
        this.pathRetries.delete(iface);
        if (this.tracked.has(iface)) this.readProviders(iface);
      }),
    );
  }

  private cancelPathRetry(iface: string): void {
    this.pathRetries.get(iface)?.();
    this.pathRetries.delete(iface);
  }

  private setProviders(iface: string, children: readonly string[]): void {
    const sorted = [...children].sort();
    const before = this.lists.get(iface);
    const hadError = this.pathErrors.delete(this.providersPath(iface));
    this.cancelPathRetry(iface);
    const same =
      before !== undefined && before.length === sorted.length && before.every((n, i) => n === sorted[i]);
    if (same && !hadError) return;
    if (!same) this.lists.set(iface, sorted);
    this.events.changed();
  }
}
