import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startMeshmux, type RunningMeshmux } from '../../src/app.js';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import { SPAN_MERGE, SPAN_PUSH, SPAN_RECEIVE } from '../../src/telemetry/tracing.js';
import { dumpDom, findChromium } from '../support/chromium.js';
import { IstiodClient } from '../support/istiod-client.js';
import { copyOfExamples } from '../support/meshmux-harness.js';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { PrometheusServer, prometheusTools, promtoolCheckMetrics } from '../support/prometheus-server.js';
import { until } from '../support/deadline.js';
import { failOrSkipWithout, missingPeerLine } from '../support/required-peer.js';

const VS = 'networking.istio.io/VirtualService';
const VS_URL = 'networking.istio.io/v1/VirtualService';
const NODE_A = 'sidecar~10.1.2.3~istiod-a.istio-system~istio-system.svc.cluster.local';
const NODE_B = 'sidecar~10.1.2.4~istiod-b.istio-system~istio-system.svc.cluster.local';

/** The trace of the one change whose merge served a new VirtualService and nothing else. */
function vsChangeTrace(spans: readonly ReceivedSpan[]): {
  receive?: ReceivedSpan;
  merge?: ReceivedSpan;
  pushes: ReceivedSpan[];
} {
  const merge = spans.find(
    (s) => s.name === SPAN_MERGE && JSON.stringify(s.attributes['meshmux.kind']) === JSON.stringify([VS]),
  );
  if (merge === undefined) return { pushes: [] };
  return {
    merge,
    ...(() => {
      const receive = spans.find((s) => s.name === SPAN_RECEIVE && s.spanId === merge.parentSpanId);
      return receive === undefined ? {} : { receive };
    })(),
    pushes: spans.filter((s) => s.name === SPAN_PUSH && s.parentSpanId === merge.spanId),
  };
}

