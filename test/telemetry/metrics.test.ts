import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import { changedObjects } from '../../src/telemetry/metrics.js';
import { prometheusTools, promtoolCheckMetrics } from '../support/prometheus-server.js';
import { fakeResource } from '../support/resources.js';
import {
  DR_URL,
  startRig,
  state,
  stateWithInvalidDocument,
  VS,
  VS_URL,
  type Rig,
} from '../support/telemetry-rig.js';
import { failOrSkipWithout } from '../support/required-peer.js';

/** The value of one sample in an exposition, or undefined when absent. */
function sample(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const m = /^([^{ ]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) continue;
    const parsed = new Map(
      [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((p) => [p[1] ?? '', p[2] ?? '']),
    );
    if (Object.entries(labels).every(([k, v]) => parsed.get(k) === v)) return Number(m[3]);
  }
  return undefined;
}

describe('meshmux metrics', () => {
  const rigs: Rig[] = [];
  const rig = (...args: Parameters<typeof startRig>): Rig => {
    const r = startRig(...args);
    rigs.push(r);
    return r;
  };
  after(() => rigs.forEach((r) => r.stop()));

  it('reports each source as up, synced, in its state, with its objects, updates and errors', async () => {
    const r = rig(['git', 'zk']);
    await r.send('git', state(['a', 'b']));
    await r.send('zk', {
      type: 'status',
      state: 'failing',
      error: new MeshmuxError('UNAVAILABLE', 'connection refused'),
    });
    await r.send('git', stateWithInvalidDocument(['a']));
    const text = await r.telemetry.metrics.registry.metrics();
    assert.equal(sample(text, 'meshmux_source_up', { source: 'git', type: 'test' }), 1);
    assert.equal(sample(text, 'meshmux_source_up', { source: 'zk' }), 0);
    assert.equal(sample(text, 'meshmux_source_synced', { source: 'git' }), 1);
    assert.equal(sample(text, 'meshmux_source_synced', { source: 'zk' }), 0);
    assert.equal(sample(text, 'meshmux_source_state', { source: 'zk', state: 'failing' }), 1);
    assert.equal(sample(text, 'meshmux_source_state', { source: 'zk', state: 'synced' }), 0);
    assert.equal(sample(text, 'meshmux_source_objects', { source: 'git', kind: VS }), 1);
    assert.equal(sample(text, 'meshmux_source_updates_total', { source: 'git' }), 2);
    assert.equal(sample(text, 'meshmux_source_errors_total', { source: 'zk', code: 'UNAVAILABLE' }), 1);
    assert.equal(sample(text, 'meshmux_source_rejected_documents', { source: 'git', code: 'SCHEMA' }), 1);
    assert.equal(sample(text, 'meshmux_source_stale_seconds', { source: 'git' }), 0);
    assert.ok((sample(text, 'meshmux_source_last_sync_timestamp_seconds', { source: 'git' }) ?? 0) > 1.7e9);
  });

  it('reads the gauges of a scrape from the last snapshot: a label set it no longer has is gone', async () => {
    const r = rig(['git']);
    await r.send('git', stateWithInvalidDocument(['a']));
    let text = await r.telemetry.metrics.registry.metrics();
    assert.equal(sample(text, 'meshmux_source_rejected_documents', { source: 'git', code: 'SCHEMA' }), 1);
    assert.equal(sample(text, 'meshmux_served_objects', { kind: VS }), 1);
    // Snapshots between two scrapes: only the last one counts.
    await r.send('git', state(['a', 'b', 'c']));
    await r.send('git', state(['a', 'b']));
    text = await r.telemetry.metrics.registry.metrics();
    assert.equal(
      sample(text, 'meshmux_source_rejected_documents', { source: 'git', code: 'SCHEMA' }),
      undefined,
    );
    assert.equal(sample(text, 'meshmux_source_objects', { source: 'git', kind: VS }), 2);
    assert.equal(sample(text, 'meshmux_served_objects', { kind: VS }), 2);
    assert.equal(sample(text, 'meshmux_merge_generation'), r.engine.current().generation);
  });

  it('reports conflicts by type, and keeps the count while a change leaves them as they were', async () => {
    const r = rig(['git', 'zk']);
    await r.send('git', state(['a', 'b']));
    await r.send('zk', state(['a']));
    const conflicts = async (): Promise<number | undefined> =>
      sample(await r.telemetry.metrics.registry.metrics(), 'meshmux_conflicts', { type: 'same-key' });
    assert.equal(await conflicts(), 1);
    await r.send('git', state(['a', 'c']));
    assert.equal(await conflicts(), 1, 'an unrelated change');
    await r.send('zk', state(['c', 'd']));
    assert.equal(await conflicts(), 1, 'another key held twice');
    await r.send('zk', state(['d']));
    assert.equal(await conflicts(), undefined, 'none left');
  });

  it('counts snapshot builds and how many kinds and objects each one changed', async () => {
    const r = rig(['git']);
    await r.send('git', state(['a', 'b'], { dr: ['d'] }));
    await r.send('git', state(['a', 'c'], { dr: ['d'] }));
    const text = await r.telemetry.metrics.registry.metrics();
    assert.equal(sample(text, 'meshmux_merge_snapshots_total'), 2);
    assert.equal(sample(text, 'meshmux_merge_batch_kinds_sum'), 2 + 1, 'two kinds, then one');
    assert.equal(
      sample(text, 'meshmux_merge_batch_objects_sum'),
      3 + 2,
      'three created; then b deleted, c created',
    );
    assert.equal(sample(text, 'meshmux_served_objects', { kind: VS }), 2);
  });

  it('observes convergence from a change arriving to each connected client ACKing it, per source and type', async () => {
    let now = 1000;
    const r = rig(['git'], { monotonicNow: () => now });
    const a = r.client(1);
    const b = r.client(2);
    r.telemetry.onConnect(a);
    r.telemetry.onConnect(b);
    now = 2000;
    const snapshot = await r.send('git', state(['a']));
    const version = snapshot.kinds.get(VS)?.version ?? '';
    now = 2100;
    r.telemetry.onPush(a, VS_URL, version, 100, 1);
    r.telemetry.onPush(b, VS_URL, version, 100, 1);
    now = 2250;
    r.telemetry.onAck(a, VS_URL, version, 150);
    now = 4000;
    r.telemetry.onAck(b, VS_URL, 'not-what-was-sent', 1900);
    let text = await r.telemetry.metrics.registry.metrics();
    const labels = { source: 'git', type: VS };
    assert.equal(
      sample(text, 'meshmux_convergence_seconds_count', labels),
      1,
      'the stale ACK completes nothing',
    );
    assert.equal(sample(text, 'meshmux_convergence_seconds_sum', labels), 0.25);
    assert.equal(sample(text, 'meshmux_convergence_seconds_bucket', { ...labels, le: '0.25' }), 1);
    assert.equal(sample(text, 'meshmux_convergence_seconds_bucket', { ...labels, le: '0.1' }), 0);
    assert.equal(
      sample(text, 'meshmux_push_duration_seconds_sum', { type: VS }),
      0.2,
      'both pushes 100 ms after the build',
    );
    r.telemetry.onAck(b, VS_URL, version, 2000);
    text = await r.telemetry.metrics.registry.metrics();
    assert.equal(sample(text, 'meshmux_convergence_seconds_count', labels), 2);
    assert.equal(sample(text, 'meshmux_acks_total', { type: VS }), 3);
    assert.equal(sample(text, 'meshmux_push_bytes_total', { type: VS }), 200);
  });

  it('labels type URLs outside the registry as unknown, so clients cannot grow the label set', async () => {
    const r = rig(['git']);
    const c = r.client(1);
    r.telemetry.onConnect(c);
    for (let i = 0; i < 5; i++) r.telemetry.onPush(c, `made.up/v1/Kind${i}`, '', 10, 0);
    r.telemetry.onNack(c, DR_URL, 'v', 'bad');
    const text = await r.telemetry.metrics.registry.metrics();
    assert.equal(sample(text, 'meshmux_pushes_total', { type: 'unknown' }), 5);
    assert.equal(text.match(/^meshmux_pushes_total\{/gm)?.length, 1);
    assert.equal(sample(text, 'meshmux_nacks_total', { type: 'networking.istio.io/DestinationRule' }), 1);
  });

  it('counts clients per policy and view, folding views past the limit into "other"', async () => {
    const clients = [
      { policy: 'east', view: 'east@1|rev=' },
      { policy: 'east', view: 'east@1|rev=' },
      { policy: 'east', view: 'east@1|rev=canary' },
      { policy: 'west', view: 'west@1|rev=x' },
    ];
    const r = rig(['git'], { clients: () => clients, maxViews: 2 });
    const text = await r.telemetry.metrics.registry.metrics();
    assert.equal(sample(text, 'meshmux_clients', { policy: 'east', view: 'east@1|rev=' }), 2);
    const others = text
      .split('\n')
      .filter((l) => l.startsWith('meshmux_clients{') && l.includes('view="other"'));
    assert.equal(others.length, 1);
    assert.equal(text.match(/^meshmux_clients\{/gm)?.length, 3);
  });

  it('passes promtool check metrics, process and event-loop metrics included', async (t) => {
    const tools = await prometheusTools();
    if ('missing' in tools) {
      failOrSkipWithout(t, tools.missing);
      return;
    }
    const r = rig(['git'], { processMetrics: true, clients: () => [{ policy: 'p', view: 'v' }] });
    await r.send('git', state(['a']));
    const c = r.client(1);
    r.telemetry.onConnect(c);
    r.telemetry.onPush(c, VS_URL, 'v', 10, 1);
    r.telemetry.onAck(c, VS_URL, 'v', 5);
    const text = await r.telemetry.metrics.registry.metrics();
    assert.ok(sample(text, 'meshmux_nodejs_eventloop_lag_p99_seconds') !== undefined);
    const { code, output } = await promtoolCheckMetrics(tools.promtool, text);
    assert.equal(output.trim(), '', 'promtool has no complaint');
    assert.equal(code, 0);
  });

  it('counts created, changed and deleted objects between two states of a kind', () => {
    const k = (names: string[], body = '') => ({
      kind: VS,
      version: names.join() + body,
      generation: 1,
      resources: names.map((n) => fakeResource(n, { body: n === 'b' ? `b${body}` : n })),
    });
    assert.equal(changedObjects(undefined, k(['a', 'b'])), 2);
    assert.equal(changedObjects(k(['a', 'b']), k(['a', 'b'], '2')), 1);
    assert.equal(changedObjects(k(['a', 'b']), k(['b', 'c'])), 2);
    assert.equal(changedObjects(k(['a']), undefined), 1);
  });
});
