import { isDeepStrictEqual } from 'node:util';
import { shortDigest } from '../../core/content-digest.js';
import type { Logger } from '../../core/logger.js';
import type { ConfigSnapshot } from '../../merge/config-snapshot.js';
import type { PolicyConfig } from './client-policy.js';
import {
  type ClientHolding,
  judgePolicyChange,
  type PolicyGuardRules,
  type PolicyLoss,
} from './policy-guard.js';
import type { PolicySet } from './policy-set.js';

/** A change of the policies the guards hold, as reported. */
export interface HeldPolicies {
  readonly since: Date;
  /** The policies the held change would put in force, in order. */
  readonly policies: readonly string[];
  /** Per group of istiods, what applying it takes from them (the groups it holds for included). */
  readonly losses: readonly PolicyLoss[];
  /** Names the held policies: equal on every replica holding the same change. */
  readonly digest: string;
}

/** The policies in force, and the change held back, for the debug pages and `meshmux confirm`. */
export interface PolicyChangesReport {
  readonly inForce: readonly string[];
  readonly held?: HeldPolicies;
}

/** {@link PolicyChangesReport} as `/debug/policies` serves it, for the CLI and other readers. */
export interface PolicyChangesPage {
  readonly inForce: readonly string[];
  readonly held?: Omit<HeldPolicies, 'since'> & { readonly since: string };
}

/** What the running process gives the guard of its policies. */
export interface PolicyChangesOptions {
  readonly running: { readonly set: PolicySet; readonly configs: readonly PolicyConfig[] };
  readonly rules: PolicyGuardRules;
  /** The objects served now. */
  readonly snapshot: () => ConfigSnapshot;
  /** The istiods connected now, as the policies in force serve them. */
  readonly holdings: () => Iterable<ClientHolding>;
  /** Puts policies in force (the ADS server looks every stream up again). */
  readonly apply: (set: PolicySet, configs: readonly PolicyConfig[]) => void;
  /** The held change began, or ended (undefined). */
  readonly onHeld?: (held: HeldPolicies | undefined) => void;
  readonly log: Logger;
  readonly now?: () => Date;
}

/** Groups of istiods a log line names at most (the ones that lose most). */
const LOGGED_LOSSES = 20;

/** What became of a proposed change of the policies. */
export type PolicyChangeOutcome = 'unchanged' | 'applied' | 'held' | 'withdrawn';

/**
 * The policies in force and the guard over changing them. A change that would take from some
 * connected istiods more of what they hold than a source's guards let one update delete (a typo
 * in a namespace selector or a client match, a policy dropped) is held: the running policies keep
 * serving until the operator confirms it, `confirmAfter` passes, or the configuration names the
 * running policies again. Any other change applies at once.
 */
export class PolicyChanges {
  private inForce: { set: PolicySet; configs: readonly PolicyConfig[] };
  private held:
    | {
        readonly set: PolicySet;
        readonly configs: readonly PolicyConfig[];
        readonly report: HeldPolicies;
        timer?: NodeJS.Timeout | undefined;
      }
    | undefined;
  private rules: PolicyGuardRules;
  private readonly now: () => Date;

  constructor(private readonly options: PolicyChangesOptions) {
    this.inForce = options.running;
    this.rules = options.rules;
    this.now = options.now ?? (() => new Date());
  }

  /** The policies in force. */
  get set(): PolicySet {
    return this.inForce.set;
  }

  /** The configuration of the policies in force. */
  get configs(): readonly PolicyConfig[] {
    return this.inForce.configs;
  }

  /** New guards (a reload); a change held already waits under them from now on. */
  setRules(rules: PolicyGuardRules): void {
    if (isDeepStrictEqual(rules, this.rules)) return;
    this.rules = rules;
    if (this.held !== undefined) this.arm(this.held);
  }

