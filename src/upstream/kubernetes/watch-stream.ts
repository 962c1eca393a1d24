import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { MeshmuxError } from '../../core/errors.js';
import type { SourceClock } from '../runtime/source-clock.js';

/** What a watch is opened with; see {@link openWatch}. */
export interface WatchRequest {
  readonly config: KubeConfig;
  /** The collection's URL, without the query. */
  readonly url: string;
  readonly query: Readonly<Record<string, string>>;
  /** The longest event line read, bytes; a longer one ends the watch with a `LIMIT` error. */
  readonly maxLineBytes: number;
  /**
   * How long the answer may bring no byte at all before the watch ends as if the server had ended
   * it (a connection frozen on the way, which neither side sees close).
   */
  readonly idleMs: number;
  /** The longest the watch stays open, however its bytes come. */
  readonly lifetimeMs: number;
  /** The source's clock, for the idle deadline and the lifetime. */
  readonly clock: SourceClock;
  /** Each event, in order: its `type` and its `object` as JSON. Never called after `onEnd`. */
  readonly onEvent: (type: string, object: unknown) => void;
  /**
   * Called once when the watch ends, unless it was aborted: `null` when it ended cleanly (the
   * server ended it, or it went idle, then `idle` is true, or outlived its lifetime), else why;
   * an HTTP status other than 200 comes as an error carrying `statusCode`.
   */
  readonly onEnd: (err: (Error & { statusCode?: number }) | null, idle?: boolean) => void;
}

/** An open watch: `abort()` closes it, and `onEnd` is not called for it after that. */
export interface WatchHandle {
  abort(): void;
}

/**
 * Opens a watch with the kubeconfig's credentials and trust, as the lists are read, and splits its
 * answer into lines here: the client library's reader holds a line whole however long it grows,
 * so an answer of one endless line (a broken proxy, a hostile server) grew until the process ran
 * out of string length and died. A line longer than `maxLineBytes` ends the watch instead.
 * Resolves once the response headers came (whatever the status), rejects when the request failed
 * before; the caller bounds the wait for the headers.
 */
export async function openWatch(request: WatchRequest): Promise<WatchHandle> {
  const options: https.RequestOptions = { method: 'GET', headers: { accept: 'application/json' } };
  await request.config.applyToHTTPSOptions(options);
  const target = new URL(request.url);
  target.searchParams.set('watch', 'true');
  for (const [key, value] of Object.entries(request.query)) target.searchParams.set(key, value);
  const plain = target.protocol === 'http:';
  if (plain) delete options.agent;

  let ended = false;
  let headers = false;
  let cancelIdle: (() => void) | undefined;
  let cancelLifetime: (() => void) | undefined;
  const close = (): void => {
    ended = true;
    cancelIdle?.();
    cancelLifetime?.();
    req.destroy();
  };
  const end = (err: (Error & { statusCode?: number }) | null, idle = false): void => {
    if (ended) return;
    close();
    request.onEnd(err, idle);
  };
  const handle: WatchHandle = { abort: close };
  // Re-armed on every chunk: a timer per chunk would cost more than the chunk's bytes, so the
  // deadline is checked when it falls due against the time the last bytes came.
  let lastBytesAt = 0;
  const armIdle = (delayMs: number): void => {
    cancelIdle = request.clock.after(delayMs, () => {
      const quiet = request.clock.now() - lastBytesAt;
      if (quiet >= request.idleMs) end(null, true);
      else armIdle(request.idleMs - quiet);
    });
  };

  const req = (plain ? http : https).request(target, options);
  return new Promise<WatchHandle>((resolve, reject) => {
    req.on('error', (err: Error) => {
      if (ended) return;
      // Before the headers the caller hears it as a failure to open; after, as the end.
      if (!headers) {
        ended = true;
        reject(new Error(`GET ${target.toString()}: ${err.message}`));
      } else end(err);
    });
    req.on('response', (res) => {
      headers = true;
      resolve(handle);
      if (res.statusCode !== 200) {
        res.resume();
        const err: Error & { statusCode?: number } = new Error(
          `watch ${request.url}: HTTP ${res.statusCode ?? 0}`,
        );
        err.statusCode = res.statusCode ?? 0;
        end(err);
        return;
      }
      lastBytesAt = request.clock.now();
      armIdle(request.idleMs);
      cancelLifetime = request.clock.after(request.lifetimeMs, () => end(null));
      const lines = new LineSplitter(request.maxLineBytes);
      res.on('data', (chunk: Buffer) => {
        if (ended) return;
        lastBytesAt = request.clock.now();
        const complete = lines.push(chunk);
        if (complete === undefined) {
          end(
            new MeshmuxError(
              'LIMIT',
              `watch ${request.url}: an event longer than ${Math.round(request.maxLineBytes / 1024 / 1024)} MiB; not read`,
            ),
          );
          return;
        }
        for (const line of complete) {
          if (ended) return;
          let event: { type?: unknown; object?: unknown };
          try {
            event = JSON.parse(line) as { type?: unknown; object?: unknown };
          } catch {
            // A line that is not JSON carries no event (as the client library skipped it).
            continue;
          }
          if (typeof event.type === 'string') request.onEvent(event.type, event.object);
        }
      });
      res.on('error', (err) => end(err));
      res.on('end', () => end(null));
      res.on('close', () => end(null));
    });
    req.end();
  });
}

/**
 * Splits bytes into lines of at most `maxBytes` each (UTF-8 is decoded per whole line, so a
 * character split across chunks is read whole).
 */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** The lines `chunk` completes; undefined once the line under way is longer than allowed. */
  push(chunk: Buffer): string[] | undefined {
    const lines: string[] = [];
    let start = 0;
    for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, at);
      if (this.pendingBytes + piece.length > this.maxBytes) return undefined;
      const line =
        this.pending.length === 0
          ? piece
          : Buffer.concat([...this.pending, piece], this.pendingBytes + piece.length);
      this.pending = [];
      this.pendingBytes = 0;
      if (line.length > 0) lines.push(line.toString('utf8'));
      start = at + 1;
    }
    const rest = chunk.subarray(start);
    if (this.pendingBytes + rest.length > this.maxBytes) return undefined;
    if (rest.length > 0) {
      this.pending.push(rest);
      this.pendingBytes += rest.length;
    }
    return lines;
  }
}
