/** What one ADS stream may cost; set from `server:` in the configuration. */
export interface StreamLimits {
  /** How long a response may take to flush before the stream is closed with UNAVAILABLE. */
  readonly sendTimeoutMs: number;
  /**
   * How long a response may take to flush before its bytes stop counting against the global write
   * budget (the peer is stalled, and must delay only itself until the send deadline closes it).
   */
  readonly stallAfterMs: number;
  /** Distinct type URLs one stream may subscribe to. */
  readonly maxTypesPerStream: number;
  /** Characters in the node id. */
  readonly maxNodeIdLength: number;
  /** Bytes of the node metadata, as JSON. */
  readonly maxMetadataBytes: number;
  /** Bytes of one request message (set when the server is created). */
  readonly maxRequestBytes: number;
  /** How long a stream may stay open without a first request before it is closed with DEADLINE_EXCEEDED. */
  readonly firstRequestTimeoutMs: number;
  /** Streams one connection may have open at once; HTTP/2 refuses more (set when the server is created). */
  readonly maxStreamsPerConnection: number;
}

/** Which limit a client hit; a closed set, for metrics. */
export type LimitName =
  | 'send-timeout'
  | 'max-views'
  | 'types-per-stream'
  | 'node-id-length'
  | 'metadata-size'
  | 'type-url-length'
  | 'first-request-timeout';

/**
 * Characters in a type URL a client subscribes to: each is kept while the stream lives (up to
 * `maxTypesPerStream` of them), and real ones are some 40 to 80 characters.
 */
export const MAX_TYPE_URL_CHARS = 512;

/**
 * istiod asks for about 17 type URLs, with a node id of about 80 characters and a few hundred bytes
 * of metadata, in a first request it sends as soon as its stream opens, one stream per connection.
 */
export const DEFAULT_STREAM_LIMITS: StreamLimits = Object.freeze({
  sendTimeoutMs: 30_000,
  stallAfterMs: 2_000,
  maxTypesPerStream: 100,
  maxNodeIdLength: 1024,
  maxMetadataBytes: 64 * 1024,
  maxRequestBytes: 4 * 1024 * 1024,
  firstRequestTimeoutMs: 10_000,
  maxStreamsPerConnection: 100,
});

/**
 * Bytes node metadata of at most `maxMetadataBytes` as JSON may take encoded: a number in a list
 * takes 11 (a tag, a length, a tag and 8 bytes) against 2 in JSON (`0,`), the costliest ratio of
 * any value. A first request whose metadata takes more is refused before it is decoded: a Struct of
 * a few hundred thousand small fields fits in a request and takes seconds to decode and convert.
 */
export function maxEncodedMetadataBytes(maxMetadataBytes: number): number {
  return 6 * maxMetadataBytes;
}

/** The stall threshold for a send timeout: 2 s, or the timeout itself when shorter. */
export function stallAfterFor(sendTimeoutMs: number): number {
  return Math.min(DEFAULT_STREAM_LIMITS.stallAfterMs, sendTimeoutMs);
}
