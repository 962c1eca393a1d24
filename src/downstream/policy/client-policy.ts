import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { shortDigest } from '../../core/content-digest.js';
import { globMatcher } from '../../core/glob.js';
import type { ConfigResource } from '../../core/resource.js';
import type { ClientIdentity } from '../client-identity.js';
import type { ClientView, PartitionScheme, ViewPartition } from '../client-view.js';

/** Label istiod uses to bind an object to one control-plane revision. */
export const REVISION_LABEL = 'istio.io/rev';

/** Which clients a policy applies to. Every field given must match. */
export interface PolicyMatch {
  /** Glob over the node id. */
  readonly nodeId?: string | undefined;
  /** Node metadata keys and the values (globs) they must have. */
  readonly metadata?: Readonly<Record<string, string>> | undefined;
  /** The TCP peer must be inside one of these CIDRs. */
  readonly peerCidrs?: readonly string[] | undefined;
  /** One SAN of a verified client certificate must match one glob (`spiffe://cluster.local/ns/x/*`, `DNS:*.corp`). */
  readonly certSan?: readonly string[] | undefined;
  /** The client's `ISTIO_REVISION`. */
  readonly revision?: string | undefined;
}

/** A selection of objects. In `allow`, every list given must match; in `deny`, any list given. */
export interface ObjectSelector {
  readonly namespaces?: readonly string[] | undefined;
  readonly kinds?: readonly string[] | undefined;
  /** Labels the object must carry with these values. */
  readonly labels?: Readonly<Record<string, string>> | undefined;
  /** Globs over object names. */
  readonly names?: readonly string[] | undefined;
}

/** One entry of the ordered policy list. */
export interface PolicyConfig {
  readonly name: string;
  readonly match?: PolicyMatch | undefined;
  readonly allow?: ObjectSelector | undefined;
  readonly deny?: ObjectSelector | undefined;
  /** Refuse matching clients that present no verified client certificate. */
  readonly requireClientCert?: boolean | undefined;
}

/** Globs of the one dialect (`core/glob.ts`) over names: `*` crosses `.` and `/`. */
function anyGlob(patterns: readonly string[]): (value: string) => boolean {
  return globMatcher(patterns);
}

function kindGlob(patterns: readonly string[]): (kind: string) => boolean {
  const m = anyGlob(patterns);
  return (kind) => m(kind) || m(kind.slice(kind.lastIndexOf('/') + 1));
}

function cidrList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [address = '', bits] = cidr.split('/');
    const family = isIPv6(address) ? 'ipv6' : 'ipv4';
    if (!isIPv4(address) && !isIPv6(address)) throw new Error(`not a CIDR: ${cidr}`);
    list.addSubnet(address, bits === undefined ? (family === 'ipv4' ? 32 : 128) : Number(bits), family);
  }
  return list;
}

/** A selector compiled into tests over objects, each a function of its own. */
type CompiledSelector = ReadonlyArray<(r: ConfigResource) => boolean>;

/**
 * A test that the object carries every label with its value. A loop over two arrays, without a
 * closure or a destructured entry per label: the views admit every object of every kind when they
 * are first built, mostly before the code is optimized, where each of those costs.
 */
function labelTest(labels: Readonly<Record<string, string>>): (r: ConfigResource) => boolean {
  const keys = Object.keys(labels);
  const values = keys.map((k) => labels[k]);
  if (keys.length === 1) {
    const key = keys[0] as string;
    const value = values[0];
    return (r) => r.labels[key] === value;
  }
  return (r) => {
    const held = r.labels;
    for (let i = 0; i < keys.length; i++) if (held[keys[i] as string] !== values[i]) return false;
    return true;
  };
}

function compileSelector(s: ObjectSelector | undefined): CompiledSelector {
  const tests: Array<(r: ConfigResource) => boolean> = [];
  if (s?.namespaces !== undefined) {
    const m = anyGlob(s.namespaces);
    tests.push((r) => m(r.namespace));
  }
  if (s?.kinds !== undefined) {
    const m = kindGlob(s.kinds);
    tests.push((r) => m(r.kind));
  }
  if (s?.labels !== undefined) tests.push(labelTest(s.labels));
  if (s?.names !== undefined) {
    const m = anyGlob(s.names);
    tests.push((r) => m(r.name));
  }
  return tests;
}

/** A policy compiled once; matching and filtering are pure. */
export class ClientPolicy {
  private readonly clientTests: ReadonlyArray<(c: ClientIdentity) => boolean>;
  private readonly allow: CompiledSelector;
  private readonly deny: CompiledSelector;
  /** True when the policy filters no object (revision filtering aside). */
  readonly admitsAll: boolean;
  /** Derived from the policy's content: a reload that leaves a policy unchanged keeps its views and cached responses. */
  readonly fingerprint: string;

