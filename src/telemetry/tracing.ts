import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  type Attributes,
  type Context,
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from '@opentelemetry/api';
import { parseTraceParent } from '@opentelemetry/core';
import type { Logger } from '../core/logger.js';
import { PACKAGE_ROOT } from '../core/paths.js';
import { truncateForLog } from '../core/truncate-for-log.js';
import type { SourceSnapshotEvent } from '../core/source-event.js';
import type { ConfigSnapshot } from '../merge/config-snapshot.js';
import type { CreditedChange, MergedChange, UpstreamChange } from './change-tracker.js';

/** Span names: fixed, so backends can group them; what varies goes in attributes. */
export const SPAN_RECEIVE = 'meshmux.source.receive';
export const SPAN_MERGE = 'meshmux.merge.snapshot';
export const SPAN_PUSH = 'meshmux.ads.push';

/** The part of an ADS client identity spans describe (structurally an ADS `ClientIdentity`). */
export interface TracedClient {
  readonly streamId: number;
  readonly nodeId: string;
  readonly peer: string;
}

/** The environment variables tracing reads (`process.env` in production). */
export type TracingEnv = Readonly<Record<string, string | undefined>>;

/**
 * One trace per upstream change, built from hook calls:
 *
 * - `meshmux.source.receive` (consumer): the source's state arriving at the merge, with its source,
 *   kinds, object count and upstream version; a child of the upstream's `traceparent` when it sent one;
 * - `meshmux.merge.snapshot`: its child, from arrival to the snapshot that carries the change;
 * - `meshmux.ads.push` (producer): one child of the merge span per client response carrying the
 *   change, ending at that client's ACK (or NACK, or disconnection, as an error).
 *
 * Spans are started with explicit parents and times, so no context manager is needed and nothing
 * global is registered. Callers must not let it throw: every method is cheap and total.
 */
export class ChangeTracing {
  private readonly receives = new WeakMap<UpstreamChange, Context>();
  private readonly merges = new WeakMap<UpstreamChange, Context>();
  /** Open push spans per `streamId|typeUrl`: at most one response per type awaits its ACK. */
  private readonly pushes = new Map<string, Span[]>();

  constructor(
    private readonly tracer: Tracer,
    private readonly onShutdown: () => Promise<void> = () => Promise.resolve(),
  ) {}

  /** A source's state reached the merge. */
  received(change: UpstreamChange, event: SourceSnapshotEvent): void {
    const parent = remoteParent(change.traceparent);
    const kinds = event.kinds ?? new Set(Array.from(event.resources, (r) => r.kind));
    const at = epochMs(change.arrivedAt);
    const span = this.tracer.startSpan(
      SPAN_RECEIVE,
      {
        kind: SpanKind.CONSUMER,
        startTime: at,
        attributes: {
          'meshmux.source': change.source,
          'meshmux.kind': [...kinds].sort(),
          'meshmux.count': change.objects,
          'meshmux.upstream.version': change.revision,
          'meshmux.errors': event.errors.length,
          'meshmux.warnings': event.warnings.length,
        },
      },
      parent,
    );
    span.end(at);
    this.receives.set(change, trace.setSpan(ROOT_CONTEXT, span));
  }

  /** A build settled a change; its merge span covers the wait and the build. */
  merged(merged: MergedChange, snapshot: ConfigSnapshot, buildMs: number): void {
    const parent = this.receives.get(merged.change);
    if (parent === undefined) return;
    const span = this.tracer.startSpan(
      SPAN_MERGE,
      {
        startTime: epochMs(merged.change.arrivedAt),
        attributes: {
          'meshmux.source': merged.change.source,
          'meshmux.snapshot.generation': snapshot.generation,
          'meshmux.snapshot.version': snapshot.version,
          'meshmux.kind': [...merged.kinds].sort(),
          'meshmux.merge.changed': merged.kinds.size > 0,
          'meshmux.merge.build_ms': buildMs,
          'meshmux.conflicts': snapshot.conflicts.length,
        },
      },
      parent,
    );
    span.end();
    if (merged.kinds.size > 0) this.merges.set(merged.change, trace.setSpan(ROOT_CONTEXT, span));
  }

  /** A build published nothing: the change altered nothing istiods see. */
  unchanged(change: UpstreamChange): void {
    const parent = this.receives.get(change);
    if (parent === undefined) return;
    this.tracer
      .startSpan(
        SPAN_MERGE,
        {
          startTime: epochMs(change.arrivedAt),
          attributes: { 'meshmux.source': change.source, 'meshmux.merge.changed': false },
        },
        parent,
      )
      .end();
  }

  /** A response carrying `changes` went to a client: one push span per change, open until the ACK. */
  pushed(
    changes: readonly CreditedChange[],
    client: TracedClient,
    typeUrl: string,
    version: string,
    bytes: number,
    resources: number,
  ): void {
    const key = pushKey(client, typeUrl);
    this.finish(key, { code: SpanStatusCode.ERROR, message: 'superseded before its ACK' }, {});
    const spans: Span[] = [];
    for (const { change, kind } of changes) {
      const parent = this.merges.get(change);
      if (parent === undefined) continue;
      spans.push(
        this.tracer.startSpan(
          SPAN_PUSH,
          {
            kind: SpanKind.PRODUCER,
            attributes: {
              'meshmux.source': change.source,
              'meshmux.kind': kind,
              'meshmux.type_url': typeUrl,
              'meshmux.version': version,
              'meshmux.client.node_id': truncateForLog(client.nodeId),
              'meshmux.client.stream_id': client.streamId,
              'meshmux.client.peer': client.peer,
              'meshmux.push.bytes': bytes,
              'meshmux.push.resources': resources,
            },
          },
          parent,
        ),
      );
    }
    if (spans.length > 0) this.pushes.set(key, spans);
  }

