import { status } from '@grpc/grpc-js';
import type { IncomingHttpHeaders } from 'node:http';
import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type IncomingHttpStatusHeader,
} from 'node:http2';
import type { ConnectionOptions } from 'node:tls';
import { truncateForLog } from '../../core/truncate-for-log.js';
import { youngCollections, type YoungCollections } from '../../core/young-collections.js';
import { GrpcMessageReader, GrpcReadError, type MessageMatcher } from './grpc-message-reader.js';
import type { ReadPacer } from './read-pacer.js';

/** How a gRPC stream ended: its status code and message. */
export interface GrpcStatus {
  /** A code the upstream sent may lie outside gRPC's table; it is passed on as sent. */
  readonly code: status;
  readonly details: string;
}

export interface GrpcHttp2StreamOptions {
  /** `host:port` (`[v6]:port` for an IPv6 address). */
  readonly address: string;
  /** Full method path, `/package.Service/Method`. */
  readonly method: string;
  /** TLS of the connection; absent for plaintext h2c. */
  readonly tls?: ConnectionOptions | undefined;
  /** `:authority` when it is not the address dialed (the TLS server name). */
  readonly authority?: string | undefined;
  /** Largest message accepted, bytes: a larger one ends the stream with RESOURCE_EXHAUSTED. */
  readonly maxReceiveBytes: number;
  /** HTTP/2 receive window of the stream and of the connection, bytes. */
  readonly windowBytes: number;
  /** A PING every `timeMs`; one unanswered for `timeoutMs` ends the stream with UNAVAILABLE. */
  readonly keepalive: { readonly timeMs: number; readonly timeoutMs: number };
  /** Messages are lent (valid during `onMessage` only) instead of each given a buffer of its own. */
  readonly lendMessages: boolean;
  /** Told of every chunk read once it is let go (default: the process's own). */
  readonly youngCollections?: YoungCollections;
  /**
   * Most bytes of messages the upstream may leave unread (default {@link MAX_QUEUED_BYTES}): one
   * more ends the stream with RESOURCE_EXHAUSTED.
   */
  readonly maxQueuedBytes?: number | undefined;
  /**
   * Charged with the time each chunk's reading takes, the handling of the messages it completes
   * included; while it says to wait, the stream is not read (default: read as the bytes come).
   */
  readonly pacer?: ReadPacer | undefined;
}

export interface GrpcHttp2StreamHandlers {
  /** One message, synchronously; when lent, a view valid only during the call. */
  onMessage(message: Uint8Array): void;
  /**
   * A matcher for a lent message of `size` bytes the reader would need a new buffer for (see
   * {@link GrpcMessageReader}); a message it matches whole it hands on itself, in place of `onMessage`.
   */
  expectMessage?(size: number): MessageMatcher | undefined;
  /** The stream ended, once, with the status a gRPC client reports (after `cancel()`: never). */
  onEnd(end: GrpcStatus): void;
}

/**
 * How long a stream goes without a message before its reassembly buffer is let go. Not shorter:
 * the buffer has lived long enough to be in V8's old generation, where only a full collection
 * frees it, and V8 counts its size against the old generation's headroom until one runs. A stream
 * that let its 10 MB buffer go after each change and took a new one for the next started a
 * marking of the whole heap every few changes.
 */
const QUIET_MS = 10_000;

/**
 * The most bytes of requests an upstream may leave unread by default: 4 MiB. Requests are a few
 * hundred bytes each, and those that replace each other are kept only in their latest version
 * (see {@link GrpcHttp2Stream.write}); more queued than this is an upstream that stopped reading.
 */
export const MAX_QUEUED_BYTES = 4 * 1024 * 1024;

/** gRPC's mapping of HTTP statuses of a response that is not gRPC. */
const HTTP_STATUS_CODES: ReadonlyMap<number, status> = new Map([
  [400, status.INTERNAL],
  [401, status.UNAUTHENTICATED],
  [403, status.PERMISSION_DENIED],
  [404, status.UNIMPLEMENTED],
  [429, status.UNAVAILABLE],
  [502, status.UNAVAILABLE],
  [503, status.UNAVAILABLE],
  [504, status.UNAVAILABLE],
]);

