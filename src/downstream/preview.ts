import type { ConfigSnapshot } from '../merge/config-snapshot.js';
import { type KindRegistry, typeUrlOf } from '../schema/kinds.js';
import type { ClientIdentity } from './client-identity.js';
import type { PolicySet } from './policy/policy-set.js';

/** What one client would receive, per type, without connecting it. */
export type Preview =
  | {
      readonly admitted: true;
      readonly policy: string;
      readonly view: string;
      readonly types: ReadonlyArray<{
        readonly typeUrl: string;
        readonly ready: boolean;
        readonly objects: ReadonlyArray<{ readonly name: string; readonly version: string }>;
      }>;
    }
  | { readonly admitted: false; readonly reason: string };

/** Lists, per kind (current type URL), the objects a client with this identity would receive now. */
export function previewClient(
  snapshot: ConfigSnapshot,
  policies: PolicySet,
  kinds: KindRegistry,
  client: ClientIdentity,
): Preview {
  const admission = policies.admit(client);
  if (!admission.admitted) return { admitted: false, reason: admission.reason };
  return {
    admitted: true,
    policy: admission.policy,
    view: admission.view.id,
    types: kinds.kinds.map((kind) => ({
      typeUrl: typeUrlOf(kind, kind.currentVersion),
      ready: snapshot.readyFor(kind.key),
      objects: (snapshot.kinds.get(kind.key)?.resources ?? [])
        .filter((r) => admission.view.admits(r))
        .map((r) => ({ name: `${r.namespace}/${r.name}`, version: r.version })),
    })),
  };
}