  constructor(readonly config: PolicyConfig) {
    const m = config.match ?? {};
    const tests: Array<(c: ClientIdentity) => boolean> = [];
    if (m.nodeId !== undefined) {
      const nodeId = anyGlob([m.nodeId]);
      tests.push((c) => nodeId(c.nodeId));
    }
    for (const [key, value] of Object.entries(m.metadata ?? {})) {
      const wanted = anyGlob([value]);
      tests.push((c) => {
        const v = c.metadata[key];
        return typeof v === 'string' && wanted(v);
      });
    }
    if (m.peerCidrs !== undefined) {
      const list = cidrList(m.peerCidrs);
      tests.push((c) =>
        isIPv4(c.peerIp) ? list.check(c.peerIp, 'ipv4') : isIPv6(c.peerIp) && list.check(c.peerIp, 'ipv6'),
      );
    }
    if (m.certSan !== undefined) {
      const any = anyGlob(m.certSan);
      // A pattern may name the SAN type (`URI:spiffe://...`) or only its value.
      tests.push((c) => c.sans.some((san) => any(san) || any(san.slice(san.indexOf(':') + 1))));
    }
    if (m.revision !== undefined) {
      const rev = m.revision;
      tests.push((c) => c.revision === rev);
    }
    this.clientTests = tests;
    this.allow = compileSelector(config.allow);
    this.deny = compileSelector(config.deny);
    this.admitsAll = this.allow.length === 0 && this.deny.length === 0;
    this.fingerprint = shortDigest(JSON.stringify([config.allow ?? null, config.deny ?? null]), 10);
  }

  get name(): string {
    return this.config.name;
  }

  /** Whether this policy applies to the client. */
  matches(client: ClientIdentity): boolean {
    return this.clientTests.every((t) => t(client));
  }

  /** Whether a client of this policy may receive the object (revision rule not included). */
  admits(r: ConfigResource): boolean {
    const allow = this.allow;
    for (let i = 0; i < allow.length; i++) if (!(allow[i] as (r: ConfigResource) => boolean)(r)) return false;
    const deny = this.deny;
    for (let i = 0; i < deny.length; i++) if ((deny[i] as (r: ConfigResource) => boolean)(r)) return false;
    return true;
  }
}

/**
 * The view of a policy for one revision: istiod's own rule on top of the policy — an object
 * labelled `istio.io/rev` reaches only istiods of that revision; unlabelled objects reach all, and
 * a client without a revision gets everything. `partition`: the view's place among the views of
 * its configuration (see {@link PolicyPartitions}), whose filter must be this one.
 */
export function policyView(
  policy: ClientPolicy | undefined,
  revision: string,
  partition?: ViewPartition,
): ClientView {
  const byPolicy = policy === undefined || policy.admitsAll ? undefined : policy;
  const filtersRevision = revision !== '';
  const view: ClientView = {
    id: `${policy?.name ?? '*'}@${policy?.fingerprint ?? ''}|rev=${revision}`,
    admitsAll: byPolicy === undefined && !filtersRevision,
    admits: (r: ConfigResource) => {
      if (filtersRevision) {
        const rev = r.labels[REVISION_LABEL];
        if (rev !== undefined && rev !== revision) return false;
      }
      return byPolicy === undefined || byPolicy.admits(r);
    },
  };
  return Object.freeze(partition === undefined ? view : { ...view, partition });
}

/** Most policies {@link PolicyPartitions} splits by: a part's key holds a bit per policy in a small integer. */
const MAX_PARTITION_POLICIES = 30;

/** Between a part key's policy bits and the revision label of its objects. */
const REVISION_PART = '~';

/**
 * The split of objects by which policies of a configuration admit them and by their
 * `istio.io/rev` label: each view of a policy (for any revision) admits every object of a part or
 * none, so views share the parts' blocks. A part's key is the policies' bits in base 36, then,
 * for objects that carry the label, `~` and its value (absent and empty differ, as in
 * {@link policyView}). Only for two policies or more, up to 30; with one, a view's own list is its
 * only part.
 */
export class PolicyPartitions implements PartitionScheme {
  readonly id: string;

  private constructor(private readonly policies: readonly ClientPolicy[]) {
    this.id = shortDigest(JSON.stringify(policies.map((p) => p.fingerprint)), 10);
  }

  /** The split for `policies` (in configuration order), or undefined where there is none to make. */
  static of(policies: readonly ClientPolicy[]): PolicyPartitions | undefined {
    if (policies.length < 2 || policies.length > MAX_PARTITION_POLICIES) return undefined;
    return new PolicyPartitions(policies);
  }

  partOf(r: ConfigResource): string | undefined {
    const policies = this.policies;
    let bits = 0;
    for (let i = 0; i < policies.length; i++) if ((policies[i] as ClientPolicy).admits(r)) bits |= 1 << i;
    if (bits === 0) return undefined;
    const rev = r.labels[REVISION_LABEL];
    return rev === undefined ? bits.toString(36) : `${bits.toString(36)}${REVISION_PART}${rev}`;
  }

  /** The place of `policy`'s view for `revision`; undefined for a policy not of this split. */
  view(policy: ClientPolicy, revision: string): ViewPartition | undefined {
    const index = this.policies.indexOf(policy);
    if (index < 0) return undefined;
    const bit = 1 << index;
    return Object.freeze({
      scheme: this,
      includes: (part: string): boolean => {
        const cut = part.indexOf(REVISION_PART);
        if ((parseInt(cut < 0 ? part : part.slice(0, cut), 36) & bit) === 0) return false;
        // The revision rule of policyView: a labelled object reaches istiods of its revision only.
        return revision === '' || cut < 0 || part.slice(cut + 1) === revision;
      },
    });
  }
}
