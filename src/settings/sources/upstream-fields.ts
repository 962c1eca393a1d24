import { z } from 'zod';
import { CONFIG_KINDS, KINDS, type KindDescriptor } from '../../schema/kinds.js';
import { Duration, TlsFiles } from './common.js';

function kindNamed(name: string): KindDescriptor | undefined {
  const byKey = KINDS.get(name);
  if (byKey !== undefined && byKey !== KINDS.meshConfig) return byKey;
  return CONFIG_KINDS.find((k) => k.kind === name);
}

/** A config kind by name (`VirtualService`) or registry key (`networking.istio.io/VirtualService`). */
export const KindName = z.string().refine((name) => kindNamed(name) !== undefined, {
  error: (issue) =>
    `unknown kind ${JSON.stringify(issue.input)}; one of ${CONFIG_KINDS.map((k) => k.kind).join(', ')}`,
});

/** A kind that had a Galley-era MCP collection. */
export const CollectionKindName = KindName.refine((name) => kindNamed(name)?.legacyCollection !== undefined, {
  error: (issue) => `${String(issue.input)} has no Galley-era MCP collection`,
});

const MODES = ['current', 'legacy', 'auto'] as const;
const Mode = z.enum(MODES);

/**
 * Which type-URL spelling to ask an xDS upstream for: `current` (istiod ≥1.24), `legacy`
 * (istiod ≤1.23), `auto` (both, served from the one holding objects), or a map of kind names to
 * one of those or to an explicit version (`ServiceEntry: v1alpha3`), with an optional `default`.
 */
export const ApiVersions = z.union([
  Mode,
  z.record(z.string(), z.string().min(1)).superRefine((map, ctx) => {
    for (const [name, choice] of Object.entries(map)) {
      if (name === 'default') {
        if (!Mode.safeParse(choice).success) {
          ctx.addIssue({
            code: 'custom',
            path: [name],
            message: `default must be one of ${MODES.join(', ')}`,
          });
        }
        continue;
      }
      const kind = kindNamed(name);
      if (kind === undefined) {
        ctx.addIssue({ code: 'custom', path: [name], message: `unknown kind ${JSON.stringify(name)}` });
      } else if (!Mode.safeParse(choice).success && !kind.versions.includes(choice)) {
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: `one of ${[...MODES, ...kind.versions].join(', ')}`,
        });
      }
    }
  }),
]);

/** Node identity sent to an xDS upstream. */
export const NodeIdentity = z.strictObject({
  /** Default istiod's form: `sidecar~<ip>~<pod>.<ns>~<ns>.svc.cluster.local`. */
  id: z.string().min(1).optional(),
  /** Merged over `GENERATOR: api` and `ISTIO_VERSION`. */
  metadata: z.record(z.string(), z.string()).optional(),
  /** Sent as `ISTIO_REVISION`. */
  revision: z.string().min(1).optional(),
});

/** Sink node sent to a Galley. */
export const SinkNode = z.strictObject({
  id: z.string().optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

const MAX_RECEIVE = 2 ** 31 - 1;

/** How a streaming source dials (spread into `xds` and `mcp`); every default is istiod's. */
export const DIAL_FIELDS = {
  /** Absent: plaintext. `ca` for TLS, plus `cert` and `key` for mTLS. */
  tls: TlsFiles.optional(),
  keepalive: z
    .strictObject({
      /** Ping interval; default 30s. */
      time: Duration.optional(),
      /** Ping timeout; default 10s. */
      timeout: Duration.optional(),
    })
    .optional(),
  /** Largest response accepted, in bytes (at most 2147483647, istiod's limit); default 64 MiB. */
  maxReceiveSize: z.number().int().min(4096).max(MAX_RECEIVE).optional(),
  /** How long a (re)connected stream may take to answer every subscription; default 10s. */
  syncTimeout: Duration.optional(),
  /** Reconnect backoff: from `initialDelay` (default 500ms) ×1.5 per attempt up to `maxDelay` (default 60s), ±50 %. */
  reconnect: z
    .strictObject({
      initialDelay: Duration.optional(),
      maxDelay: Duration.optional(),
    })
    .optional(),
};
