/**
 * The kind registry: one entry per config type istiod asks for. Everything that differs between
 * kinds (type-URL spellings, body message, envelope) lives in these entries, so code that handles
 * requests or documents never branches on a type URL or a kind name.
 */

import { anyTypeUrl } from './proto-root.js';

/**
 * What a response builder offers an envelope: one way to build per wrapping. The caller supplies
 * them; the envelope picks the one its kind travels in.
 */
export interface EnvelopeBuilders<R> {
  /** Each object of the kind as `Any(istio.mcp.v1alpha1.Resource)` wrapping `Any(body)`. */
  mcpResources(): R | undefined;
  /** One bare `Any(body)` whose type URL is `bodyTypeUrl`. */
  bare(bodyTypeUrl: string): R | undefined;
}

/**
 * How a kind travels inside a DiscoveryResponse, and what that means for the stream that sends
 * it. Handling code asks the envelope instead of branching on a kind. Stateless and shared.
 */
export interface Envelope {
  /** A name for logs and documentation. */
  readonly name: 'mcp-resource' | 'bare';
  /** Whether istiod acknowledges a response (then no other response of the type goes before the ACK). */
  readonly awaitsAck: boolean;
  /** Whether a stream sends the kind at most once (its content never changes while meshmux runs). */
  readonly sentOnce: boolean;
  /**
   * Whether the kind waits for every source to be ready, rather than only for the sources that
   * may hold objects of it.
   */
  readonly waitsForEverySource: boolean;
  /** Builds a response in this envelope for a kind whose body message is `bodyType`. */
  build<R>(bodyType: string, builders: EnvelopeBuilders<R>): R | undefined;
}

/** Every object wrapped in an MCP `Resource`; acknowledged by istiod, re-sent on every change. */
export const MCP_RESOURCE_ENVELOPE: Envelope = Object.freeze({
  name: 'mcp-resource',
  awaitsAck: true,
  sentOnce: false,
  waitsForEverySource: false,
  build: <R>(_bodyType: string, builders: EnvelopeBuilders<R>): R | undefined => builders.mcpResources(),
});

/**
 * One bare `Any(body)` (MeshConfig): istiod never acknowledges it, so it goes once per stream,
 * once every source is ready; never answered when there is nothing to send.
 */
export const BARE_ENVELOPE: Envelope = Object.freeze({
  name: 'bare',
  awaitsAck: false,
  sentOnce: true,
  waitsForEverySource: true,
  build: <R>(bodyType: string, builders: EnvelopeBuilders<R>): R | undefined =>
    builders.bare(anyTypeUrl(bodyType)),
});

export interface KindDescriptor {
  /** `<group>/<Kind>`, the registry key used by every layer. */
  readonly key: string;
  /** API group; `core` for MeshConfig. */
  readonly group: string;
  readonly kind: string;
  /** Lower-case plural, as in CRD names and legacy MCP collections. */
  readonly plural: string;
  /** The version istiod ≥1.24 asks for and the one meshmux writes in its own output. */
  readonly currentVersion: string;
  /** The version istiod 1.9–1.23 asks for. */
  readonly legacyVersion: string;
  /** Every version accepted in YAML `apiVersion` and in type URLs. */
  readonly versions: readonly string[];
  /** Full name of the body message. */
  readonly bodyType: string;
  readonly envelope: Envelope;
  /** Galley-era MCP collection name, where one existed. */
  readonly legacyCollection?: string;
}

/** CRD-style plural: `AuthorizationPolicy` → `authorizationpolicies`, `Gateway` → `gateways`. */
function pluralOf(kindName: string): string {
  const lower = kindName.toLowerCase();
  return /[^aeiou]y$/.test(lower) ? `${lower.slice(0, -1)}ies` : `${lower}s`;
}

function kind(
  group: string,
  kindName: string,
  versions: readonly string[],
  current: string,
  legacy: string,
  bodyType: string,
  legacyCollection?: string,
): KindDescriptor {
  return Object.freeze({
    key: `${group}/${kindName}`,
    group,
    kind: kindName,
    plural: pluralOf(kindName),
    currentVersion: current,
    legacyVersion: legacy,
    versions,
    bodyType,
    envelope: MCP_RESOURCE_ENVELOPE,
    ...(legacyCollection === undefined ? {} : { legacyCollection }),
  });
}

const NET = 'networking.istio.io';
const SEC = 'security.istio.io';
const NET_VERSIONS = ['v1', 'v1beta1', 'v1alpha3'] as const;
const SEC_VERSIONS = ['v1', 'v1beta1'] as const;