  /**
   * Proposes `configs` (built as `set`) to replace the policies in force. `holdings` names the
   * istiods to judge it for when they are not the connected ones (a restart judges those of the
   * last run).
   */
  propose(
    set: PolicySet,
    configs: readonly PolicyConfig[],
    holdings?: Iterable<ClientHolding>,
  ): PolicyChangeOutcome {
    if (isDeepStrictEqual(configs, this.inForce.configs)) {
      if (this.held === undefined) return 'unchanged';
      this.options.log.warn(
        { policies: this.held.report.policies },
        'held change of the policies withdrawn: the configuration names the policies in force again',
      );
      this.drop();
      return 'withdrawn';
    }
    if (this.held !== undefined && isDeepStrictEqual(configs, this.held.configs)) return 'held';
    const judgement = judgePolicyChange(
      this.options.snapshot(),
      holdings ?? this.options.holdings(),
      set,
      this.rules,
    );
    if (!judgement.held) {
      if (this.held !== undefined) this.drop();
      this.put(set, configs, judgement.losses);
      return 'applied';
    }
    if (this.held !== undefined) this.drop();
    const report: HeldPolicies = {
      since: this.now(),
      policies: configs.map((c) => c.name),
      losses: judgement.losses,
      digest: shortDigest(JSON.stringify(configs), 16),
    };
    this.held = { set, configs, report };
    this.arm(this.held);
    this.options.log.error(
      {
        losses: judgement.losses.filter((l) => l.held !== undefined).slice(0, LOGGED_LOSSES),
        groups: judgement.losses.length,
        inForce: this.report().inForce,
      },
      'change of the policies held: it would withdraw from connected istiods more of what they hold than the guards allow; the running policies keep serving (meshmux confirm --policies applies it)',
    );
    this.options.onHeld?.(report);
    return 'held';
  }

  /** Applies the held change, if there is one. */
  confirm(): boolean {
    const held = this.held;
    if (held === undefined) return false;
    this.drop();
    this.options.log.warn({ policies: held.report.policies }, 'held change of the policies confirmed');
    this.put(held.set, held.configs, held.report.losses);
    return true;
  }

  /**
   * Applies the held change if `digest` names it (a confirmation made on another replica):
   * `differs` when the change held here is another one.
   */
  confirmHeld(digest: string): 'applied' | 'differs' | 'none' {
    if (this.held === undefined) return 'none';
    if (this.held.report.digest !== digest) return 'differs';
    this.confirm();
    return 'applied';
  }

  report(): PolicyChangesReport {
    return {
      inForce: this.inForce.configs.map((c) => c.name),
      ...(this.held === undefined ? {} : { held: this.held.report }),
    };
  }

  /** Stops the `confirmAfter` timer. */
  close(): void {
    if (this.held?.timer !== undefined) clearTimeout(this.held.timer);
  }

  private put(set: PolicySet, configs: readonly PolicyConfig[], losses: readonly PolicyLoss[]): void {
    this.inForce = { set, configs };
    const narrowed = losses.filter((l) => l.lost > 0).slice(0, LOGGED_LOSSES);
    if (narrowed.length > 0) this.options.log.info({ losses: narrowed }, 'policies applied');
    this.options.apply(set, configs);
  }

  private drop(): void {
    this.close();
    this.held = undefined;
    this.options.onHeld?.(undefined);
  }

  /** (Re)starts the `confirmAfter` timer of a held change, counted from when it was first held. */
  private arm(held: NonNullable<PolicyChanges['held']>): void {
    if (held.timer !== undefined) clearTimeout(held.timer);
    held.timer = undefined;
    const after = this.rules.confirmAfterMs;
    if (after === undefined) return;
    const wait = Math.max(0, held.report.since.getTime() + after - this.now().getTime());
    held.timer = setTimeout(() => {
      if (this.held !== held) return;
      this.options.log.warn(
        { policies: held.report.policies, confirmAfterMs: after },
        'held change of the policies applied: confirmAfter passed',
      );
      this.drop();
      this.put(held.set, held.configs, held.report.losses);
    }, wait);
    held.timer.unref();
  }
}