/** What gRPC clients report for a stream reset without a status, by RST_STREAM code. */
function resetStatus(rstCode: number): status {
  switch (rstCode) {
    case constants.NGHTTP2_REFUSED_STREAM:
      return status.UNAVAILABLE;
    case constants.NGHTTP2_CANCEL:
      return status.CANCELLED;
    case constants.NGHTTP2_ENHANCE_YOUR_CALM:
      return status.RESOURCE_EXHAUSTED;
    case constants.NGHTTP2_INADEQUATE_SECURITY:
      return status.PERMISSION_DENIED;
    default:
      return status.INTERNAL;
  }
}

/**
 * `grpc-message` is percent-encoded; a malformed one is shown as sent. The upstream chooses it, and
 * it ends up in logs and on the status page: cut to {@link MAX_DETAILS_CHARS}.
 */
function decodeGrpcMessage(value: string | string[] | undefined): string {
  const text = Array.isArray(value) ? value.join(', ') : (value ?? '');
  let decoded = text;
  try {
    decoded = decodeURIComponent(text);
  } catch {
    // Shown as sent.
  }
  return truncateForLog(decoded, MAX_DETAILS_CHARS);
}

/** The longest status message of an upstream kept whole. */
const MAX_DETAILS_CHARS = 1024;

/**
 * One bidirectional gRPC stream on a connection of its own, spoken directly over `node:http2`
 * (h2c, or TLS with ALPN `h2`). gRPC's framing is read by a {@link GrpcMessageReader}, which copies
 * each DATA chunk into place as it arrives: a client library that holds the chunks of a message
 * until it is whole, then copies them into one buffer, costs a large response twice its size and
 * a full collection of the heap per response. Messages are sent uncompressed and only identity
 * encoding is accepted.
 *
 * Keepalive follows gRPC's: a PING every `keepalive.timeMs` while the stream is open, and a PING
 * unanswered within `keepalive.timeoutMs` ends it with UNAVAILABLE. The stream ends exactly once:
 * with the trailers' `grpc-status`, with the status an HTTP error or a reset maps to, or with
 * UNAVAILABLE when the connection fails.
 */
export class GrpcHttp2Stream {
  private readonly session: ClientHttp2Session;
  private readonly stream: ClientHttp2Stream;
  private readonly reader: GrpcMessageReader;
  private readonly collections: YoungCollections;
  private ended = false;
  /** The status the response's headers or trailers carried. */
  private received: GrpcStatus | undefined;
  /** Why the connection failed, when it did. */
  private connectionError: string | undefined;
  private connected = false;
  private keepaliveTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  /** Frees the reader's reassembly buffer once no message has come for a while. */
  private readonly quiet: NodeJS.Timeout;
  private readonly maxQueuedBytes: number;
  /**
   * Framed messages written while the HTTP/2 stream holds more than its high-water mark, in order,
   * under their keys (an unkeyed message under a key of its own), until it drains.
   */
  private readonly waiting = new Map<string | symbol, Buffer>();
  private waitingBytes = 0;
  /** The HTTP/2 stream refused more (`write()` returned false) and has not drained since. */
  private blocked = false;
  private readonly pacer: ReadPacer | undefined;
  /** While reading waits for the pacer: cancels the resumption. */
  private cancelResume: (() => void) | undefined;

  constructor(
    options: GrpcHttp2StreamOptions,
    private readonly handlers: GrpcHttp2StreamHandlers,
  ) {
    this.reader = new GrpcMessageReader(options.maxReceiveBytes, options.lendMessages, (size) =>
      this.handlers.expectMessage?.(size),
    );
    this.collections = options.youngCollections ?? youngCollections();
    this.maxQueuedBytes = options.maxQueuedBytes ?? MAX_QUEUED_BYTES;
    this.pacer = options.pacer;
    // Reused while responses keep coming (a change allocates nothing of their size), let go after
    // a quiet while: at rest a stream holds no copy of its largest response.
    this.quiet = setTimeout(() => this.reader.release(), QUIET_MS);
    this.quiet.unref();
    const scheme = options.tls === undefined ? 'http' : 'https';
    this.session = connect(`${scheme}://${options.address}`, {
      ...(options.tls ?? {}),
      settings: { initialWindowSize: options.windowBytes, enablePush: false },
    });
    this.session.on('error', (err: Error) => {
      this.connectionError = err.message;
      this.end({ code: status.UNAVAILABLE, details: err.message });
    });
    this.session.on('goaway', (code: number) => {
      this.connectionError = `the upstream closed the connection (GOAWAY code ${code})`;
    });
    this.session.once('connect', () => {
      // Announced a tick after the fact: the stream may have been cancelled in between.
      if (this.ended || this.session.destroyed) return;
      this.connected = true;
      this.session.setLocalWindowSize(options.windowBytes);
      this.keepalive(options.keepalive);
    });
    this.session.once('close', () => {
      this.end({ code: status.UNAVAILABLE, details: this.connectionError ?? 'the connection closed' });
    });
    this.stream = this.session.request({
      ':method': 'POST',
      ':path': options.method,
      ...(options.authority === undefined ? {} : { ':authority': options.authority }),
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-accept-encoding': 'identity',
    });
    this.stream.on('error', () => undefined);
    this.stream.on('response', (headers: IncomingHttpHeaders & IncomingHttpStatusHeader) =>
      this.onHeaders(headers),
    );
    this.stream.on('trailers', (headers: IncomingHttpHeaders) => this.onTrailers(headers));
    this.stream.on('data', (chunk: Buffer) => this.onData(chunk));
    this.stream.on('drain', () => this.flush());
    // The upstream ended its side (after trailers, or a headers-only response): the stream is over
    // even while meshmux's side is open, as for any gRPC client.
    this.stream.on('end', () => this.onClose());
    this.stream.on('close', () => this.onClose());
  }

