import { z } from 'zod';

const DURATION = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/;
const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** A Go-style duration (`500ms`, `2s`, `1m30s`) in milliseconds. */
export function durationMs(text: string): number {
  let total = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g))
    total += Number(m[1]) * (UNIT_MS[m[2] ?? ''] ?? 0);
  return total;
}

/** A Go-style duration string, parsed to milliseconds. */
export const Duration = z
  .string()
  .regex(DURATION, 'a duration such as 500ms, 2s or 1m30s')
  .transform(durationMs);

/** `host:port` or `[v6]:port`. */
export const HostPort = z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):\d{1,5}$/, 'host:port');

/** A DNS-1123 label, used for source names. */
export const SourceName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'a DNS-1123 label (lower-case letters, digits and -)')
  .max(63);

const Selector = z.strictObject({
  /** Namespace names or globs (`team-a-*`). */
  namespaces: z.array(z.string().min(1)).optional(),
  /** Kind names (`VirtualService`) or globs. */
  kinds: z.array(z.string().min(1)).optional(),
});

/** Fields every source type accepts: identity, precedence, access rules and safety. Spread into each type's schema. */
export const COMMON_SOURCE_FIELDS = {
  name: SourceName,
  /** Namespace of documents that carry none. */
  namespace: z.string().min(1).default('default'),
  /** Higher wins an object several sources define; equal priorities fall back to configuration order. */
  priority: z.number().int().default(0),
  /** Only what matches is admitted from this source. */
  allow: Selector.optional(),
  /** What matches is dropped from this source, even if allowed. */
  deny: Selector.optional(),
  /** `keep`: a full state that suddenly empties the source is held (logged loudly); `accept`: applied. */
  onEmpty: z.enum(['keep', 'accept']).default('keep'),
  /** Drop the source's objects after it has been stale this long; default never. */
  maxStale: Duration.optional(),
  /** Hold an update that deletes more than this share of the source's objects (and more than 10). */
  maxDeleteRatio: z.number().min(0).max(1).default(0.5),
  /** Apply a held update once it has persisted this long; default only on operator confirmation. */
  confirmAfter: Duration.optional(),
  /**
   * An update that empties a kind or deletes more than 10 objects waits this long for the rest of
   * the source's update, and the guards judge it whole. `0s` judges every update alone.
   */
  settle: Duration.default(1000),
  /** `false`: serve without this source once `syncTimeout` has passed, if it has not synced by then. */
  required: z.boolean().default(true),
};

/** File paths (PEM) of a TLS identity and trust, shared by upstream dialers and the server. */
export const TlsFiles = z.strictObject({
  /** CA bundle to verify the peer; absent means the system roots. */
  ca: z.string().optional(),
  /** Own certificate chain (client certificate upstream, server certificate downstream). */
  cert: z.string().optional(),
  /** Private key of `cert`. */
  key: z.string().optional(),
  /** Name to verify in the peer's certificate (SNI too), when it differs from the host dialed. */
  serverName: z.string().optional(),
  /** Skip verification of the peer: for tests only. */
  insecureSkipVerify: z.boolean().default(false),
});
