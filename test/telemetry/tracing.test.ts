import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import {
  ChangeTracing,
  MAX_PUSH_SPANS,
  SPAN_MERGE,
  SPAN_PUSH,
  SPAN_RECEIVE,
} from '../../src/telemetry/tracing.js';
import { tracingEnabled } from '../../src/telemetry/tracing-env.js';
import { DR, DR_URL, startRig, state, VS, VS_URL, type Rig } from '../support/telemetry-rig.js';

const UPSTREAM_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const UPSTREAM_SPAN = '00f067aa0ba902b7';

function traced(): { rig: Rig; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracing = new ChangeTracing(provider.getTracer('test'), () => provider.shutdown());
  return { rig: startRig(['git', 'zk'], { tracing }), exporter };
}

const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;
const named = (spans: readonly ReadableSpan[], name: string): ReadableSpan[] =>
  spans.filter((s) => s.name === name);

describe('change tracing', () => {
  const rigs: Rig[] = [];
  after(() => rigs.forEach((r) => r.stop()));

  it('traces a change from receipt through the merge to each client ACK, continuing the upstream trace', async () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    const a = rig.client(1);
    const b = rig.client(2);
    rig.telemetry.onConnect(a);
    rig.telemetry.onConnect(b);
    const snapshot = await rig.send(
      'git',
      state(['reviews', 'ratings'], {
        revision: 'c0ffee',
        dr: ['reviews'],
        traceparent: `00-${UPSTREAM_TRACE}-${UPSTREAM_SPAN}-01`,
      }),
    );
    const vs = snapshot.kinds.get(VS)?.version ?? '';
    const dr = snapshot.kinds.get(DR)?.version ?? '';
    for (const c of [a, b]) {
      rig.telemetry.onPush(c, VS_URL, vs, 300, 2);
      rig.telemetry.onPush(c, DR_URL, dr, 100, 1);
    }
    assert.equal(
      named(exporter.getFinishedSpans(), SPAN_PUSH).length,
      0,
      'push spans stay open until the ACK',
    );
    rig.telemetry.onAck(a, VS_URL, vs, 12);
    rig.telemetry.onAck(a, DR_URL, dr, 12);
    rig.telemetry.onAck(b, VS_URL, vs, 15);
    rig.telemetry.onNack(b, DR_URL, dr, 'invalid host');

    const spans = exporter.getFinishedSpans();
    const [receive, ...moreReceives] = named(spans, SPAN_RECEIVE);
    assert.ok(receive);
    assert.equal(moreReceives.length, 0);
    assert.equal(receive.spanContext().traceId, UPSTREAM_TRACE, 'the upstream trace continues');
    assert.equal(parentOf(receive), UPSTREAM_SPAN);
    assert.equal(receive.kind, SpanKind.CONSUMER);
    assert.deepEqual(receive.attributes, {
      'meshmux.source': 'git',
      'meshmux.kind': [DR, VS],
      'meshmux.count': 3,
      'meshmux.upstream.version': 'c0ffee',
      'meshmux.errors': 0,
      'meshmux.warnings': 0,
    });
    const [merge] = named(spans, SPAN_MERGE);
    assert.ok(merge);
    assert.equal(parentOf(merge), receive.spanContext().spanId);
    assert.equal(merge.attributes['meshmux.snapshot.generation'], snapshot.generation);
    assert.deepEqual(merge.attributes['meshmux.kind'], [DR, VS]);
    const pushes = named(spans, SPAN_PUSH);
    assert.equal(pushes.length, 4, 'one per client and type');
    for (const p of pushes) {
      assert.equal(parentOf(p), merge.spanContext().spanId);
      assert.equal(p.spanContext().traceId, UPSTREAM_TRACE);
      assert.equal(p.kind, SpanKind.PRODUCER);
    }
    const nacked = pushes.find(
      (p) => p.attributes['meshmux.client.stream_id'] === 2 && p.attributes['meshmux.kind'] === DR,
    );
    assert.equal(nacked?.status.code, SpanStatusCode.ERROR);
    assert.match(nacked?.status.message ?? '', /NACK: invalid host/);
    const acked = pushes.find(
      (p) => p.attributes['meshmux.client.stream_id'] === 1 && p.attributes['meshmux.kind'] === VS,
    );
    assert.equal(acked?.status.code, SpanStatusCode.OK);
    assert.equal(acked?.attributes['meshmux.ack.version'], vs);
    assert.equal(acked?.attributes['meshmux.client.node_id'], a.nodeId);
  });

  it('starts a new trace per change when the upstream sends no trace context', async () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    await rig.send('git', state(['a']));
    await rig.send('zk', state(['z'], { traceparent: 'not-a-traceparent' }));
    const receives = named(exporter.getFinishedSpans(), SPAN_RECEIVE);
    assert.equal(receives.length, 2);
    assert.notEqual(receives[0]?.spanContext().traceId, receives[1]?.spanContext().traceId);
    for (const r of receives) assert.equal(parentOf(r), undefined, 'a root span');
  });

  it('closes the trace of a change that altered nothing istiods see at its merge', async () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    await rig.send('zk', state(['z']));
    await rig.send('git', state(['a'], { revision: 'r1' }));
    await rig.send('git', state(['a'], { revision: 'r2' }));
    const merges = named(exporter.getFinishedSpans(), SPAN_MERGE);
    assert.deepEqual(
      merges.map((m) => m.attributes['meshmux.merge.changed']),
      [true, true, false],
    );
    assert.deepEqual(merges[2]?.attributes['meshmux.kind'], []);
  });

  it('closes the trace of a change when the merge publishes nothing at all', () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    rig.telemetry.onSourceEvent('git', state(['a']));
    rig.telemetry.onUnchanged();
    const [merge] = named(exporter.getFinishedSpans(), SPAN_MERGE);
    assert.ok(merge);
    assert.equal(merge.attributes['meshmux.merge.changed'], false);
    assert.equal(parentOf(merge), named(exporter.getFinishedSpans(), SPAN_RECEIVE)[0]?.spanContext().spanId);
  });

  it('keeps the push span of a change sent again before its ACK open, and ends it at that ACK', async () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    const a = rig.client(1);
    rig.telemetry.onConnect(a);
    const first = await rig.send('git', state(['a']));
    rig.telemetry.onPush(a, VS_URL, first.kinds.get(VS)?.version ?? '', 10, 1);
    const second = await rig.send('git', state(['a', 'b']));
    const version = second.kinds.get(VS)?.version ?? '';
    rig.telemetry.onPush(a, VS_URL, version, 20, 2);
    rig.telemetry.onAck(a, VS_URL, version, 5);
    const pushes = named(exporter.getFinishedSpans(), SPAN_PUSH);
    assert.deepEqual(
      pushes.map((p) => [p.status.code, p.attributes['meshmux.version']]),
      [
        [SpanStatusCode.OK, version],
        [SpanStatusCode.OK, version],
      ],
    );
  });

  it('traces a change NACKed once, not again with every later response to that client', async () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    const a = rig.client(1);
    rig.telemetry.onConnect(a);
    let names: string[] = [];
    for (let i = 0; i < 5; i++) {
      names = [...names, `vs-${i}`];
      const snapshot = await rig.send('git', state(names));
      const version = snapshot.kinds.get(VS)?.version ?? '';
      rig.telemetry.onPush(a, VS_URL, version, 10, names.length);
      rig.telemetry.onNack(a, VS_URL, version, 'refused field');
    }
    const pushes = named(exporter.getFinishedSpans(), SPAN_PUSH);
    // One per change (each response carried every change so far: 15 before).
    assert.equal(pushes.length, 5);
    assert.ok(pushes.every((p) => p.status.code === SpanStatusCode.ERROR));
  });

  it('opens at most 16 push spans for one response, for its newest changes, counting the rest', async () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    const a = rig.client(1);
    rig.telemetry.onConnect(a);
    let names: string[] = [];
    let version = '';
    for (let i = 0; i < 20; i++) {
      names = [...names, `vs-${i}`];
      version = (await rig.send('git', state(names))).kinds.get(VS)?.version ?? '';
    }
    rig.telemetry.onPush(a, VS_URL, version, 10, names.length);
    rig.telemetry.onAck(a, VS_URL, version, 5);
    const pushes = named(exporter.getFinishedSpans(), SPAN_PUSH);
    assert.equal(pushes.length, MAX_PUSH_SPANS);
    assert.ok(pushes.every((p) => p.attributes['meshmux.push.untraced_changes'] === 20 - MAX_PUSH_SPANS));
  });

  it('ends the open push spans of a client that disconnects, as errors', async () => {
    const { rig, exporter } = traced();
    rigs.push(rig);
    const a = rig.client(1);
    rig.telemetry.onConnect(a);
    const snapshot = await rig.send('git', state(['a']));
    rig.telemetry.onPush(a, VS_URL, snapshot.kinds.get(VS)?.version ?? '', 10, 1);
    rig.telemetry.onDisconnect(a, 'cancelled');
    const [push] = named(exporter.getFinishedSpans(), SPAN_PUSH);
    assert.equal(push?.status.code, SpanStatusCode.ERROR);
    assert.match(push?.status.message ?? '', /disconnected before its ACK: cancelled/);
  });
});

describe('whether tracing is on, from OTEL_* variables', () => {
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };

  it('is off unless an OTLP endpoint is configured', () => {
    assert.equal(tracingEnabled({}), false);
    assert.equal(tracingEnabled({ OTEL_SERVICE_NAME: 'x' }), false);
    assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), false);
    assert.equal(tracingEnabled(endpoint), true);
    assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9999/custom' }), true);
  });

  it('stays off when the SDK is disabled or another exporter is chosen', () => {
    assert.equal(tracingEnabled({ ...endpoint, OTEL_SDK_DISABLED: 'true' }), false);
    assert.equal(tracingEnabled({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }), false);
    assert.equal(tracingEnabled({ ...endpoint, OTEL_TRACES_EXPORTER: 'zipkin' }), false);
    assert.equal(tracingEnabled({ ...endpoint, OTEL_TRACES_EXPORTER: 'otlp' }), true);
  });
});
