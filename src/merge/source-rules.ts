import type { ConfigResource } from '../core/resource.js';
import { globMatcher } from '../core/glob.js';

/** Why an object was not admitted from a source. A closed set: it labels metrics. */
export type RejectionReason =
  'namespace-not-allowed' | 'kind-not-allowed' | 'namespace-denied' | 'kind-denied' | 'duplicate-in-source';

/** A selector of namespaces (names or globs) and kinds (short names like `VirtualService`, or registry keys). */
export interface Selector {
  readonly namespaces?: readonly string[] | undefined;
  readonly kinds?: readonly string[] | undefined;
}

/** What the merge needs to know about one source beyond its events. */
export interface SourcePolicy {
  /** Higher wins a key held by several sources. Default 0. */
  readonly priority: number;
  /** When set, only objects matching every list it has are admitted. */
  readonly allow?: Selector;
  /** Objects matching any list here are dropped, even if allowed. */
  readonly deny?: Selector;
  /** Keep the last state when a full state suddenly empties a source that had objects. Default true. */
  readonly keepOnEmpty: boolean;
  /** Drop the state of a source that has been stale this long; absent = never. */
  readonly maxStaleMs?: number;
  /**
   * Hold updates deleting more than this share of a source's objects (and more than `minDeletes`),
   * and, alone, kinds a listing cuts by more than this share of their objects (see `kindsCut`).
   * Default 0.5.
   */
  readonly maxDeleteRatio: number;
  /**
   * How long the guards remember the most objects the source held: an update is judged by how far
   * it takes the source below that, when more than it deletes itself. 0: each update alone.
   * Default 10 minutes.
   */
  readonly deleteWindowMs: number;
  /** Deletions at or below this count are never held. Default 10. */
  readonly minDeletes: number;
  /** A held update is applied once it has persisted this long; absent = only by operator confirmation. */
  readonly confirmAfterMs?: number;
  /**
   * How long an update that empties a kind or deletes more than `minDeletes` objects waits for the
   * rest of the source's update before the guards judge it whole (upstreams send one response per
   * type, so a wiped upstream empties a source one kind at a time). 0 judges each update alone.
   * Default 1 s.
   */
  readonly settleMs: number;
  /**
   * Whether kinds this source may hold are answered only once it has synced or been restored.
   * False: it is waited for only until the startup budget passes. Default true.
   */
  readonly required: boolean;
}

export const DEFAULT_SOURCE_POLICY: SourcePolicy = Object.freeze({
  priority: 0,
  keepOnEmpty: true,
  maxDeleteRatio: 0.5,
  deleteWindowMs: 600_000,
  minDeletes: 10,
  settleMs: 1000,
  required: true,
});

function kindMatcher(kinds: readonly string[] | undefined): (kind: string) => boolean {
  // `VirtualService` matches the registry key `networking.istio.io/VirtualService`.
  const byKey = globMatcher(kinds);
  return (kind) => byKey(kind) || byKey(kind.slice(kind.lastIndexOf('/') + 1));
}

/** The compiled access rules of one source. Pure. */
export class SourceAcl {
  private readonly allowNs: ((ns: string) => boolean) | undefined;
  private readonly allowKind: ((kind: string) => boolean) | undefined;
  private readonly denyNs: (ns: string) => boolean;
  private readonly denyKind: (kind: string) => boolean;
  /** True when the source has no rules at all: every object is admitted. */
  readonly unrestricted: boolean;

  constructor(policy: Pick<SourcePolicy, 'allow' | 'deny'>) {
    this.unrestricted = policy.allow === undefined && policy.deny === undefined;
    this.allowNs = policy.allow?.namespaces === undefined ? undefined : globMatcher(policy.allow.namespaces);
    this.allowKind = policy.allow?.kinds === undefined ? undefined : kindMatcher(policy.allow.kinds);
    this.denyNs = globMatcher(policy.deny?.namespaces);
    this.denyKind = kindMatcher(policy.deny?.kinds);
  }

  /** Why the object may not come from this source, or undefined when it may. */
  check(resource: Pick<ConfigResource, 'kind' | 'namespace'>): RejectionReason | undefined {
    if (this.allowNs !== undefined && !this.allowNs(resource.namespace)) return 'namespace-not-allowed';
    if (this.allowKind !== undefined && !this.allowKind(resource.kind)) return 'kind-not-allowed';
    if (this.denyNs(resource.namespace)) return 'namespace-denied';
    if (this.denyKind(resource.kind)) return 'kind-denied';
    return undefined;
  }

  /** Whether the source may ever contribute objects of this kind (used for readiness). */
  mayContribute(kind: string): boolean {
    if (this.allowKind !== undefined && !this.allowKind(kind)) return false;
    return !this.denyKind(kind);
  }
}
