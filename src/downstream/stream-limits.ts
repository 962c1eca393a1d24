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
}

/** Which limit a client hit; a closed set, for metrics. */
export type LimitName =
  'send-timeout' | 'max-views' | 'types-per-stream' | 'node-id-length' | 'metadata-size' | 'type-url-length';

/**
 * Characters in a type URL a client subscribes to: each is kept while the stream lives (up to
 * `maxTypesPerStream` of them), and real ones are some 40 to 80 characters.
 */
export const MAX_TYPE_URL_CHARS = 512;

/** istiod asks for about 17 type URLs, with a node id of about 80 characters and a few hundred bytes of metadata. */
export const DEFAULT_STREAM_LIMITS: StreamLimits = Object.freeze({
  sendTimeoutMs: 30_000,
  stallAfterMs: 2_000,
  maxTypesPerStream: 100,
  maxNodeIdLength: 1024,
  maxMetadataBytes: 64 * 1024,
  maxRequestBytes: 4 * 1024 * 1024,
});

/** The stall threshold for a send timeout: 2 s, or the timeout itself when shorter. */
export function stallAfterFor(sendTimeoutMs: number): number {
  return Math.min(DEFAULT_STREAM_LIMITS.stallAfterMs, sendTimeoutMs);
}
