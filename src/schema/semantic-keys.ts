import { compactString } from '../core/compact-string.js';
import type { ConfigResource } from '../core/resource.js';
import { KINDS } from './kinds.js';
import { messageType } from './proto-root.js';

interface Body {
  hosts?: string[];
  host?: string;
  gateways?: string[];
  workload_selector?: unknown;
}

type Extractor = (r: ConfigResource, body: Body) => string[];

/**
 * Clashes istiod resolves silently, per kind: the keys objects share when they clash.
 * - two ServiceEntries for one host;
 * - two VirtualServices binding one host on one gateway (`mesh` for sidecars);
 * - two DestinationRules without workload selector for one host in one namespace;
 * - two Sidecars without workload selector in one namespace.
 */
const EXTRACTORS: ReadonlyMap<string, Extractor> = new Map<string, Extractor>([
  [
    'networking.istio.io/ServiceEntry',
    (_r, b) => (b.hosts ?? []).map((h) => compactString(`service-entry-host|${h}`)),
  ],
  [
    'networking.istio.io/VirtualService',
    (r, b) => {
      const gateways = b.gateways === undefined || b.gateways.length === 0 ? ['mesh'] : b.gateways;
      return gateways.flatMap((g) => {
        const gateway = g === 'mesh' || g.includes('/') ? g : `${r.namespace}/${g}`;
        return (b.hosts ?? []).map((h) => compactString(`gateway-host|${gateway} ${h}`));
      });
    },
  ],
  [
    'networking.istio.io/DestinationRule',
    (r, b) =>
      b.host === undefined || (b.workload_selector !== undefined && b.workload_selector !== null)
        ? []
        : [compactString(`destination-rule-host|${r.namespace} ${b.host}`)],
  ],
  [
    'networking.istio.io/Sidecar',
    (r, b) =>
      b.workload_selector === undefined || b.workload_selector === null
        ? [`sidecar-default|${r.namespace}`]
        : [],
  ],
]);

const cache = new WeakMap<ConfigResource, readonly string[]>();

/** The semantic keys of an object (empty for kinds without clash rules or undecodable bodies). Cached per object. */
export function semanticKeysOf(resource: ConfigResource): readonly string[] {
  const hit = cache.get(resource);
  if (hit !== undefined) return hit;
  let keys: readonly string[] = [];
  const extract = EXTRACTORS.get(resource.kind);
  const kind = KINDS.get(resource.kind);
  if (extract !== undefined && kind !== undefined) {
    try {
      const type = messageType(kind.bodyType);
      keys = extract(resource, type.toObject(type.decode(resource.body)));
    } catch {
      keys = [];
    }
  }
  cache.set(resource, keys);
  return keys;
}
