import type { MeshmuxError } from '../core/errors.js';
import { componentLogger } from '../core/logger.js';
import type { SourceEvent } from '../core/source-event.js';
import type { AdsHooks } from '../downstream/ads-hooks.js';
import { describeIdentity, type ClientIdentity } from '../downstream/client-identity.js';
import { LogLineBudget } from '../core/log-line-budget.js';
import type { ConfigSnapshot, HoldReason } from '../merge/config-snapshot.js';
import type { MergeHooks } from '../merge/merge-engine.js';
import { ChangeTracker } from './change-tracker.js';
import { Metrics, UNKNOWN_TYPE, type MetricsOptions } from './metrics.js';
import type { ChangeTracing, TracedClient } from './tracing.js';

export interface TelemetryOptions extends MetricsOptions {
  /** The registry key of the kind a type URL carries (MeshConfig included); undefined when unknown. */
  readonly kindOf: (typeUrl: string) => string | undefined;
  /** Span export; absent means tracing is off. */
  readonly tracing?: ChangeTracing;
  /** Monotonic milliseconds for convergence and spans. Default `performance.now`. */
  readonly monotonicNow?: () => number;
  /** Runs `work` once, `delayMs` from now (the count of audit lines left out). Default: an unref'd timer. */
  readonly schedule?: (work: () => void, delayMs: number) => void;
}

/**
 * The one place lifecycle hooks become telemetry: it implements the merge's and the ADS server's
 * hook interfaces, so the composition root hands it to both. Each hook is synchronous, cheap and
 * never throws into the caller. It feeds the Prometheus metrics, the change tracker behind the
 * convergence histogram, the audit log of admissions and policy changes and, when configured,
 * the per-change traces.
 */
export class Telemetry implements MergeHooks, AdsHooks {
  readonly metrics: Metrics;
  private readonly tracker: ChangeTracker;
  private readonly tracing: ChangeTracing | undefined;
  private readonly audit = componentLogger('audit');
  /**
   * A client decides how often it is admitted or refused (a stream opened and reset in a loop,
   * under ever new node ids): the audit lines of each, over every stream, are bounded.
   */
  private readonly admissions: LogLineBudget;
  private readonly refusals: LogLineBudget;
  /** The snapshot built last, until it is published: what its metrics are set from. */
  private built: { snapshot: ConfigSnapshot; changedKinds: ReadonlySet<string>; buildMs: number } | undefined;

  constructor(private readonly options: TelemetryOptions) {
    this.metrics = new Metrics(options);
    this.tracker = new ChangeTracker({
      kindOf: options.kindOf,
      ...(options.monotonicNow === undefined ? {} : { now: options.monotonicNow }),
    });
    this.tracing = options.tracing;
    const now = options.monotonicNow ?? (() => performance.now());
    const schedule = options.schedule ?? ((work, delayMs) => setTimeout(work, delayMs).unref());
    this.admissions = new LogLineBudget(now, AUDIT_LINES, AUDIT_WINDOW_MS, {
      schedule,
      log: (leftOut) =>
        this.audit.info({ event: 'admit', notLogged: leftOut }, 'client admissions not logged'),
    });
    this.refusals = new LogLineBudget(now, AUDIT_LINES, AUDIT_WINDOW_MS, {
      schedule,
      log: (leftOut) =>
        this.audit.warn({ event: 'refuse', notLogged: leftOut }, 'client refusals not logged'),
    });
  }

  /** Whether spans are exported. */
  get tracingEnabled(): boolean {
    return this.tracing !== undefined;
  }

  // Merge hooks.

  onSourceEvent(source: string, event: SourceEvent): void {
    this.metrics.onSourceEvent(source, event);
    if (event.type !== 'snapshot') return;
    const change = this.tracker.arrive(source, event);
    this.tracing?.received(change, event);
  }

  onSnapshot(snapshot: ConfigSnapshot, _changedKinds: ReadonlySet<string>, buildMs: number): void {
    // Before the pushes: they are counted against the changes the tracker knows of.
    const { merged, changedKinds } = this.tracker.build(snapshot);
    for (const m of merged) this.tracing?.merged(m, snapshot, buildMs);
    this.built = { snapshot, changedKinds, buildMs };
  }

