import type * as grpc from '@grpc/grpc-js';
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

/**
 * gRPC channel options of an upstream client, matching istiod's config-source client: keepalive
 * without pings on idle connections, 1 MiB windows. grpc-js's own
 * reconnect backoff does not matter: every stream attempt dials a fresh channel. The receive limit
 * is {@link DEFAULT_MAX_RECEIVE_BYTES} unless configured.
 */
export function channelOptionsOf(settings: DialSettings): grpc.ChannelOptions {
  return {
    'grpc.max_receive_message_length': settings.maxReceiveSize ?? DEFAULT_MAX_RECEIVE_BYTES,
    'grpc.max_send_message_length': -1,
    'grpc-node.flow_control_window': 1024 * 1024,
    'grpc.keepalive_time_ms': settings.keepalive?.time ?? 30_000,
    'grpc.keepalive_timeout_ms': settings.keepalive?.timeout ?? 10_000,
    'grpc.keepalive_permit_without_calls': 0,
    'grpc.enable_retries': 0,
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
