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

/** Fields every source type accepts. Spread into each type's schema. */
export const COMMON_SOURCE_FIELDS = {
  name: SourceName,
  /** Namespace of documents that carry none. */
  namespace: z.string().min(1).default('default'),
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