  /** The client ACKed the response: its push spans end. */
  acked(client: TracedClient, typeUrl: string, version: string, latencyMs: number): void {
    this.finish(
      pushKey(client, typeUrl),
      { code: SpanStatusCode.OK },
      { 'meshmux.ack.version': version, 'meshmux.ack.latency_ms': latencyMs },
    );
  }

  /** The client rejected the response: its push spans end as errors. */
  nacked(client: TracedClient, typeUrl: string, message: string): void {
    this.finish(
      pushKey(client, typeUrl),
      { code: SpanStatusCode.ERROR, message: `NACK: ${truncateForLog(message)}` },
      {},
    );
  }

  /** The client went away: every push span still open for it ends as an error. */
  disconnected(client: TracedClient, reason: string): void {
    const prefix = `${client.streamId}|`;
    for (const key of [...this.pushes.keys()]) {
      if (key.startsWith(prefix)) {
        this.finish(
          key,
          { code: SpanStatusCode.ERROR, message: `disconnected before its ACK: ${reason}` },
          {},
        );
      }
    }
  }

  /** Ends what is open and exports what is buffered. */
  async shutdown(): Promise<void> {
    for (const key of [...this.pushes.keys()]) {
      this.finish(key, { code: SpanStatusCode.ERROR, message: 'meshmux stopped before its ACK' }, {});
    }
    await this.onShutdown();
  }

  private finish(
    key: string,
    status: { code: SpanStatusCode; message?: string },
    attributes: Attributes,
  ): void {
    const spans = this.pushes.get(key);
    if (spans === undefined) return;
    this.pushes.delete(key);
    for (const span of spans) {
      span.setAttributes(attributes);
      span.setStatus(status);
      span.end();
    }
  }
}

function pushKey(client: TracedClient, typeUrl: string): string {
  return `${client.streamId}|${typeUrl}`;
}

/** `performance.now()` milliseconds as Unix milliseconds. */
function epochMs(monotonicMs: number): number {
  return performance.timeOrigin + monotonicMs;
}

/** The context of an upstream's W3C `traceparent`, or the root when there is none (or it is malformed). */
function remoteParent(traceparent: string | undefined): Context {
  if (traceparent === undefined) return ROOT_CONTEXT;
  const parsed = parseTraceParent(traceparent.trim());
  if (parsed === null) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, { ...parsed, isRemote: true });
}

/**
 * Whether meshmux exports traces: only when an OTLP endpoint is configured
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`), and not with
 * `OTEL_SDK_DISABLED=true` or an `OTEL_TRACES_EXPORTER` that does not name `otlp`. Everything else
 * is the OpenTelemetry SDK's to read (see {@link tracingFromEnv}).
 */
export function tracingEnabled(env: TracingEnv, log?: Logger): boolean {
  if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return false;
  const exporters = env['OTEL_TRACES_EXPORTER']?.split(',').map((s) => s.trim().toLowerCase());
  if (exporters !== undefined && exporters.some((e) => e !== '') && !exporters.includes('otlp')) {
    if (!exporters.includes('none')) {
      log?.warn(
        { exporters },
        'OTEL_TRACES_EXPORTER names no exporter meshmux has (only otlp): tracing is off',
      );
    }
    return false;
  }
  const endpoint = (name: string): boolean => (env[name]?.trim() ?? '') !== '';
  if (!endpoint('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') && !endpoint('OTEL_EXPORTER_OTLP_ENDPOINT'))
    return false;
  const protocol = env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'];
  if (protocol !== undefined && protocol.trim() !== 'http/json') {
    log?.warn(
      { protocol },
      'meshmux exports traces as OTLP/HTTP JSON only; the configured protocol is ignored',
    );
  }
  return true;
}

/**
 * Tracing as the environment configures it, or undefined when it is off ({@link tracingEnabled},
 * decided on `env`). The OpenTelemetry SDK reads the rest of the standard variables from the
 * process environment itself: the endpoint, headers, timeout and compression
 * (`OTEL_EXPORTER_OTLP_*`), the sampler (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`), batching
 * (`OTEL_BSP_*`) and the resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, over meshmux's
 * own service name and version). The provider is private to this meshmux (never registered
 * globally), so several instances can share a process.
 */
export async function tracingFromEnv(env: TracingEnv, log: Logger): Promise<ChangeTracing | undefined> {
  if (!tracingEnabled(env, log)) return undefined;
  // Loaded only when tracing is on: the SDK and its exporter are about 0.1 s of a start.
  const [{ OTLPTraceExporter }, resources, { BasicTracerProvider, BatchSpanProcessor }, conventions] =
    await Promise.all([
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/semantic-conventions'),
    ]);
  const { detectResources, envDetector, resourceFromAttributes } = resources;
  const { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } = conventions;
  diag.setLogger(
    {
      error: (message, ...args) => log.warn({ args }, `OpenTelemetry: ${message}`),
      warn: (message, ...args) => log.warn({ args }, `OpenTelemetry: ${message}`),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const resource = resourceFromAttributes({
    [ATTR_SERVICE_NAME]: 'meshmux',
    [ATTR_SERVICE_VERSION]: packageVersion(),
  }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  log.info(
    { endpoint: env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? env['OTEL_EXPORTER_OTLP_ENDPOINT'] },
    'tracing upstream changes over OTLP/HTTP',
  );
  return new ChangeTracing(provider.getTracer('meshmux', packageVersion()), () => provider.shutdown());
}

let version: string | undefined;

function packageVersion(): string {
  if (version === undefined) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
        version?: unknown;
      };
      version = typeof pkg.version === 'string' ? pkg.version : 'unknown';
    } catch {
      version = 'unknown';
    }
  }
  return version;
}
