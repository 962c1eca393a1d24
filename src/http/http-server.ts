import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LogLineBudget } from '../core/log-line-budget.js';
import type { Logger } from '../core/logger.js';
import { truncateForLog } from '../core/truncate-for-log.js';
import { redactSecrets } from '../core/secrets.js';
import type { ConfigSnapshot, SnapshotReader } from '../merge/config-snapshot.js';
import type { Refusal } from './admin-guard.js';
import { BodyBudget } from './body-budget.js';

/** A JSON-producing debug page. Returns the body to serialize, or a {@link StreamedJson}. */
export type DebugPage = (url: URL) => unknown;

/**
 * A page answer written part by part (each a piece of JSON text, in order), yielding to the event
 * loop between batches and waiting for the client to drain: a large answer never stalls serving.
 */
export class StreamedJson {
  constructor(readonly parts: Iterable<string>) {}
}

/** Parts written between two turns of the event loop. */
const STREAM_BATCH = 200;

/** The answer of a POST action: a status and a JSON body. */
export interface ActionResult {
  readonly status: number;
  readonly body: unknown;
}

/**
 * A POST endpoint: `pattern` is matched against the path; the handler gets the match, the raw
 * body (at most 1 MiB) and the request headers.
 */
export interface PostAction {
  readonly pattern: RegExp;
  /**
   * Decides before the body is read: an answer ends the request there (nothing to send it to,
   * or nothing there takes one), undefined reads the body and calls `handle`.
   */
  admit?(match: RegExpMatchArray): ActionResult | undefined;
  handle(
    match: RegExpMatchArray,
    body: Buffer,
    headers: IncomingMessage['headers'],
  ): ActionResult | Promise<ActionResult>;
}

const MAX_POST_BYTES = 1024 * 1024;
/** Bytes of POST bodies a listener holds at once, over every request; beyond, 503. */
const MAX_POST_BYTES_IN_FLIGHT = 8 * 1024 * 1024;
/** How long a client may take to send its headers, and its whole request. */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 15_000;
/** Connections a listener keeps open at once; more are closed as they come (file descriptors). */
const MAX_CONNECTIONS = 1_000;

export interface HttpServerOptions {
  readonly reader: SnapshotReader;
  readonly log: Logger;
  /** Prometheus exposition: content type and body. */
  readonly metrics: () => Promise<{ contentType: string; body: string }>;
  /** Extra JSON pages under `/debug/<name>`. */
  readonly debugPages: Readonly<Record<string, DebugPage>>;
  /** POST endpoints, tried in order. */
  readonly actions?: readonly PostAction[];
  /** The HTML status page served at `/`. */
  readonly statusPage?: () => string;
  /** Checks every request first (the admin listener's protections); a refusal is answered as JSON. */
  readonly guard?: { check(req: IncomingMessage, url: URL): Promise<Refusal | undefined> };
  /** A request was refused by the guard. */
  readonly onRefused?: (refusal: Refusal) => void;
  /** Names the listener in logs (`http`, `admin`). */
  readonly name?: string;
  /** Bytes of POST bodies held at once over every request. Default 8 MiB. */
  readonly maxPostBytesInFlight?: number;
  /** Wall clock in milliseconds, for the log budget. Default `Date.now`. */
  readonly now?: () => number;
}

/**
 * Health, readiness, metrics and debug pages. `/ready` answers 200 only once every source has
 * synced (or the startup budget passed), naming the sources still missing otherwise.
 */
export class HttpServer {
  private readonly server: Server;
  private readonly bodies: BodyBudget;
  /** Lines of failed requests (a client that went away mid-body among them), over every request. */
  private readonly failures: LogLineBudget;

  constructor(private readonly options: HttpServerOptions) {
    this.bodies = new BodyBudget(options.maxPostBytesInFlight ?? MAX_POST_BYTES_IN_FLIGHT);
    this.failures = new LogLineBudget(options.now ?? Date.now);
    this.server = createServer(
      {
        // A client that sends its request slowly, or never ends it, is cut off: it holds a
        // connection and what it sent, and the port is public.
        headersTimeout: HEADERS_TIMEOUT_MS,
        requestTimeout: REQUEST_TIMEOUT_MS,
        connectionsCheckingInterval: 1_000,
      },
      (req, res) => {
        this.handle(req, res).catch((err: unknown) => this.failed(req, res, err));
      },
    );
    this.server.maxConnections = MAX_CONNECTIONS;
  }

  private failed(req: IncomingMessage, res: ServerResponse, err: unknown): void {
    // A client that went away (or was cut off) mid-request is its own business: at debug.
    const gone = req.destroyed || res.destroyed;
    const { log, leftOut } = this.failures.allow();
    if (log) {
      const fields = { err: String(err), url: truncateForLog(req.url ?? ''), notLogged: leftOut };
      if (gone) this.options.log.debug(fields, 'HTTP request ended by the client');
      else this.options.log.error(fields, 'HTTP handler failed');
    }
    if (res.destroyed) return;
    if (!res.headersSent) send(res, 500, 'text/plain', 'internal error\n');
    else res.end();
  }

