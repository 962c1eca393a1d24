import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { z } from 'zod';
import { closestWord } from '../../core/closest-word.js';
import { globMatcher, globProblem, type GlobSubject } from '../../core/glob.js';
import { CONFIG_KINDS } from '../../schema/kinds.js';
import { parseGoDuration } from '../../core/go-duration.js';

/**
 * A duration in Go's syntax, parsed by the same parser as the durations in Istio YAML: one or more
 * `<number><unit>` terms with units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` and optional fractions
 * (`300ms`, `1.5s`, `1h30m`), or a bare `0`. Exactly what Go's `time.ParseDuration` rejects is
 * rejected, and a negative duration too. Parsed to milliseconds (`300us` is 0.3).
 */
export const Duration = z.string().transform((text, ctx) => {
  const parsed = parseGoDuration(text);
  if (!parsed.ok) {
    ctx.addIssue({ code: 'custom', message: parsed.reason });
    return z.NEVER;
  }
  const { seconds, nanos } = parsed.duration;
  if (seconds < 0 || nanos < 0) {
    ctx.addIssue({
      code: 'custom',
      message: `${JSON.stringify(text)} is negative: a duration here is 0 or more`,
    });
    return z.NEVER;
  }
  return seconds * 1000 + nanos / 1e6;
});