  /**
   * Sends one message. While the upstream does not take what was sent (its window is shut), later
   * messages wait, and one written under a `key` replaces the one still waiting under the same key
   * (an ACK superseded by the next of its type URL): an upstream that does not read costs at most
   * the latest message of each key. Past `maxQueuedBytes` waiting, the stream ends with
   * RESOURCE_EXHAUSTED.
   */
  write(message: Uint8Array, key?: string): void {
    if (this.ended) return;
    const frame = Buffer.allocUnsafe(5 + message.byteLength);
    frame[0] = 0;
    frame.writeUInt32BE(message.byteLength, 1);
    frame.set(message, 5);
    if (!this.blocked) {
      this.blocked = !this.stream.write(frame);
      return;
    }
    const slot = key ?? Symbol();
    const replaced = this.waiting.get(slot);
    if (replaced !== undefined) {
      this.waiting.delete(slot);
      this.waitingBytes -= replaced.byteLength;
    }
    this.waiting.set(slot, frame);
    this.waitingBytes += frame.byteLength;
    const queued = this.queuedBytes;
    if (queued > this.maxQueuedBytes) {
      this.fail({
        code: status.RESOURCE_EXHAUSTED,
        details: `the upstream left ${queued} bytes of requests unread, more than ${this.maxQueuedBytes}`,
      });
    }
  }

  /** Bytes of messages written and not yet taken by the upstream: waiting, or in the HTTP/2 stream. */
  get queuedBytes(): number {
    return this.waitingBytes + this.stream.writableLength;
  }

  /** See {@link GrpcMessageReader.adopt}: valid during `onMessage` of a lent message only. */
  adoptMessage(): Buffer | undefined {
    return this.reader.adopt();
  }

  /** Ends the stream and its connection without reporting an end. Idempotent. */
  cancel(): void {
    this.ended = true;
    this.close();
  }

  /**
   * Ends the stream and its connection without reporting an end, once what was written (a NACK
   * saying why) has gone out: the connection is closed gracefully then, or at once after
   * `lingerMs` when the upstream does not take the bytes.
   */
  finish(lingerMs = 1_000): void {
    if (this.ended) return;
    this.ended = true;
    const force = setTimeout(() => this.close(), lingerMs);
    force.unref();
    this.stream.end(() => {
      clearTimeout(force);
      this.close(true);
    });
  }

  /** The HTTP/2 stream drained: writes the waiting messages, in order, until it refuses more. */
  private flush(): void {
    this.blocked = false;
    for (const [slot, frame] of this.waiting) {
      if (this.ended || this.blocked) return;
      this.waiting.delete(slot);
      this.waitingBytes -= frame.byteLength;
      this.blocked = !this.stream.write(frame);
    }
  }

  private onHeaders(headers: IncomingHttpHeaders & IncomingHttpStatusHeader): void {
    const httpStatus = headers[':status'] ?? 0;
    if (httpStatus !== 200) {
      const code = HTTP_STATUS_CODES.get(httpStatus) ?? status.UNKNOWN;
      this.fail({ code, details: `the upstream answered with HTTP status ${httpStatus}` });
      return;
    }
    const contentType = headers['content-type'] ?? '';
    if (!contentType.startsWith('application/grpc')) {
      this.fail({
        code: status.UNKNOWN,
        details: `the upstream answered with content-type "${contentType.slice(0, 100)}", not gRPC`,
      });
      return;
    }
    // A response without messages may carry its status in its only headers.
    if (headers['grpc-status'] !== undefined) this.onTrailers(headers);
  }

