import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from '@opentelemetry/api';
import { parseTraceParent } from '@opentelemetry/core';
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
