import type { RefusalReason } from '../http/admin-guard.js';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { compareByName, type ConfigResource } from '../core/resource.js';
import type { SourceEvent, SourceState } from '../core/source-event.js';
import type { ConfigSnapshot, HoldReason, KindSnapshot, SourceReport } from '../merge/config-snapshot.js';
import { changesBetween } from '../merge/kind-changes.js';
import { droppedLogLines } from '../core/logger.js';
import { MESHMUX_VERSION } from '../core/version.js';

const SOURCE_STATES: readonly SourceState[] = ['connecting', 'restored', 'synced', 'stale', 'failing'];

/** The `type` label of a response whose type URL is not a kind meshmux serves. */
export const UNKNOWN_TYPE = 'unknown';

export interface MetricsOptions {
  /** Process, heap, GC and event-loop metrics (prom-client defaults). Default true. */
  readonly processMetrics?: boolean;
  /** The policy and view of every connected client, read at scrape time. */
  readonly clients?: () => Iterable<{ readonly policy: string; readonly view: string }>;
  /** Distinct views labelled; the rest are summed into `view="other"`. Default 50. */
  readonly maxViews?: number;
  /** Wall clock in milliseconds, for staleness. Default `Date.now`. */
  readonly now?: () => number;
}

/**
 * Prometheus metrics of meshmux, all prefixed `meshmux_`. Fed by the telemetry hooks only; the
 * gauges of what a snapshot holds (its sources' reports, its objects and conflicts) are set from
 * the last snapshot at scrape time, as are the time-dependent ones. Every label set is bounded:
 * `source` comes from the configuration, `kind`/`type` from the kind registry (anything else is
 * `unknown`), `policy` from the configured policies, `view` is capped (a view embeds the revision
 * a client declares), and `reason`, `code`, `state` and conflict `type` come from closed enums.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly now: () => number;
  private latest: ConfigSnapshot | undefined;

  // Sources.
  private readonly sourceUp = new Gauge({
    name: 'meshmux_source_up',
    help: '1 while a source holds a current view of its upstream (synced), 0 while connecting, stale or failing.',
    labelNames: ['source', 'type'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceUp, (g, s) =>
        g.set({ source: s.name, type: s.type }, s.state === 'synced' ? 1 : 0),
      ),
  });
  private readonly sourceSynced = new Gauge({
    name: 'meshmux_source_synced',
    help: '1 once a source has delivered one complete state since start.',
    labelNames: ['source'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceSynced, (g, s) => g.set({ source: s.name }, s.everSynced ? 1 : 0)),
  });
  private readonly sourceState = new Gauge({
    name: 'meshmux_source_state',
    help: 'The state of a source: 1 for the current state, 0 for the others.',
    labelNames: ['source', 'state'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceState, (g, s) => {
        for (const state of SOURCE_STATES) g.set({ source: s.name, state }, s.state === state ? 1 : 0);
      }),
  });
  private readonly sourceStaleSeconds = new Gauge({
    name: 'meshmux_source_stale_seconds',
    help: 'How long a source has been stale (its last good state still served); 0 when it is not.',
    labelNames: ['source'] as const,
    registers: [this.registry],
    collect: (): void => this.collectStaleness(),
  });
  private readonly sourceLastSync = new Gauge({
    name: 'meshmux_source_last_sync_timestamp_seconds',
    help: 'When a source last delivered a complete state (Unix time).',
    labelNames: ['source'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceLastSync, (g, s) => {
        if (s.lastSyncTime !== undefined) g.set({ source: s.name }, s.lastSyncTime.getTime() / 1000);
      }),
  });
  private readonly sourceObjects = new Gauge({
    name: 'meshmux_source_objects',
    help: 'Objects a source currently contributes, per kind.',
    labelNames: ['source', 'kind'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceObjects, (g, s) => {
        for (const [kind, n] of Object.entries(s.counts)) g.set({ source: s.name, kind }, n);
      }),
  });
  private readonly sourceUpdates = new Counter({
    name: 'meshmux_source_updates_total',
    help: 'States (snapshots) a source delivered.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  private readonly sourceErrors = new Counter({
    name: 'meshmux_source_errors_total',
    help: 'Failures a source reported (transport, decode, ...), by error code.',
    labelNames: ['source', 'code'] as const,
    registers: [this.registry],
  });
  private readonly sourceRejected = new Gauge({
    name: 'meshmux_source_rejected_documents',
    help: 'Documents of a source currently rejected as invalid, by error code.',
    labelNames: ['source', 'code'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceRejected, (g, s) => {
        for (const [code, n] of countBy(s.errors, (e) => e.code)) g.set({ source: s.name, code }, n);
      }),
  });
  private readonly sourceRejections = new Gauge({
    name: 'meshmux_source_rejections',
    help: 'Objects a source sent that its access rules currently keep out, by reason.',
    labelNames: ['source', 'reason'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceRejections, (g, s) => {
        for (const [reason, n] of countBy(s.rejections, (r) => r.reason))
          g.set({ source: s.name, reason }, n);
      }),
  });
  private readonly sourceHeld = new Gauge({
    name: 'meshmux_source_held_deletions',
    help: 'Deletions held back by the empty-state or mass-deletion guard (0 when nothing is held).',
    labelNames: ['source', 'reason'] as const,
    registers: [this.registry],
    collect: (): void =>
      this.perSource(this.sourceHeld, (g, s) => {
        if (s.held !== undefined) g.set({ source: s.name, reason: s.held.reason }, s.held.deletions);
      }),
  });
  private readonly policyHeld = new Gauge({
    name: 'meshmux_policy_change_held_deletions',
    help: 'Objects a held change of the policies would take from the istiods it narrows most (0 when none is held).',
    registers: [this.registry],
  });
  private readonly policyHolds = new Counter({
    name: 'meshmux_policy_change_holds_total',
    help: 'Changes of the policies the guard started holding back.',
    registers: [this.registry],
  });
  private readonly sourceHolds = new Counter({
    name: 'meshmux_source_holds_total',
    help: 'Updates a guard started holding back, by reason.',
    labelNames: ['source', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly servedUnkept = new Counter({
    name: 'meshmux_state_served_unkept_total',
    help: 'Snapshots served before the state store kept the changes in them (it took longer than state.keepWait).',
    registers: [this.registry],
  });

  // Merge.
  private readonly conflicts = new Gauge({
    name: 'meshmux_conflicts',
    help: 'Current conflicts between objects, by type.',
    labelNames: ['type'] as const,
    registers: [this.registry],
    collect: (): void => this.collectConflicts(),
  });
  private readonly servedObjects = new Gauge({
    name: 'meshmux_served_objects',
    help: 'Objects in the merged snapshot, per kind.',
    labelNames: ['kind'] as const,
    registers: [this.registry],
    collect: (): void => this.collectServed(),
  });
  private readonly snapshotGeneration = new Gauge({
    name: 'meshmux_merge_generation',
    help: 'Generation of the snapshot being served.',
    registers: [this.registry],
    collect: (): void => this.snapshotGeneration.set(this.latest?.generation ?? 0),
  });
  private readonly snapshotBuilds = new Counter({
    name: 'meshmux_merge_snapshots_total',
    help: 'Merged snapshots built.',
    registers: [this.registry],
  });
  private readonly snapshotBuildSeconds = new Histogram({
    name: 'meshmux_merge_build_seconds',
    help: 'Time to build one merged snapshot.',
    buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  });
  private readonly batchKinds = new Histogram({
    name: 'meshmux_merge_batch_kinds',
    help: 'Kinds whose served content changed in one snapshot build.',
    buckets: [0, 1, 2, 3, 5, 8, 13, 21],
    registers: [this.registry],
  });
  private readonly batchObjects = new Histogram({
    name: 'meshmux_merge_batch_objects',
    help: 'Objects created, changed or deleted in one snapshot build.',
    buckets: [0, 1, 2, 5, 10, 50, 100, 500, 1000, 5000, 10000, 50000],
    registers: [this.registry],
  });

  // Downstream.
  private readonly clients = new Gauge({
    name: 'meshmux_clients',
    help: 'Connected ADS streams (istiods), per policy and view.',
    labelNames: ['policy', 'view'] as const,
    registers: [this.registry],
    collect: (): void => this.collectClients(),
  });
  private readonly connections = new Counter({
    name: 'meshmux_client_connections_total',
    help: 'ADS streams opened.',
    registers: [this.registry],
  });
  private readonly disconnections = new Counter({
    name: 'meshmux_client_disconnections_total',
    help: 'ADS streams closed.',
    registers: [this.registry],
  });
  private readonly adminRefusals = new Counter({
    name: 'meshmux_admin_requests_refused_total',
    help: 'Requests to the admin listener refused, by reason (token, host, content-type, origin, identity-claim).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  private readonly pushes = new Counter({
    name: 'meshmux_pushes_total',
    help: 'Responses written to clients, per kind.',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  private readonly pushBytes = new Counter({
    name: 'meshmux_push_bytes_total',
    help: 'Bytes of responses written to clients, per kind.',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  private readonly pushSeconds = new Histogram({
    name: 'meshmux_push_duration_seconds',
    help: 'From a snapshot build to a response carrying it being written to a client (queueing behind the previous ACK included).',
    labelNames: ['type'] as const,
    buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [this.registry],
  });
  private readonly acks = new Counter({
    name: 'meshmux_acks_total',
    help: 'Responses acknowledged by clients, per kind.',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  private readonly nacks = new Counter({
    name: 'meshmux_nacks_total',
    help: 'Responses rejected by clients, per kind.',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  private readonly ackLatency = new Histogram({
    name: 'meshmux_ack_latency_seconds',
    help: 'From writing a response to its acknowledgement.',
    labelNames: ['type'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
    registers: [this.registry],
  });
  private readonly badRequests = new Counter({
    name: 'meshmux_bad_requests_total',
    help: 'Client requests that could not be decoded.',
    registers: [this.registry],
  });
  private readonly sendTimeouts = new Counter({
    name: 'meshmux_send_timeouts_total',
    help: 'ADS streams closed with UNAVAILABLE because their client did not read a response within server.sendTimeout.',
    registers: [this.registry],
  });
  private readonly limitRefusals = new Counter({
    name: 'meshmux_client_limit_refusals_total',
    help: 'Clients refused at admission for going over a server limit (max-views, types-per-stream, node-id-length, metadata-size, type-url-length).',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });
  private readonly convergence = new Histogram({
    name: 'meshmux_convergence_seconds',
    help: 'From a source delivering a change to each connected istiod acknowledging a version that contains it.',
    labelNames: ['source', 'type'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });

  constructor(private readonly options: MetricsOptions = {}) {
    this.now = options.now ?? Date.now;
    new Gauge({
      name: 'meshmux_build_info',
      help: 'Always 1; the labels say which meshmux and which Node.js run.',
      labelNames: ['version', 'node'] as const,
      registers: [this.registry],
    }).set({ version: MESHMUX_VERSION, node: process.versions.node }, 1);
    let logLinesCounted = 0;
    const logLinesDropped: Counter = new Counter({
      name: 'meshmux_log_lines_dropped_total',
      help: 'Log lines dropped because the log output (a pipe whose reader stopped) did not take them.',
      registers: [this.registry],
      collect: (): void => {
        const total = droppedLogLines();
        if (total > logLinesCounted) logLinesDropped.inc(total - logLinesCounted);
        logLinesCounted = total;
      },
    });
    if (options.processMetrics ?? true) {
      // Includes meshmux_nodejs_eventloop_lag_* (sampled with monitorEventLoopDelay), heap, GC and fds.
      collectDefaultMetrics({ register: this.registry, prefix: 'meshmux_' });
      // Gauges named like counters (promtool rejects them); the per-type gauges beside them sum to the same.
      for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) {
        this.registry.removeSingleMetric(`meshmux_nodejs_${name}`);
      }
    }
  }

  /** A source event reached the merge. */
  onSourceEvent(source: string, event: SourceEvent): void {
    if (event.type === 'snapshot') this.sourceUpdates.inc({ source });
    else if (event.error !== undefined) this.sourceErrors.inc({ source, code: event.error.code });
  }

  /** A snapshot was served before the store kept its changes. */
  onServedUnkept(): void {
    this.servedUnkept.inc();
  }

  /** A guard started holding a source's update. */
  onHeld(source: string, reason: HoldReason): void {
    this.sourceHolds.inc({ source, reason });
  }

  /** A change of the policies began to be held (`deletions`: the most it takes from one istiod), or ended. */
  onPolicyChangeHeld(deletions: number | undefined): void {
    this.policyHeld.set(deletions ?? 0);
    if (deletions !== undefined) this.policyHolds.inc();
  }

  /**
   * A snapshot was published. `changedKinds` are the kinds whose served version changed since the
   * previous one.
   */
  onSnapshot(snapshot: ConfigSnapshot, changedKinds: ReadonlySet<string>, buildMs: number): void {
    const previous = this.latest;
    this.latest = snapshot;
    this.snapshotBuilds.inc();
    this.snapshotBuildSeconds.observe(buildMs / 1000);
    this.batchKinds.observe(changedKinds.size);
    let objects = 0;
    for (const kind of changedKinds) {
      objects += changedObjects(previous?.kinds.get(kind), snapshot.kinds.get(kind));
    }
    this.batchObjects.observe(objects);
  }

  onConnect(): void {
    this.connections.inc();
  }

  onDisconnect(): void {
    this.disconnections.inc();
  }

  /** The admin listener refused a request. */
  onAdminRefused(reason: RefusalReason): void {
    this.adminRefusals.inc({ reason });
  }

  /** A response went out; `sinceBuildMs` is set when it follows a build made while the client was connected. */
  onPush(type: string, bytes: number, sinceBuildMs: number | undefined): void {
    this.pushes.inc({ type });
    this.pushBytes.inc({ type }, bytes);
    if (sinceBuildMs !== undefined) this.pushSeconds.observe({ type }, sinceBuildMs / 1000);
  }

  onAck(type: string, latencyMs: number): void {
    this.acks.inc({ type });
    this.ackLatency.observe({ type }, latencyMs / 1000);
  }

  onNack(type: string): void {
    this.nacks.inc({ type });
  }

  onBadRequest(): void {
    this.badRequests.inc();
  }

  /** A client hit a limit: closed by the send deadline, or refused at admission. */
  onLimit(limit: string): void {
    if (limit === 'send-timeout') this.sendTimeouts.inc();
    else this.limitRefusals.inc({ limit });
  }

  /** A client acknowledged a version containing a change `source` delivered `seconds` ago. */
  onConverged(source: string, type: string, seconds: number): void {
    this.convergence.observe({ source, type }, seconds);
  }

  /**
   * Sets `gauge` anew from the last snapshot's source reports, at scrape time: snapshots (one per
   * change under churn) set no gauge, and a source a reload removed leaves every gauge.
   */
  private perSource<L extends string>(gauge: Gauge<L>, fill: (g: Gauge<L>, s: SourceReport) => void): void {
    gauge.reset();
    for (const s of this.latest?.sources ?? []) fill(gauge, s);
  }

  private collectServed(): void {
    this.servedObjects.reset();
    for (const [kind, k] of this.latest?.kinds ?? [])
      this.servedObjects.set({ kind }, (k.list ?? k.resources).length);
  }

  private collectConflicts(): void {
    this.conflicts.reset();
    for (const [type, n] of countBy(this.latest?.conflicts ?? [], (c) => c.type))
      this.conflicts.set({ type }, n);
  }

  private collectStaleness(): void {
    this.sourceStaleSeconds.reset();
    for (const s of this.latest?.sources ?? []) {
      const since = s.staleSince?.getTime();
      this.sourceStaleSeconds.set(
        { source: s.name },
        since === undefined ? 0 : Math.max(0, (this.now() - since) / 1000),
      );
    }
  }

  private collectClients(): void {
    this.clients.reset();
    const counts = new Map<string, { policy: string; view: string; n: number }>();
    for (const { policy, view } of this.options.clients?.() ?? []) {
      const key = `${policy}\n${view}`;
      const entry = counts.get(key) ?? { policy, view, n: 0 };
      entry.n++;
      counts.set(key, entry);
    }
    const maxViews = this.options.maxViews ?? 50;
    [...counts.values()]
      .sort((a, b) => b.n - a.n)
      .forEach((e, i) => this.clients.inc({ policy: e.policy, view: i < maxViews ? e.view : 'other' }, e.n));
  }
}

/**
 * Objects created, changed or deleted between two states of a kind: a replaced object counts once,
 * and not at all when its new instance has the same content version.
 */
export function changedObjects(before: KindSnapshot | undefined, after: KindSnapshot | undefined): number {
  const { removed, added } = changesBetween(before, after);
  let changed = removed.length + added.length;
  if (removed.length === 0 || added.length === 0) return changed;
  let i = 0;
  for (let k = 0; k < added.length; k++) {
    const y = added[k] as ConfigResource;
    while (i < removed.length && compareByName(removed[i] as ConfigResource, y) < 0) i++;
    const x = removed[i];
    if (x === undefined || compareByName(x, y) !== 0) continue;
    // One object replaced: counted once, or not at all if its content is the same.
    changed -= x.version === y.version ? 2 : 1;
    i++;
  }
  return changed;
}

/** How many items of `items` have each key. */
function countBy<T>(items: readonly T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) {
    const k = key(item);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return counts;
}