  onPublished(snapshot: ConfigSnapshot): void {
    // The gauges walk the sources and kinds: after the pushes, which they would only delay.
    const built = this.built;
    this.built = undefined;
    if (built?.snapshot === snapshot) this.metrics.onSnapshot(snapshot, built.changedKinds, built.buildMs);
  }

  onUnchanged(): void {
    for (const change of this.tracker.unchanged()) this.tracing?.unchanged(change);
  }

  onHeld(source: string, reason: HoldReason): void {
    this.metrics.onHeld(source, reason);
  }

  onServedUnkept(): void {
    this.metrics.onServedUnkept();
  }

  // ADS hooks.

  onConnect(client: TracedClient): void {
    this.tracker.connect(client);
    this.metrics.onConnect();
  }

  onDisconnect(client: TracedClient, reason: string): void {
    this.tracker.disconnect(client);
    this.tracing?.disconnected(client, reason);
    this.metrics.onDisconnect();
  }

  onPush(client: TracedClient, typeUrl: string, version: string, bytes: number, resources: number): void {
    const { changes, sinceBuildMs } = this.tracker.push(client, typeUrl, version);
    this.metrics.onPush(this.typeLabel(typeUrl), bytes, sinceBuildMs);
    this.tracing?.pushed(changes, client, typeUrl, version, bytes, resources);
  }

  onAck(client: TracedClient, typeUrl: string, version: string, latencyMs: number): void {
    const type = this.typeLabel(typeUrl);
    this.metrics.onAck(type, latencyMs);
    const outcome = this.tracker.ack(client, typeUrl, version);
    for (const { change } of outcome.changes) {
      this.metrics.onConverged(change.source, type, (outcome.now - change.arrivedAt) / 1000);
    }
    this.tracing?.acked(client, typeUrl, version, latencyMs);
  }

  onNack(client: TracedClient, typeUrl: string, _version: string, message: string): void {
    this.tracker.nack(client, typeUrl);
    this.metrics.onNack(this.typeLabel(typeUrl));
    this.tracing?.nacked(client, typeUrl, message);
  }

  onBadRequest(_client: ClientIdentity, _error: MeshmuxError): void {
    this.metrics.onBadRequest();
  }

  /** `limit` is one of the ADS server's closed set of limit names. */
  onLimit(_client: ClientIdentity, limit: string): void {
    this.metrics.onLimit(limit);
  }

  onAdmit(client: ClientIdentity, policy: string, view: string, first: boolean): void {
    const line = this.admissions.allow();
    if (!line.log) return;
    this.audit.info(
      {
        event: first ? 'admit' : 'reassign',
        policy,
        view,
        client: describeIdentity(client),
        ...(line.leftOut === 0 ? {} : { notLoggedBefore: line.leftOut }),
      },
      'client admitted',
    );
  }

  onRefuse(client: ClientIdentity, policy: string, reason: string): void {
    const line = this.refusals.allow();
    if (!line.log) return;
    this.audit.warn(
      {
        event: 'refuse',
        policy,
        client: describeIdentity(client),
        reason,
        ...(line.leftOut === 0 ? {} : { notLoggedBefore: line.leftOut }),
      },
      'client refused',
    );
  }

  /** The configuration's policies were replaced by a reload. */
  onPoliciesChanged(from: readonly string[], to: readonly string[]): void {
    this.audit.info({ event: 'policy-change', from, to }, 'policies changed');
  }

  /** A change of the policies began to be held (the most it takes from one istiod), or ended. */
  onPolicyChangeHeld(deletions: number | undefined): void {
    this.metrics.onPolicyChangeHeld(deletions);
  }

  /** Ends open spans and exports buffered ones. */
  async shutdown(): Promise<void> {
    await this.tracing?.shutdown();
  }

  private typeLabel(typeUrl: string): string {
    return this.options.kindOf(typeUrl) ?? UNKNOWN_TYPE;
  }
}

/** Audit lines of admissions, and apart of refusals, logged at most per window, over every stream. */
const AUDIT_LINES = 100;
const AUDIT_WINDOW_MS = 10_000;