  /** Listens on `host:port` (port 0 picks one); resolves to the bound port. */
  async listen(address: string): Promise<number> {
    const { host, port } = splitHostPort(address);
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const bound = (this.server.address() as AddressInfo).port;
    this.options.log.info(
      { listener: this.options.name ?? 'http', address, port: bound },
      'HTTP server listening',
    );
    return bound;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://meshmux');
    const refusal = await this.options.guard?.check(req, url);
    if (refusal !== undefined) {
      this.options.onRefused?.(refusal);
      this.options.log.warn(
        {
          listener: this.options.name,
          path: url.pathname,
          reason: refusal.reason,
          peer: req.socket.remoteAddress,
        },
        'request refused',
      );
      sendJson(res, refusal.status, { error: refusal.error });
      return;
    }
    if (req.method === 'POST') {
      await this.post(url, req, res);
      return;
    }
    const snapshot = this.options.reader.current();
    switch (url.pathname) {
      case '/healthz':
        send(res, 200, 'text/plain', 'ok\n');
        return;
      case '/ready':
        sendJson(res, snapshot.ready ? 200 : 503, readiness(snapshot));
        return;
      case '/':
        if (this.options.statusPage === undefined) break;
        send(res, 200, 'text/html; charset=utf-8', this.options.statusPage());
        return;
      case '/metrics': {
        const { contentType, body } = await this.options.metrics();
        send(res, 200, contentType, body);
        return;
      }
      default:
        break;
    }
    const page = url.pathname.startsWith('/debug/')
      ? this.options.debugPages[url.pathname.slice('/debug/'.length)]
      : undefined;
    if (page === undefined) {
      send(res, 404, 'text/plain', `no page ${url.pathname}\n`);
      return;
    }
    const answer = page(url);
    if (answer instanceof StreamedJson) await streamJson(res, answer);
    else sendJson(res, 200, answer);
  }

  private async post(url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
    for (const action of this.options.actions ?? []) {
      const match = url.pathname.match(action.pattern);
      if (match === null) continue;
      // Whatever answers before the body is read closes the connection: the body is not read.
      const early = action.admit?.(match);
      if (early !== undefined) {
        sendJson(res, early.status, early.body, true);
        return;
      }
      const body = await this.readBody(req);
      if (body === 'too-large') {
        sendJson(res, 413, { error: `body larger than ${MAX_POST_BYTES} bytes` }, true);
        return;
      }
      if (body === 'busy') {
        sendJson(res, 503, { error: 'too many request bodies under way; try again later' }, true);
        return;
      }
      const result = await action.handle(match, body, req.headers);
      sendJson(res, result.status, result.body);
      return;
    }
    sendJson(res, 404, { error: `no POST endpoint ${url.pathname}` }, true);
  }

  /**
   * Reads a request body up to MAX_POST_BYTES, within the listener's budget of bytes held over
   * every request: 'too-large' beyond the first, 'busy' beyond the second.
   */
  private readBody(req: IncomingMessage): Promise<Buffer | 'too-large' | 'busy'> {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > MAX_POST_BYTES) return Promise.resolve('too-large');
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = (): void => {
        req.off('data', onData);
        req.off('end', onEnd);
        req.off('error', onError);
        req.off('close', onClose);
        this.bodies.release(size);
      };
      // Past a bound the rest is not read: the answer closes the connection.
      const refuse = (why: 'too-large' | 'busy'): void => {
        req.pause();
        finish();
        resolve(why);
      };
      const onData = (chunk: Buffer): void => {
        if (size + chunk.byteLength > MAX_POST_BYTES) return refuse('too-large');
        if (!this.bodies.take(chunk.byteLength)) return refuse('busy');
        size += chunk.byteLength;
        chunks.push(chunk);
      };
      const onEnd = (): void => {
        finish();
        resolve(Buffer.concat(chunks, size));
      };
      const onError = (err: Error): void => {
        finish();
        reject(err);
      };
      const onClose = (): void => onError(new Error('the request ended before its body'));
      req.on('data', onData);
      req.on('end', onEnd);
      req.on('error', onError);
      req.on('close', onClose);
    });
  }
}

function readiness(snapshot: ConfigSnapshot): unknown {
  return {
    ready: snapshot.ready,
    waitingFor: snapshot.waitingFor,
    // Kinds no istiod is answered for, by the source they wait on.
    missing: Object.fromEntries(
      snapshot.sources
        .filter((s) => snapshot.waitingFor.includes(s.name))
        .map((s) => [s.name, s.missingKinds]),
    ),
    syncTimeoutPassed: snapshot.budgetPassed,
    sources: snapshot.sources.map((s) => ({
      name: s.name,
      state: s.state,
      synced: s.everSynced,
      required: s.required,
      ...(s.restoredFrom === undefined ? {} : { restoredFrom: s.restoredFrom.toISOString() }),
    })),
  };
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
  // Pages show source settings and errors with text from outside (URLs with credentials).
  res.end(redactSecrets(body));
}

async function streamJson(res: ServerResponse, answer: StreamedJson): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  let batch = 0;
  for (const part of answer.parts) {
    if (res.destroyed) return;
    const flushed = res.write(redactSecrets(part));
    if (!flushed) await new Promise<void>((resolve) => res.once('drain', resolve));
    if (++batch === STREAM_BATCH) {
      batch = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  res.end();
}

/** `close`: the connection ends with the answer (a body left unread is not read). */
function sendJson(res: ServerResponse, status: number, body: unknown, close = false): void {
  if (close) res.setHeader('connection', 'close');
  send(res, status, 'application/json', `${JSON.stringify(body, null, 2)}\n`);
}

/** Splits `host:port` or `[v6]:port`. */
export function splitHostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i).replace(/^\[|\]$/g, '');
  return { host: host === '' ? '0.0.0.0' : host, port: Number(address.slice(i + 1)) };
}
