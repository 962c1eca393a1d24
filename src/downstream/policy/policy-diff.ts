import type { ConfigResource } from '../../core/resource.js';
import type { ConfigSnapshot } from '../../merge/config-snapshot.js';
import { SOURCE_ANNOTATION } from '../../merge/provenance.js';
import type { PolicySet } from './policy-set.js';

/** One object as a policy's istiods would hold it. */
export interface ServedObject {
  /** The kind's registry key, `networking.istio.io/VirtualService`. */
  readonly kind: string;
  /** `namespace/name`. */
  readonly name: string;
  readonly version: string;
  /** The source that provides it, from its provenance annotation; empty when it has none. */
  readonly source: string;
}

/** What the istiods of one policy would gain, lose and see change. */
export interface PolicyDiff {
  readonly policy: string;
  /** `kept`: the policy is in both; `added`/`removed`: in the new or the running configuration only. */
  readonly presence: 'kept' | 'added' | 'removed';
  readonly gained: readonly ServedObject[];
  readonly lost: readonly ServedObject[];
  readonly changed: ReadonlyArray<{ readonly before: ServedObject; readonly after: ServedObject }>;
}

/** A configuration's merged state and its policies. */
export interface ServedConfiguration {
  readonly snapshot: ConfigSnapshot;
  readonly policies: PolicySet;
}

function served(r: ConfigResource): ServedObject {
  return {
    kind: r.kind,
    name: `${r.namespace}/${r.name}`,
    version: r.version,
    source: r.annotations[SOURCE_ANNOTATION] ?? '',
  };
}

/** `kind|ns/name` → object, for the objects the policy's view admits. */
function holdings(
  config: ServedConfiguration,
  policy: string,
): ReadonlyMap<string, ServedObject> | undefined {
  const view = config.policies.views().find((v) => v.policy === policy)?.view;
  if (view === undefined) return undefined;
  const out = new Map<string, ServedObject>();
  for (const [kind, state] of config.snapshot.kinds) {
    for (const r of state.resources)
      if (view.admits(r)) out.set(`${kind}|${r.namespace}/${r.name}`, served(r));
  }
  return out;
}

function byKey(a: ServedObject, b: ServedObject): number {
  return a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind.localeCompare(b.kind);
}

/**
 * Per policy (those of the running configuration in their order, then the new ones), what its
 * istiods without a revision would gain, lose and receive in a new version if `next` replaced
 * `running`. A policy that only one side has compares against nothing: its istiods would be
 * matched by another policy or refused, which the caller reports.
 */
export function diffPolicies(running: ServedConfiguration, next: ServedConfiguration): PolicyDiff[] {
  const names = [...running.policies.views(), ...next.policies.views()]
    .map((v) => v.policy)
    .filter((name, i, all) => all.indexOf(name) === i);
  return names.map((policy) => {
    const before = holdings(running, policy);
    const after = holdings(next, policy);
    const gained: ServedObject[] = [];
    const lost: ServedObject[] = [];
    const changed: Array<{ before: ServedObject; after: ServedObject }> = [];
    for (const [key, object] of after ?? new Map<string, ServedObject>()) {
      const old = before?.get(key);
      if (old === undefined) gained.push(object);
      else if (old.version !== object.version) changed.push({ before: old, after: object });
    }
    for (const [key, object] of before ?? new Map<string, ServedObject>()) {
      if (after?.has(key) !== true) lost.push(object);
    }
    return {
      policy,
      presence: before === undefined ? 'added' : after === undefined ? 'removed' : 'kept',
      gained: gained.sort(byKey),
      lost: lost.sort(byKey),
      changed: changed.sort((a, b) => byKey(a.after, b.after)),
    };
  });
}