const BYTE_UNITS: Readonly<Record<string, number>> = { '': 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

/** A size in bytes: a positive integer, or a number with a binary unit (`512Ki`, `32Mi`, `1GiB`). */
export const ByteSize = z.union([
  z.number().int().positive(),
  z
    .string()
    .regex(/^\d+(Ki|Mi|Gi)?B?$/, 'a size such as 1048576, 512Ki, 32Mi or 1Gi')
    .transform((text) => {
      const m = /^(\d+)(Ki|Mi|Gi)?/.exec(text);
      return Number(m?.[1] ?? 0) * (BYTE_UNITS[m?.[2] ?? ''] ?? 1);
    })
    .refine((n) => n > 0 && Number.isSafeInteger(n), 'a positive size'),
]);

const DNS_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** Why `host` is not a host name, an IPv4 address or a bracketed IPv6 address; undefined if it is one. */
function hostProblem(host: string): string | undefined {
  if (host.startsWith('[') && host.endsWith(']')) {
    return isIPv6(host.slice(1, -1)) ? undefined : `${host} is not an IPv6 address`;
  }
  // Only digits and dots: meant as an IPv4 address, so it must be one (`10.0.0.300` is a typo, not a name).
  if (/^[\d.]+$/.test(host)) return isIPv4(host) ? undefined : `${host} is not an IPv4 address`;
  return DNS_NAME.test(host) ? undefined : `${JSON.stringify(host)} is not a host name or IP address`;
}

/** Checks `text` as `host:port` with a port from `minPort` to 65535; `hostOptional` allows `:port`. */
function hostPortProblem(text: string, minPort: number, hostOptional: boolean): string | undefined {
  const colon = text.lastIndexOf(':');
  if (colon < 0) return `host:port, got ${JSON.stringify(text)} (no port)`;
  const host = text.slice(0, colon);
  const port = text.slice(colon + 1);
  if (!/^\d{1,5}$/.test(port) || Number(port) < minPort || Number(port) > 65535) {
    return `port must be a number from ${minPort} to 65535, got ${JSON.stringify(port)}`;
  }
  if (host === '') return hostOptional ? undefined : 'host:port needs a host';
  if (host.includes(':') && !host.startsWith('[')) {
    return 'an IPv6 address is written in brackets: [::1]:15010';
  }
  return hostProblem(host);
}

/** `host:port` or `[v6]:port` to dial: a host name or IP address, and a port from 1 to 65535. */
export const HostPort = z.string().superRefine((text, ctx) => {
  const problem = hostPortProblem(text, 1, false);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

/**
 * `host:port` to listen on: as {@link HostPort}, but the host may be empty (every address) and
 * port 0 picks a free port.
 */
export const ListenAddress = z.string().superRefine((text, ctx) => {
  const problem = hostPortProblem(text, 0, true);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

/**
 * An IPv4 or IPv6 address with an optional prefix length (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`),
 * checked here exactly as the policy matcher will load it, so a typo is a configuration error and
 * never a failure while reloading.
 */
export const Cidr = z.string().superRefine((text, ctx) => {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const bits = slash < 0 ? undefined : text.slice(slash + 1);
  const family = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : undefined;
  if (family === undefined) {
    ctx.addIssue({ code: 'custom', message: `${JSON.stringify(address)} is not an IPv4 or IPv6 address` });
    return;
  }
  const max = family === 'ipv4' ? 32 : 128;
  if (bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > max)) {
    ctx.addIssue({
      code: 'custom',
      message: `prefix length must be 0 to ${max} for an ${family === 'ipv4' ? 'IPv4' : 'IPv6'} address, got /${bits}`,
    });
    return;
  }
  try {
    new BlockList().addSubnet(address, bits === undefined ? max : Number(bits), family);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not a usable CIDR: ${(err as Error).message}` });
  }
});

/** A DNS-1123 label, used for source names. */
export const SourceName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'a DNS-1123 label (lower-case letters, digits and -)')
  .max(63);

/**
 * A glob of the one dialect (see `core/glob.ts`) over names, checked here so that every glob a
 * configuration loads with compiles when it is used.
 */
export const Glob = globSchema('name');

/** A glob of the one dialect over names or over slash-separated paths, checked at load. */
export function globSchema(subject: GlobSubject) {
  return z.string().superRefine((glob, ctx) => {
    const problem = globProblem(glob, subject);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  });
}

/**
 * A kind's name (`VirtualService`), its registry key, or a glob of either, which must match a kind
 * meshmux serves: a misspelt kind would allow or deny nothing, and say nothing of it.
 */
const KindGlob = z
  .string()
  .min(1)
  .superRefine((glob, ctx) => {
    const problem = globProblem(glob, 'name');
    if (problem !== undefined) {
      ctx.addIssue({ code: 'custom', message: problem });
      return;
    }
    const matches = globMatcher([glob]);
    if (CONFIG_KINDS.some((k) => matches(k.kind) || matches(k.key))) return;
    const near = closestWord(
      glob,
      CONFIG_KINDS.map((k) => k.kind),
    );
    ctx.addIssue({
      code: 'custom',
      message: `${glob} matches no kind meshmux serves${near === undefined ? '' : ` (did you mean ${near}?)`}`,
    });
  });

const Selector = z.strictObject({
  /** Namespace names or globs (`team-a-*`). */
  namespaces: z.array(Glob.min(1)).optional(),
  /** Kind names (`VirtualService`) or globs, each matching some kind meshmux serves. */
  kinds: z.array(KindGlob).optional(),
});

/** Fields every source type accepts: identity, precedence, access rules and safety. Spread into each type's schema. */
/**
 * How the merge treats a source's objects: precedence, access rules and guards. Written flat in a
 * source's YAML beside its other fields; parsed into the source's `rules` (see `withRules`), so a
 * change of these alone re-applies the rules to the running source instead of restarting it.
 */
export const MERGE_RULE_FIELDS = {
  /** Higher wins an object several sources define; equal priorities fall back to configuration order. */
  priority: z.number().int().default(0),
  /** Only what matches is admitted from this source. */
  allow: Selector.optional(),
  /** What matches is dropped from this source, even if allowed. */
  deny: Selector.optional(),
  /**
   * `keep`: a full state that suddenly empties the source, or a listing of its upstream (an `xds`
   * answer, a Kubernetes relist) that takes every object of a kind it held more than one of, is
   * held (logged loudly); `accept`: applied.
   */
  onEmpty: z.enum(['keep', 'accept']).default('keep'),
  /** Drop the source's objects after it has been stale this long; default never. */
  maxStale: Duration.optional(),
  /**
   * Hold an update that deletes more than this share of the source's objects (and more than 10),
   * and a listing that deletes more than this share of one kind's objects (and more than 10):
   * that kind is held alone, the rest applied.
   */
  maxDeleteRatio: z.number().min(0).max(1).default(0.5),
  /**
   * Deletions are judged over this window: an update that takes the source further below the most
   * it held within it than `maxDeleteRatio` allows is held, however few objects it deletes itself.
   * `0s` judges each update against the state before it alone.
   */
  deleteWindow: Duration.default(600_000),
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

/** A source's merge rules, as parsed. */
export type MergeRules = z.output<z.ZodObject<typeof MERGE_RULE_FIELDS>>;

/** The fields every source type has: its name, its default namespace and its merge rules. */
export const COMMON_SOURCE_FIELDS = {
  name: SourceName,
  /** Namespace of documents that carry none. */
  namespace: z.string().min(1).default('default'),
  ...MERGE_RULE_FIELDS,
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
