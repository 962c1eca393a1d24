import type { ConfigSnapshot } from '../../merge/config-snapshot.js';
import { DEFAULT_SOURCE_POLICY } from '../../merge/source-rules.js';
import { guardVerdict, type GuardRules } from '../../merge/update-guards.js';
import type { ClientIdentity } from '../client-identity.js';
import type { ClientView } from '../client-view.js';
import { REVISION_LABEL } from './client-policy.js';
import type { PolicySet } from './policy-set.js';

/** How a change of the policies is judged before the istiods it narrows lose what they hold. */
export interface PolicyGuardRules {
  /** A change that leaves some istiod with nothing where it held something is held. */
  readonly keepOnEmpty: boolean;
  /** A change that takes more than this share of some istiod's objects (and more than 10) is held. */
  readonly maxDeleteRatio: number;
  /** Apply a held change once it has waited this long; absent: only on confirmation. */
  readonly confirmAfterMs?: number | undefined;
}

export const DEFAULT_POLICY_GUARD: PolicyGuardRules = Object.freeze({
  keepOnEmpty: true,
  maxDeleteRatio: DEFAULT_SOURCE_POLICY.maxDeleteRatio,
});

/** One client as the running policies serve it. */
export interface ClientHolding {
  readonly client: ClientIdentity;
  readonly policy: string;
  readonly view: ClientView;
}

/** What a change of the policies does to the istiods of one view that would end in one place. */
export interface PolicyLoss {
  /** The policy the istiods are served under now. */
  readonly policy: string;
  /** The policy they would be served under; absent when the new policies refuse them. */
  readonly next?: string;
  readonly clients: number;
  /** Objects each of them holds now. */
  readonly objects: number;
  /** Of those, the objects the new policies would withdraw from each. */
  readonly lost: number;
  /** Why the guards hold it, when they do. */
  readonly held?: 'empty' | 'mass-delete';
}

/** The verdict on a change of the policies: per group of istiods, what it takes from them, most first. */
export interface PolicyJudgement {
  readonly losses: readonly PolicyLoss[];
  /** Whether some group loses more than the guards let one change take. */
  readonly held: boolean;
}

/**
 * Judges replacing the running policies by `next` for the istiods `holdings` names, against what
 * `snapshot` serves them now: each client is looked up under `next` as it would be after the
 * change, and what its view admits now and the new one does not counts as lost (every object, for
 * a client the new policies refuse). Clients of one view that would end in the same view are judged
 * once. The guards are a source's: a group left with nothing while `keepOnEmpty`, or losing more than
 * 10 objects and more than `maxDeleteRatio` of what it holds, holds the change.
 */
export function judgePolicyChange(
  snapshot: ConfigSnapshot,
  holdings: Iterable<ClientHolding>,
  next: PolicySet,
  rules: PolicyGuardRules,
): PolicyJudgement {
  const groups = new Map<
    string,
    { policy: string; from: ClientView; to?: ClientView; next?: string; clients: number }
  >();
  // Views of one policy differ by the client's revision only in the objects labelled with one;
  // without such objects, clients are judged by policy (a revision is the client's claim, and a
  // group per claimed revision would cost a pass over every object each).
  const byView = hasRevisionLabels(snapshot);
  for (const h of holdings) {
    const admission = next.admit(h.client);
    const to = admission.admitted ? admission.view : undefined;
    const ends = to === undefined ? '' : `+${byView ? to.id : admission.policy}`;
    let key = `${byView ? h.view.id : h.policy}\u0000${ends}`;
    if (byView && !groups.has(key) && groups.size >= MAX_VIEW_GROUPS) {
      key = `${h.policy}\u0000${to === undefined ? '' : `+${admission.policy}`}\u0000`;
    }
    const group = groups.get(key);
    if (group !== undefined) group.clients++;
    else {
      groups.set(key, {
        policy: h.policy,
        from: h.view,
        clients: 1,
        ...(admission.admitted ? { to: admission.view, next: admission.policy } : {}),
      });
    }
  }
  const guard: GuardRules = {
    keepOnEmpty: rules.keepOnEmpty,
    minDeletes: DEFAULT_SOURCE_POLICY.minDeletes,
    maxDeleteRatio: rules.maxDeleteRatio,
    settleMs: 0,
  };
  const losses: PolicyLoss[] = [];
  for (const g of groups.values()) {
    let objects = 0;
    let lost = 0;
    for (const kind of snapshot.kinds.values()) {
      for (const r of kind.list ?? kind.resources) {
        if (!g.from.admits(r)) continue;
        objects++;
        if (g.to === undefined || !g.to.admits(r)) lost++;
      }
    }
    const verdict = guardVerdict(
      { deletions: lost, after: objects - lost, emptiesKind: false, emptiedKinds: [] },
      objects,
      guard,
    );
    losses.push({
      policy: g.policy,
      ...(g.next === undefined ? {} : { next: g.next }),
      clients: g.clients,
      objects,
      lost,
      ...(verdict === undefined ? {} : { held: verdict.reason === 'empty' ? 'empty' : 'mass-delete' }),
    });
  }
  losses.sort((a, b) => b.lost - a.lost);
  return { losses, held: losses.some((l) => l.held !== undefined) };
}

/** Groups judged view by view at most; clients beyond them are judged by policy. */
const MAX_VIEW_GROUPS = 64;

function hasRevisionLabels(snapshot: ConfigSnapshot): boolean {
  for (const kind of snapshot.kinds.values()) {
    for (const r of kind.list ?? kind.resources) if (r.labels[REVISION_LABEL] !== undefined) return true;
  }
  return false;
}

/** The clients as `set` serves them: those it admits, with their policy and view. */
export function holdingsUnder(set: PolicySet, clients: Iterable<ClientIdentity>): ClientHolding[] {
  const out: ClientHolding[] = [];
  for (const client of clients) {
    const admission = set.admit(client);
    if (admission.admitted) out.push({ client, policy: admission.policy, view: admission.view });
  }
  return out;
}