  private onTrailers(headers: IncomingHttpHeaders): void {
    const value = Number(headers['grpc-status']);
    this.received = Number.isInteger(value)
      ? { code: value as status, details: decodeGrpcMessage(headers['grpc-message']) }
      : { code: status.UNKNOWN, details: 'the upstream ended the stream without a valid grpc-status' };
  }

  private onData(chunk: Buffer): void {
    if (this.ended) return;
    const pacer = this.pacer;
    if (pacer === undefined) {
      this.read(chunk);
      return;
    }
    pacer.run(() => this.read(chunk));
    if (this.ended || this.cancelResume !== undefined) return;
    // Past its share: the next bytes stay in the flow-control window (the upstream can send at
    // most the window more) until the others had their turn.
    this.cancelResume = pacer.hold(() => {
      this.cancelResume = undefined;
      if (!this.ended) this.stream.resume();
    });
    if (this.cancelResume !== undefined) this.stream.pause();
  }

  private read(chunk: Buffer): void {
    try {
      this.reader.push(
        chunk,
        (message) => {
          if (!this.ended) this.handlers.onMessage(message);
        },
        (matcher) => {
          if (!this.ended) matcher.deliver();
        },
      );
      this.quiet.refresh();
      // The reader copied what it keeps: the chunk's memory is garbage from here on.
      this.collections.received(chunk.byteLength, !this.reader.midMessage);
    } catch (err) {
      if (!(err instanceof GrpcReadError)) throw err;
      this.fail({ code: status[err.status], details: err.message });
    }
  }

  private onClose(): void {
    const received = this.received;
    if (received !== undefined) {
      if (received.code === status.OK && this.reader.midMessage) {
        this.end({ code: status.INTERNAL, details: 'the stream ended in the middle of a message' });
      } else {
        this.end(received);
      }
      return;
    }
    // A stream closed by its connection failing: the connection's error or close ends it, with
    // the reason (the stream's own reset code says nothing of it).
    if (!this.connected || this.session.destroyed || this.session.closed) return;
    const rstCode = this.stream.rstCode ?? constants.NGHTTP2_NO_ERROR;
    if (this.connectionError !== undefined || rstCode === constants.NGHTTP2_NO_ERROR) {
      this.end({
        code: status.UNAVAILABLE,
        details: this.connectionError ?? 'the stream ended without a status',
      });
      return;
    }
    this.end({
      code: resetStatus(rstCode),
      details: `the upstream reset the stream (RST_STREAM code ${rstCode})`,
    });
  }

  private keepalive({ timeMs, timeoutMs }: { readonly timeMs: number; readonly timeoutMs: number }): void {
    if (this.ended) return;
    this.keepaliveTimer = setInterval(() => {
      if (this.pingTimer !== undefined) return;
      this.pingTimer = setTimeout(() => {
        this.connectionError = `a keepalive PING went unanswered for ${timeoutMs} ms`;
        this.fail({ code: status.UNAVAILABLE, details: this.connectionError });
      }, timeoutMs);
      this.pingTimer.unref();
      const sent = this.session.ping(() => {
        clearTimeout(this.pingTimer);
        this.pingTimer = undefined;
      });
      if (!sent) {
        clearTimeout(this.pingTimer);
        this.pingTimer = undefined;
      }
    }, timeMs);
    this.keepaliveTimer.unref();
  }

  /** Ends the stream with `end` and closes the connection. */
  private fail(end: GrpcStatus): void {
    this.end(end);
    this.close();
  }

  private end(end: GrpcStatus): void {
    if (this.ended) return;
    this.ended = true;
    this.close();
    this.handlers.onEnd(end);
  }

  /** `gracefully`: the connection sends what it holds before it closes. */
  private close(gracefully = false): void {
    this.cancelResume?.();
    this.cancelResume = undefined;
    this.waiting.clear();
    this.waitingBytes = 0;
    clearTimeout(this.quiet);
    clearInterval(this.keepaliveTimer);
    clearTimeout(this.pingTimer);
    this.keepaliveTimer = undefined;
    this.pingTimer = undefined;
    if (!this.stream.closed) this.stream.close(constants.NGHTTP2_CANCEL);
    if (this.session.destroyed) return;
    if (gracefully) this.session.close();
    else this.session.destroy();
  }
}
