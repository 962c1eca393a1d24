import { type ClientIdentity, describeIdentity } from '../client-identity.js';
import type { ClientView } from '../client-view.js';
import { ClientPolicy, type PolicyConfig, PolicyPartitions, policyView } from './client-policy.js';

/** The outcome of looking a client up: its view, or why it is refused. */
export type Admission =
  | { readonly admitted: true; readonly policy: string; readonly view: ClientView }
  | { readonly admitted: false; readonly policy?: string; readonly reason: string };

/**
 * The ordered policy list; the first policy whose match fits the client decides. With no policy
 * configured everything goes to everyone; with policies, a client no policy matches is refused.
 * Clients with the same policy and revision get views with the same id (same filter).
 */
export class PolicySet {
  private readonly policies: readonly ClientPolicy[];
  /** How the policies' views share each object's bytes (two policies or more). */
  private readonly partitions: PolicyPartitions | undefined;

  constructor(configs: readonly PolicyConfig[]) {
    this.policies = configs.map((c) => new ClientPolicy(c));
    this.partitions = PolicyPartitions.of(this.policies);
  }

  /** Names in order, for reports. */
  names(): string[] {
    return this.policies.map((p) => p.name);
  }

  /**
   * Every policy with the view its istiods without a revision get, in order; with no policy
   * configured, one entry `(none)` that admits everything (as {@link admit} does).
   */
  views(): Array<{ readonly policy: string; readonly view: ClientView }> {
    if (this.policies.length === 0) return [{ policy: '(none)', view: this.view(undefined, '') }];
    return this.policies.map((p) => ({ policy: p.name, view: this.view(p, '') }));
  }

  admit(client: ClientIdentity): Admission {
    if (this.policies.length === 0)
      return { admitted: true, policy: '(none)', view: this.view(undefined, client.revision) };
    const policy = this.policies.find((p) => p.matches(client));
    if (policy === undefined) {
      return { admitted: false, reason: `no policy matches the client (${describeIdentity(client)})` };
    }
    if (policy.config.requireClientCert === true && client.sans.length === 0) {
      return {
        admitted: false,
        policy: policy.name,
        reason: `policy ${policy.name} requires a verified client certificate (${describeIdentity(client)})`,
      };
    }
    return { admitted: true, policy: policy.name, view: this.view(policy, client.revision) };
  }

  private view(policy: ClientPolicy | undefined, revision: string): ClientView {
    // Not kept here: the revision is the client's claim. The server's view registry shares one
    // object per view id among the connected clients and forgets it once they leave.
    return policyView(
      policy,
      revision,
      policy === undefined ? undefined : this.partitions?.view(policy, revision),
    );
  }
}