describe('observing a change from a file edit to two istiods', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let receiver: OtlpReceiver;
  let meshmux: RunningMeshmux;
  let http: string;
  let admin: string;
  const clients: IstiodClient[] = [];
  let ackedVs: string[] = [];
  /** Convergence observations of VirtualServices before the edit (the istiods' first sync counts too). */
  let convergedBefore = 0;

  before(async () => {
    ({ dir, dispose } = await copyOfExamples());
    receiver = await OtlpReceiver.start();
    const yaml = `sources:\n  - name: local\n    type: file\n    path: ${JSON.stringify(dir)}\n    rescanInterval: 200ms\n`;
    // The OpenTelemetry SDK reads these from the process environment, as in production.
    Object.assign(process.env, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_SERVICE_NAME: 'meshmux-e2e',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=e2e',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    meshmux = await startMeshmux(parseMeshmuxConfig(yaml, 'test config', dir), {
      xds: '127.0.0.1:0',
      http: '127.0.0.1:0',
      admin: '127.0.0.1:0',
    });
    http = `http://127.0.0.1:${meshmux.httpPort}`;
    admin = `http://127.0.0.1:${meshmux.adminPort}`;
    for (const nodeId of [NODE_A, NODE_B]) {
      clients.push(
        new IstiodClient({
          address: `127.0.0.1:${meshmux.xdsPort}`,
          nodeId,
          backoff: { maxMs: 200 },
        }).start(),
      );
    }
    await Promise.all(clients.map((c) => c.waitForSync(30_000)));
    // The initial sync converges once per istiod when meshmux reads its ACK, which may come
    // after the client saw the response: count from there.
    await until(
      async () =>
        (convergedBefore = convergedCount(await (await fetch(`${http}/metrics`)).text())) >= clients.length,
      30_000,
      `the initial sync of all ${clients.length} istiods to be counted as converged`,
      { intervalMs: 20, describe: () => `${convergedBefore} counted` },
    );
    const before = clients.map((c) => c.versionInfo.get(VS_URL));
    const file = path.join(dir, 'shop-routing.yaml');
    await writeFile(file, (await readFile(file, 'utf8')).replace('timeout: 3s', 'timeout: 4s'));
    await Promise.all(
      clients.map((c, i) => c.waitFor((x) => x.versionInfo.get(VS_URL) !== before[i], 30_000)),
    );
    ackedVs = clients.map((c) => c.versionInfo.get(VS_URL) ?? '');
  });

  after(async () => {
    for (const name of [
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_SERVICE_NAME',
      'OTEL_RESOURCE_ATTRIBUTES',
      'OTEL_BSP_SCHEDULE_DELAY',
    ])
      delete process.env[name];
    for (const c of clients) c.close();
    await meshmux.stop();
    await receiver.close();
    await dispose();
  });

  it('exports one trace: receive, its merge, and one push per istiod ending at its ACK', async () => {
    await receiver.waitFor((spans) => {
      const t = vsChangeTrace(spans);
      return t.receive !== undefined && t.pushes.length === 2;
    }, 30_000);
    const { receive, merge, pushes } = vsChangeTrace(receiver.spans);
    assert.ok(receive && merge);
    assert.equal(receive.parentSpanId, '', 'a file edit starts a trace');
    assert.equal(receive.kind, 5, 'consumer');
    assert.equal(receive.resource['service.name'], 'meshmux-e2e');
    assert.equal(receive.resource['deployment.environment'], 'e2e', 'the SDK read OTEL_RESOURCE_ATTRIBUTES');
    assert.equal(receive.attributes['meshmux.source'], 'local');
    assert.equal(receive.attributes['meshmux.count'], 7, 'the seven example objects');
    assert.ok((receive.attributes['meshmux.kind'] as string[]).includes(VS));
    assert.equal(typeof receive.attributes['meshmux.upstream.version'], 'string');
    assert.equal(merge.traceId, receive.traceId);
    assert.equal(merge.attributes['meshmux.merge.changed'], true);
    assert.deepEqual(
      pushes.map((p) => p.attributes['meshmux.client.node_id']).sort(),
      [NODE_A, NODE_B],
      'one push span per istiod',
    );
    for (const p of pushes) {
      assert.equal(p.traceId, receive.traceId);
      assert.equal(p.attributes['meshmux.type_url'], VS_URL);
      assert.equal(p.status.code, 1, 'ended by an ACK');
      assert.ok(
        ackedVs.includes(p.attributes['meshmux.ack.version'] as string),
        'the version the istiod holds',
      );
      assert.ok(p.endNs >= p.startNs && p.startNs >= merge.startNs);
    }
    assert.deepEqual(receiver.rejected, []);
  });

  it('observes the convergence of that change once per istiod', async () => {
    const metrics = await (await fetch(`${http}/metrics`)).text();
    assert.equal(convergedCount(metrics) - convergedBefore, 2);
    assert.match(metrics, /^meshmux_source_up\{source="local",type="file"\} 1$/m);
    assert.match(metrics, /^meshmux_clients\{policy="[^"]*",view="[^"]+"\} 2$/m);
  });

  it('serves /metrics that promtool accepts and a real Prometheus scrapes', async (t) => {
    const tools = await prometheusTools();
    if ('missing' in tools) {
      failOrSkipWithout(t, tools.missing);
      return;
    }
    const exposition = await (await fetch(`${http}/metrics`)).text();
    const checked = await promtoolCheckMetrics(tools.promtool, exposition);
    assert.equal(checked.output.trim(), '', 'promtool has no complaint');
    assert.equal(checked.code, 0);

    const prometheus = await PrometheusServer.start(tools.prometheus, [`127.0.0.1:${meshmux.httpPort}`], {
      scrapeIntervalMs: 250,
    });
    try {
      const up = await prometheus.waitFor('up{job="meshmux"}', (s) => s[0]?.value === 1);
      assert.equal(up.length, 1, JSON.stringify(await prometheus.targets()));
      const sources = await prometheus.waitFor('meshmux_source_up', (s) => s.length > 0);
      assert.deepEqual(
        sources.map((s) => [s.metric['source'], s.metric['type'], s.value]),
        [['local', 'file', 1]],
      );
      const clientsSum = await prometheus.waitFor('sum(meshmux_clients)', (s) => s.length === 1);
      assert.equal(clientsSum[0]?.value, 2);
      const converged = await prometheus.query(
        'sum by (source, type) (meshmux_convergence_seconds_count{type="networking.istio.io/VirtualService"})',
      );
      const exposed = convergedCount(await (await fetch(`${http}/metrics`)).text());
      assert.deepEqual(
        converged.map((s) => [s.metric['source'], s.value]),
        [['local', exposed]],
      );
      const p99 = await prometheus.query(
        'histogram_quantile(0.99, sum by (le) (meshmux_convergence_seconds_bucket))',
      );
      assert.ok(Number.isFinite(p99[0]?.value), 'the dashboard quantile query evaluates');
      const lag = await prometheus.query('meshmux_nodejs_eventloop_lag_p99_seconds');
      assert.equal(lag.length, 1, 'event-loop metrics are scraped');

      // The shipped dashboard: every query evaluates, and every meshmux metric it names exists.
      const dashboard = JSON.parse(
        await readFile(path.join(PACKAGE_ROOT, 'config', 'grafana-dashboard.json'), 'utf8'),
      ) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> };
      const exprs = dashboard.panels.flatMap((p) =>
        (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })),
      );
      assert.ok(exprs.length > 20);
      for (const { panel, expr } of exprs) {
        const concrete = expr
          .replaceAll('$__rate_interval', '1m')
          .replaceAll('$job', 'meshmux')
          .replaceAll('$instance', '.*');
        await prometheus.query(concrete).catch((err: unknown) => {
          throw new Error(`panel ${panel}: ${String(err)}`);
        });
        for (const [name] of expr.matchAll(/meshmux_\w+/g)) {
          const family = name.replace(/_(bucket|sum|count)$/, '');
          assert.match(
            exposition,
            new RegExp(`^# TYPE (${name}|${family}) `, 'm'),
            `panel ${panel} names ${name}`,
          );
        }
      }
    } finally {
      await prometheus.stop();
    }
  });

  it('serves a self-refreshing status page of sources, clients and their ACKed versions', async () => {
    const res = await fetch(`${admin}/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const html = await res.text();
    assert.match(html, /<meta http-equiv="refresh" content="\d+">/);
    assert.match(html, /<tr data-source="local"><td>local<\/td><td>file<\/td>[\s\S]*?class="ok">synced/);
    for (const node of [NODE_A, NODE_B]) assert.ok(html.includes(node), `client ${node} listed`);
    for (const v of ackedVs)
      assert.ok(
        new RegExp(`${VS_URL}: sent <code>[^<]*</code>, ACKed <code>${v}</code>`).test(html),
        `ACKed version ${v} shown`,
      );
  });

  it('renders the status page in headless Chromium', async (t) => {
    const chromium = await findChromium();
    if (chromium === undefined) {
      failOrSkipWithout(t, missingPeerLine('chromium', 'chromium'));
      return;
    }
    const stdout = await dumpDom(chromium, `${admin}/`);
    assert.match(stdout, /<title>meshmux status<\/title>/);
    assert.match(stdout, /<table id="sources">[\s\S]*<td>local<\/td>/);
    assert.match(stdout, /<table id="clients">[\s\S]*istiod-a\.istio-system/);
  });
});

/** `meshmux_convergence_seconds_count` of the example source's VirtualServices. */
function convergedCount(exposition: string): number {
  const m =
    /^meshmux_convergence_seconds_count\{source="local",type="networking\.istio\.io\/VirtualService"\} (\d+)$/m.exec(
      exposition,
    );
  return Number(m?.[1] ?? 0);
}
