import {
  type Attributes,
  type Context,
  type HrTime,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from '@opentelemetry/api';
import { millisToHrTime, parseTraceParent } from '@opentelemetry/core';
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
 * - `meshmux.ads.push` (producer): one child of the merge span per client and type the change is
 *   sent to, opened by the first response carrying it and ending at that client's ACK (or NACK, or
 *   disconnection, as an error). A later response that carries it again while its span is open
 *   (a newer one before the ACK) keeps that span; after a NACK the change is not traced again to
 *   that client until it ACKs, so an istiod that NACKs everything costs one span per change, not
 *   one per change per response. A response opens at most {@link MAX_PUSH_SPANS} spans, for its
 *   newest changes; the rest are counted on them.
 *
 * Spans are started with explicit parents and times, so no context manager is needed and nothing
 * global is registered. Callers must not let it throw: every method is cheap and total.
 */
export class ChangeTracing {
  private readonly receives = new WeakMap<UpstreamChange, Context>();
  private readonly merges = new WeakMap<UpstreamChange, Context>();
  /** Open push spans per `streamId|typeUrl`, by change: at most one response per type awaits its ACK. */
  private readonly pushes = new Map<string, Map<UpstreamChange, Span>>();
  /** Per `streamId|typeUrl`, the changes given a push span since the client's last ACK. */
  private readonly traced = new Map<string, WeakSet<UpstreamChange>>();

  constructor(
    private readonly tracer: Tracer,
    private readonly onShutdown: () => Promise<void> = () => Promise.resolve(),
  ) {}

  /** A source's state reached the merge. */
  received(change: UpstreamChange, event: SourceSnapshotEvent): void {
    const parent = remoteParent(change.traceparent);
    const kinds = event.kinds ?? new Set(Array.from(event.resources, (r) => r.kind));
    // One time value for both ends.
    const at = hrTimeAt(change.arrivedAt);
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
        startTime: hrTimeAt(merged.change.arrivedAt),
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
    span.end(hrTimeAt(performance.now()));
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
          startTime: hrTimeAt(change.arrivedAt),
          attributes: { 'meshmux.source': change.source, 'meshmux.merge.changed': false },
        },
        parent,
      )
      .end(hrTimeAt(performance.now()));
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
    const open = this.pushes.get(key) ?? new Map<UpstreamChange, Span>();
    this.pushes.delete(key);
    let traced = this.traced.get(key);
    if (traced === undefined) this.traced.set(key, (traced = new WeakSet()));
    const response = {
      'meshmux.version': version,
      'meshmux.push.bytes': bytes,
      'meshmux.push.resources': resources,
    };
    const next = new Map<UpstreamChange, Span>();
    const fresh: CreditedChange[] = [];
    for (const credited of changes) {
      const carried = open.get(credited.change);
      if (carried !== undefined) {
        // Sent again before its ACK: the span goes on, now awaiting this response's ACK.
        open.delete(credited.change);
        carried.setAttributes(response);
        next.set(credited.change, carried);
      } else if (!traced.has(credited.change) && this.merges.has(credited.change)) {
        fresh.push(credited);
      }
    }
    for (const span of open.values()) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'superseded before its ACK' });
      span.end();
    }
    const untraced = Math.max(0, fresh.length - MAX_PUSH_SPANS);
    for (const [i, { change, kind }] of fresh.entries()) {
      traced.add(change);
      const parent = this.merges.get(change);
      if (i < untraced || parent === undefined) continue;
      const span = this.tracer.startSpan(
        SPAN_PUSH,
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            'meshmux.source': change.source,
            'meshmux.kind': kind,
            'meshmux.type_url': typeUrl,
            'meshmux.client.node_id': truncateForLog(client.nodeId),
            'meshmux.client.stream_id': client.streamId,
            'meshmux.client.peer': client.peer,
            'meshmux.push.untraced_changes': untraced,
            ...response,
          },
        },
        parent,
      );
      next.set(change, span);
    }
    if (next.size > 0) this.pushes.set(key, next);
  }

  /** The client ACKed the response: its push spans end. */
  acked(client: TracedClient, typeUrl: string, version: string, latencyMs: number): void {
    // What the ACK completes is never credited to this client again.
    this.traced.delete(pushKey(client, typeUrl));
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
    for (const key of [...this.traced.keys()]) {
      if (key.startsWith(prefix)) this.traced.delete(key);
    }
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
    this.traced.clear();
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
    for (const span of spans.values()) {
      span.setAttributes(attributes);
      span.setStatus(status);
      span.end();
    }
  }
}

/** Push spans one response opens at most: its newest changes; the rest are counted on them. */
export const MAX_PUSH_SPANS = 16;

function pushKey(client: TracedClient, typeUrl: string): string {
  return `${client.streamId}|${typeUrl}`;
}

/**
 * `performance.now()` milliseconds as a Unix time. Spans given a start time end at one given
 * the same way: left to itself, the SDK ends them at `Date.now()`, whole milliseconds, which
 * can come before a start within the same millisecond ("Inconsistent start and end time").
 */
function hrTimeAt(monotonicMs: number): HrTime {
  return millisToHrTime(performance.timeOrigin + monotonicMs);
}

/** The context of an upstream's W3C `traceparent`, or the root when there is none (or it is malformed). */
function remoteParent(traceparent: string | undefined): Context {
  if (traceparent === undefined) return ROOT_CONTEXT;
  const parsed = parseTraceParent(traceparent.trim());
  if (parsed === null) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, { ...parsed, isRemote: true });
}
