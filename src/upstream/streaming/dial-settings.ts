import { DEFAULT_BACKOFF, type BackoffPolicy } from './exponential-backoff.js';
import type { TlsSettings } from './tls-credentials.js';

/**
 * The largest response accepted from an upstream unless configured: 64 MiB. istiod accepts up to
 * 2 GiB, but a response is held several times over while it is decoded, so an upstream (or a
 * bug in one) sending that much would exhaust the heap; real meshes' responses are far smaller.
 * A larger response ends the stream with RESOURCE_EXHAUSTED, reported on the source.
 */
export const DEFAULT_MAX_RECEIVE_BYTES = 64 * 1024 * 1024;

/** The default per-stream sync budget. */
export const DEFAULT_SYNC_TIMEOUT_MS = 10_000;

/**
 * How a streaming source dials its upstream, in the shape of its configuration (durations in
 * milliseconds). Every field is optional; the defaults are istiod's own (spec §1.2, §1.10).
 */
export interface DialSettings {
  /** Absent: plaintext h2c. */
  readonly tls?: TlsSettings | undefined;
  /** Keepalive ping interval (default 30 s) and how long a ping may go unanswered (default 10 s). */
  readonly keepalive?:
    { readonly time?: number | undefined; readonly timeout?: number | undefined } | undefined;
  /** Largest response accepted, bytes. Default 64 MiB: big meshes exceed gRPC's 4 MiB default. */
  readonly maxReceiveSize?: number | undefined;
  /** How long a (re)connected stream may take to answer every subscription. Default 10 s. */
  readonly syncTimeout?: number | undefined;
  /** Reconnect backoff bounds. Default 500 ms → 60 s (×1.5, ±50 % jitter). */
  readonly reconnect?:
    { readonly initialDelay?: number | undefined; readonly maxDelay?: number | undefined } | undefined;
}

/** How a stream's connection is run: limits, windows and keepalive. */
export interface StreamTransport {
  /** Largest message accepted, bytes. */
  readonly maxReceiveBytes: number;
  /** HTTP/2 receive window of the stream and the connection, bytes. */
  readonly windowBytes: number;
  readonly keepalive: { readonly timeMs: number; readonly timeoutMs: number };
}

/**
 * The transport of an upstream client, matching istiod's config-source client: 1 MiB windows,
 * a keepalive PING every 30 s answered within 10 s. The receive limit is
 * {@link DEFAULT_MAX_RECEIVE_BYTES} unless configured.
 */
export function transportOf(settings: DialSettings): StreamTransport {
  return {
    maxReceiveBytes: settings.maxReceiveSize ?? DEFAULT_MAX_RECEIVE_BYTES,
    windowBytes: 1024 * 1024,
    keepalive: {
      timeMs: settings.keepalive?.time ?? 30_000,
      timeoutMs: settings.keepalive?.timeout ?? 10_000,
    },
  };
}

/** The reconnect policy of a source. */
export function backoffOf(settings: DialSettings): BackoffPolicy {
  return {
    ...DEFAULT_BACKOFF,
    initialMs: settings.reconnect?.initialDelay ?? DEFAULT_BACKOFF.initialMs,
    maxMs: settings.reconnect?.maxDelay ?? DEFAULT_BACKOFF.maxMs,
  };
}
