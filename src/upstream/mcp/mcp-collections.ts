import { MeshmuxError } from '../../core/errors.js';
import { CONFIG_KINDS } from '../../schema/kinds.js';
import { selectKinds } from '../streaming/kind-selection.js';
import type { SubscriptionChannel } from '../streaming/subscription-state.js';

/**
 * The Galley-era collections to ask for (`istio/networking/v1alpha3/virtualservices`, ...), one
 * channel each: the configured kinds, or every kind that had a collection. A kind without one
 * (Telemetry, ProxyConfig, ...) is a CONFIG error when named.
 */
export function planCollections(kinds: readonly string[] | undefined, source: string): SubscriptionChannel[] {
  const selected =
    kinds === undefined
      ? CONFIG_KINDS.filter((k) => k.legacyCollection !== undefined)
      : selectKinds(kinds, source);
  return selected.map((kind) => {
    if (kind.legacyCollection === undefined) {
      throw new MeshmuxError('CONFIG', `${kind.kind} has no Galley-era MCP collection`, {
        file: source,
        field: 'kinds',
      });
    }
    return { id: kind.legacyCollection, kind };
  });
}