/** The config kinds in the order istiod requests them (`collections.Pilot`). */
export const CONFIG_KINDS: readonly KindDescriptor[] = Object.freeze([
  kind(
    SEC,
    'AuthorizationPolicy',
    SEC_VERSIONS,
    'v1',
    'v1beta1',
    'istio.security.v1beta1.AuthorizationPolicy',
    'istio/security/v1beta1/authorizationpolicies',
  ),
  kind(
    NET,
    'DestinationRule',
    NET_VERSIONS,
    'v1',
    'v1alpha3',
    'istio.networking.v1alpha3.DestinationRule',
    'istio/networking/v1alpha3/destinationrules',
  ),
  kind(
    NET,
    'EnvoyFilter',
    ['v1alpha3'],
    'v1alpha3',
    'v1alpha3',
    'istio.networking.v1alpha3.EnvoyFilter',
    'istio/networking/v1alpha3/envoyfilters',
  ),
  kind(
    NET,
    'Gateway',
    NET_VERSIONS,
    'v1',
    'v1alpha3',
    'istio.networking.v1alpha3.Gateway',
    'istio/networking/v1alpha3/gateways',
  ),
  kind(
    SEC,
    'PeerAuthentication',
    SEC_VERSIONS,
    'v1',
    'v1beta1',
    'istio.security.v1beta1.PeerAuthentication',
    'istio/security/v1beta1/peerauthentications',
  ),
  kind(NET, 'ProxyConfig', ['v1beta1'], 'v1beta1', 'v1beta1', 'istio.networking.v1beta1.ProxyConfig'),
  kind(
    SEC,
    'RequestAuthentication',
    SEC_VERSIONS,
    'v1',
    'v1beta1',
    'istio.security.v1beta1.RequestAuthentication',
    'istio/security/v1beta1/requestauthentications',
  ),
  kind(
    NET,
    'ServiceEntry',
    NET_VERSIONS,
    'v1',
    'v1alpha3',
    'istio.networking.v1alpha3.ServiceEntry',
    'istio/networking/v1alpha3/serviceentries',
  ),
  kind(
    NET,
    'Sidecar',
    NET_VERSIONS,
    'v1',
    'v1alpha3',
    'istio.networking.v1alpha3.Sidecar',
    'istio/networking/v1alpha3/sidecars',
  ),
  kind(
    'telemetry.istio.io',
    'Telemetry',
    ['v1', 'v1alpha1'],
    'v1',
    'v1alpha1',
    'istio.telemetry.v1alpha1.Telemetry',
  ),
  kind(
    'extensions.istio.io',
    'TrafficExtension',
    ['v1alpha1'],
    'v1alpha1',
    'v1alpha1',
    'istio.extensions.v1alpha1.TrafficExtension',
  ),
  kind(
    NET,
    'VirtualService',
    NET_VERSIONS,
    'v1',
    'v1alpha3',
    'istio.networking.v1alpha3.VirtualService',
    'istio/networking/v1alpha3/virtualservices',
  ),
  kind(
    'extensions.istio.io',
    'WasmPlugin',
    ['v1alpha1'],
    'v1alpha1',
    'v1alpha1',
    'istio.extensions.v1alpha1.WasmPlugin',
  ),
  kind(
    NET,
    'WorkloadEntry',
    NET_VERSIONS,
    'v1',
    'v1alpha3',
    'istio.networking.v1alpha3.WorkloadEntry',
    'istio/networking/v1alpha3/workloadentries',
  ),
  kind(
    NET,
    'WorkloadGroup',
    NET_VERSIONS,
    'v1',
    'v1alpha3',
    'istio.networking.v1alpha3.WorkloadGroup',
    'istio/networking/v1alpha3/workloadgroups',
  ),
]);

/** istiod's mesh config: asked for first, answered only when meshmux is configured with one. */
export const MESH_CONFIG_KIND: KindDescriptor = Object.freeze({
  key: 'core/MeshConfig',
  group: 'core',
  kind: 'MeshConfig',
  plural: 'meshconfigs',
  currentVersion: 'v1alpha1',
  legacyVersion: 'v1alpha1',
  versions: ['v1alpha1'],
  bodyType: 'istio.mesh.v1alpha1.MeshConfig',
  envelope: BARE_ENVELOPE,
});

/** The MCP-over-xDS type URL of a kind at a version: `<group>/<version>/<Kind>`. */
export function typeUrlOf(kind: KindDescriptor, version: string): string {
  return `${kind.group}/${version}/${kind.kind}`;
}

/** A type URL resolved to its kind and the version it spells. */
export interface ResolvedTypeUrl {
  readonly kind: KindDescriptor;
  readonly version: string;
}

/** Read-only lookups over the registry. */
export class KindRegistry {
  private readonly byKey = new Map<string, KindDescriptor>();
  private readonly byTypeUrl = new Map<string, ResolvedTypeUrl>();
  private readonly byApiKind = new Map<string, KindDescriptor>();
  private readonly byCollection = new Map<string, KindDescriptor>();

  constructor(
    readonly kinds: readonly KindDescriptor[],
    readonly meshConfig: KindDescriptor,
  ) {
    for (const k of [...kinds, meshConfig]) {
      this.byKey.set(k.key, k);
      for (const v of k.versions) {
        this.byTypeUrl.set(typeUrlOf(k, v), { kind: k, version: v });
        this.byApiKind.set(`${k.group}/${v}|${k.kind}`, k);
      }
      if (k.legacyCollection !== undefined) this.byCollection.set(k.legacyCollection, k);
    }
  }

  /** The kind with this registry key, if any. */
  get(key: string): KindDescriptor | undefined {
    return this.byKey.get(key);
  }

  /** The kind and version of an MCP-over-xDS type URL, for every spelling any istiod uses. */
  resolveTypeUrl(typeUrl: string): ResolvedTypeUrl | undefined {
    return this.byTypeUrl.get(typeUrl);
  }

  /** The kind of a YAML document, from its `apiVersion` (`group/version`) and `kind`. */
  fromApiVersion(apiVersion: string, kindName: string): KindDescriptor | undefined {
    return this.byApiKind.get(`${apiVersion}|${kindName}`);
  }

  /** The kind served under a Galley-era collection name. */
  fromCollection(collection: string): KindDescriptor | undefined {
    return this.byCollection.get(collection);
  }

  /** The type URLs istiod ≥1.24 asks for (MeshConfig excluded). */
  currentTypeUrls(): string[] {
    return this.kinds.map((k) => typeUrlOf(k, k.currentVersion));
  }

  /** The type URLs istiod 1.9–1.23 asks for (MeshConfig excluded). */
  legacyTypeUrls(): string[] {
    return this.kinds.map((k) => typeUrlOf(k, k.legacyVersion));
  }
}

/** The registry of everything meshmux serves. */
export const KINDS = new KindRegistry(CONFIG_KINDS, MESH_CONFIG_KIND);
