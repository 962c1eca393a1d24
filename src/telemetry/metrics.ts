import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ConfigSnapshot } from '../merge/config-snapshot.js';

/** Turns lifecycle hooks into Prometheus metrics. Label sets are bounded: sources and kinds come from config and the registry. */
export class Metrics {
  readonly registry = new Registry();

  private readonly sourceUp = new Gauge({
    name: 'meshmux_source_up',
    help: '1 while a source is synced, 0 while connecting, stale or failing.',
    labelNames: ['source', 'type'] as const,
    registers: [this.registry],
  });
  private readonly sourceObjects = new Gauge({
    name: 'meshmux_source_objects',
    help: 'Objects a source currently contributes, per kind.',
    labelNames: ['source', 'kind'] as const,
    registers: [this.registry],
  });
  private readonly sourceRejected = new Gauge({
    name: 'meshmux_source_rejected_documents',
    help: 'Documents of a source currently rejected as invalid.',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  private readonly sourceRejections = new Gauge({
    name: 'meshmux_source_rejections',
    help: 'Objects a source sent that its access rules currently keep out, by reason.',
    labelNames: ['source', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly sourceHeld = new Gauge({
    name: 'meshmux_source_held_deletions',
    help: 'Deletions held back by the empty-state or mass-deletion guard (0 when nothing is held).',
    labelNames: ['source', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly conflicts = new Gauge({
    name: 'meshmux_conflicts',
    help: 'Current conflicts between objects, by type.',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  private readonly servedObjects = new Gauge({
    name: 'meshmux_served_objects',
    help: 'Objects in the merged snapshot, per kind.',
    labelNames: ['kind'] as const,
    registers: [this.registry],
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
  private readonly clients = new Gauge({
    name: 'meshmux_clients',
    help: 'Connected ADS streams.',
    registers: [this.registry],
  });
  private readonly pushes = new Counter({
    name: 'meshmux_pushes_total',
    help: 'Responses written to clients, per type URL.',
    labelNames: ['type_url'] as const,
    registers: [this.registry],
  });
  private readonly pushBytes = new Counter({
    name: 'meshmux_push_bytes_total',
    help: 'Bytes of responses written to clients.',
    registers: [this.registry],
  });
  private readonly acks = new Counter({
    name: 'meshmux_acks_total',
    help: 'Responses acknowledged by clients.',
    registers: [this.registry],
  });
  private readonly nacks = new Counter({
    name: 'meshmux_nacks_total',
    help: 'Responses rejected by clients.',
    labelNames: ['type_url'] as const,
    registers: [this.registry],
  });
  private readonly ackLatency = new Histogram({
    name: 'meshmux_ack_latency_seconds',
    help: 'From writing a response to its acknowledgement.',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
    registers: [this.registry],
  });
  private readonly badRequests = new Counter({
    name: 'meshmux_bad_requests_total',
    help: 'Client requests that could not be decoded.',
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics ?? true)
      collectDefaultMetrics({ register: this.registry, prefix: 'meshmux_' });
  }

  onSnapshot(snapshot: ConfigSnapshot, buildMs: number): void {
    this.snapshotBuilds.inc();
    this.snapshotBuildSeconds.observe(buildMs / 1000);
    this.servedObjects.reset();
    for (const [kind, k] of snapshot.kinds) this.servedObjects.set({ kind }, k.resources.length);
    this.sourceObjects.reset();
    this.sourceRejections.reset();
    this.sourceHeld.reset();
    this.conflicts.reset();
    for (const c of snapshot.conflicts) this.conflicts.inc({ type: c.type });
    for (const s of snapshot.sources) {
      for (const r of s.rejections) this.sourceRejections.inc({ source: s.name, reason: r.reason });
      if (s.held !== undefined)
        this.sourceHeld.set({ source: s.name, reason: s.held.reason }, s.held.deletions);
      this.sourceUp.set({ source: s.name, type: s.type }, s.state === 'synced' ? 1 : 0);
      this.sourceRejected.set({ source: s.name }, s.errors.length);
      for (const [kind, n] of Object.entries(s.counts)) this.sourceObjects.set({ source: s.name, kind }, n);
    }
  }

  onConnect(): void {
    this.clients.inc();
  }
  onDisconnect(): void {
    this.clients.dec();
  }
  onPush(typeUrl: string, bytes: number): void {
    this.pushes.inc({ type_url: typeUrl });
    this.pushBytes.inc(bytes);
  }
  onAck(latencyMs: number): void {
    this.acks.inc();
    this.ackLatency.observe(latencyMs / 1000);
  }
  onNack(typeUrl: string): void {
    this.nacks.inc({ type_url: typeUrl });
  }
  onBadRequest(): void {
    this.badRequests.inc();
  }
}
