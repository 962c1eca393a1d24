import type { SourceEvent } from '../core/source-event.js';
import type { ConfigSnapshot, HoldReason } from '../merge/config-snapshot.js';
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
}

/**
 * The one place lifecycle hooks become telemetry. Its methods have the shapes of the merge and
 * ADS hooks (the composition root forwards them one to one); each is synchronous, cheap and
 * never throws into the caller. It feeds the Prometheus metrics, the change tracker behind the
 * convergence histogram, and, when configured, the per-change traces.
 */
export class Telemetry {
  readonly metrics: Metrics;
  private readonly tracker: ChangeTracker;
  private readonly tracing: ChangeTracing | undefined;

  constructor(private readonly options: TelemetryOptions) {
    this.metrics = new Metrics(options);
    this.tracker = new ChangeTracker({
      kindOf: options.kindOf,
      ...(options.monotonicNow === undefined ? {} : { now: options.monotonicNow }),
    });
    this.tracing = options.tracing;
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

  onSnapshot(snapshot: ConfigSnapshot, buildMs: number): void {
    const { merged, changedKinds } = this.tracker.build(snapshot);
    this.metrics.onSnapshot(snapshot, changedKinds, buildMs);
    for (const m of merged) this.tracing?.merged(m, snapshot, buildMs);
  }

  onUnchanged(): void {
    for (const change of this.tracker.unchanged()) this.tracing?.unchanged(change);
  }

  onHeld(source: string, reason: HoldReason): void {
    this.metrics.onHeld(source, reason);
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

  onBadRequest(): void {
    this.metrics.onBadRequest();
  }

  /** `limit` is one of the ADS server's closed set of limit names. */
  onLimit(limit: string): void {
    this.metrics.onLimit(limit);
  }

  /** Ends open spans and exports buffered ones. */
  async shutdown(): Promise<void> {
    await this.tracing?.shutdown();
  }

  private typeLabel(typeUrl: string): string {
    return this.options.kindOf(typeUrl) ?? UNKNOWN_TYPE;
  }
}
