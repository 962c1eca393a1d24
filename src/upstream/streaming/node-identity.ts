import { hostname, networkInterfaces } from 'node:os';

/** Who meshmux says it is to an upstream, as configured (`node:` of a source). */
export interface NodeIdentityConfig {
  /** Default: istiod's form, `sidecar~<ip>~<pod>.<ns>~<ns>.svc.cluster.local`. */
  readonly id?: string | undefined;
  /** Merged over the defaults (`GENERATOR=api`, `ISTIO_VERSION`); a key set here wins. */
  readonly metadata?: Readonly<Record<string, string>> | undefined;
  /** Sent as `ISTIO_REVISION`; upstreams that filter by revision (slime) read it. */
  readonly revision?: string | undefined;
}

/** A resolved node: the id and the string metadata to send. */
export interface NodeIdentity {
  readonly id: string;
  readonly metadata: Readonly<Record<string, string>>;
}

/**
 * The metadata istiod's config-source client sends: `GENERATOR=api` selects the MCP generator on
 * an istiod, and adsc adds this placeholder `ISTIO_VERSION` when it has none.
 */
export const DEFAULT_NODE_METADATA: Readonly<Record<string, string>> = Object.freeze({
  GENERATOR: 'api',
  ISTIO_VERSION: '65536.65536.65536',
});

function firstPrivateIpv4(): string {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) {
      if (a.family === 'IPv4' && !a.internal) return a.address;
    }
  }
  return '127.0.0.1';
}

/** istiod's node id for this process: pod name and namespace from the downward-API variables istiod uses. */
export function defaultNodeId(env: NodeJS.ProcessEnv = process.env): string {
  const namespace = env['POD_NAMESPACE'] ?? 'istio-system';
  const pod = env['POD_NAME'] ?? hostname();
  return `sidecar~${firstPrivateIpv4()}~${pod}.${namespace}~${namespace}.svc.cluster.local`;
}

/** Resolves a configured identity against the defaults. */
export function resolveNodeIdentity(config: NodeIdentityConfig | undefined): NodeIdentity {
  const metadata: Record<string, string> = { ...DEFAULT_NODE_METADATA, ...config?.metadata };
  if (config?.revision !== undefined && config.revision !== '') metadata['ISTIO_REVISION'] = config.revision;
  return Object.freeze({ id: config?.id ?? defaultNodeId(), metadata: Object.freeze(metadata) });
}
