import assert from 'node:assert/strict';
import { writeFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RunningMeshmux } from '../../src/app.js';
import { FakeAdsServer } from '../support/fake-ads-server.js';
import { FakeGalley } from '../support/fake-galley.js';
import { fakeServiceEntry, fakeVirtualService, type FakeObject } from '../support/fake-objects.js';
import { IstiodClient, type StoredConfig } from '../support/istiod-client.js';
import { copyOfExamples, startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { firstMatch } from '../support/deadline.js';
import { DR, SE, SIDECAR, VS } from '../support/type-urls.js';

const vs = fakeVirtualService;

const se = fakeServiceEntry;

function dr(name: string, host: string, namespace = 'shop'): FakeObject {
  return { namespace, name, spec: { host, traffic_policy: { tls: { mode: 'ISTIO_MUTUAL' } } } };
}

type Meshmux = Awaited<ReturnType<typeof startFromYaml>>;

/** Resolves once the merged snapshot reports the named source in `state`. */
function sourceState(meshmux: RunningMeshmux, name: string, state: string): Promise<unknown> {
  return firstMatch(
    meshmux.engine.snapshots$,
    (s) => s.sources.some((x) => x.name === name && x.state === state),
    15_000,
    `source ${name} to be ${state}`,
  );
}

/** Bytes of every response meshmux has written to its clients. */
async function pushedBytes(meshmux: RunningMeshmux): Promise<number> {
  const metric = await meshmux.metrics.registry.getSingleMetric('meshmux_push_bytes_total')?.get();
  return (metric?.values ?? []).reduce((sum, v) => sum + v.value, 0);
}

/** Every object an istiod holds: `typeUrl ns/name` → version. */
function inventory(client: IstiodClient): Map<string, StoredConfig> {
  const out = new Map<string, StoredConfig>();
  for (const [typeUrl, configs] of client.store) {
    for (const [name, config] of configs) out.set(`${typeUrl} ${name}`, config);
  }
  return out;
}

/** A change elsewhere that must arrive: once it has, anything the event before it caused has arrived too. */
async function marker(client: IstiodClient, upstream: FakeAdsServer, name: string): Promise<void> {
  upstream.set('Sidecar', [
    { namespace: 'shop', name, spec: { outbound_traffic_policy: { mode: 'REGISTRY_ONLY' } } },
  ]);
  upstream.push();
  await client.waitFor(
    (c) => c.configs(SIDECAR).has(`shop/${name}`),
    10_000,
    () => `marker ${name}`,
  );
}

function xdsConfig(name: string, address: string, extra = ''): string {
  return `syncTimeout: 10s\nsources:\n  - name: ${name}\n    type: xds\n    address: ${address}\n${extra}`;
}

describe('an istiod behind meshmux behind an upstream istiod', () => {
  it('keeps every object while the upstream restarts, and receives nothing when it comes back with the same content', async (t) => {
    const { dir, dispose } = await tempDir();
    const upstream = await FakeAdsServer.start({ peer: 'istiod' });
    upstream
      .set('VirtualService', [vs('reviews'), vs('ratings')])
      .set('ServiceEntry', [se('cards', 'api.cards.example')])
      .set('DestinationRule', [dr('reviews', 'reviews')]);
    // The configuration shape of the issue, as written.
    const meshmux = await startFromYaml(
      `sources:\n  - name: mesh-a\n    type: xds\n    address: ${upstream.address}\n`,
      dir,
    );
    const client = new IstiodClient({ address: meshmux.xds, backoff: { maxMs: 200 } }).start();
    try {
      await client.waitForSync(10_000);
      const before = inventory(client);
      assert.deepEqual([...before.keys()].sort(), [
        `${DR} shop/reviews`,
        `${SE} payments/cards`,
        `${VS} shop/ratings`,
        `${VS} shop/reviews`,
      ]);
      assert.deepEqual(client.problems, []);
      const updates = client.updates;

      const stale = sourceState(meshmux, 'mesh-a', 'stale');
      await upstream.stop();
      await stale;
      assert.deepEqual(inventory(client), before, 'nothing is deleted while the upstream is down');

      const bytesBefore = await pushedBytes(meshmux);
      const received = client.received.length;
      const streamsBefore = upstream.streams;
      const synced = sourceState(meshmux, 'mesh-a', 'synced');
      const upAt = performance.now();
      await upstream.restart();
      await synced;
      const syncedAt = performance.now();
      const streamAt = upstream.streamOpenedAt[streamsBefore] ?? upAt;
      const resyncBytes = (await pushedBytes(meshmux)) - bytesBefore;
      assert.equal(resyncBytes, 0, 'an identical resync sends no bytes downstream');
      await marker(client, upstream, 'after-resync');
      assert.deepEqual(
        client.received.slice(received).map((r) => r.typeUrl),
        [SIDECAR],
        'only the marker reached the istiod',
      );
      assert.equal(client.updates - updates, 1);
      t.diagnostic(
        `upstream back → new stream ${Math.round(streamAt - upAt)} ms (backoff), new stream → resynced ` +
          `${(syncedAt - streamAt).toFixed(1)} ms; bytes sent downstream for the identical resync: ${resyncBytes}`,
      );
    } finally {
      client.close();
      await meshmux.stop();
      await upstream.stop();
      await dispose();
    }
  });

  it('holds an upstream that restarts empty per onEmpty, after it answered, and never on the disconnect', async () => {
    const { dir, dispose } = await tempDir();
    const keep = await FakeAdsServer.start({ peer: 'istiod' });
    const accept = await FakeAdsServer.start({ peer: 'istiod' });
    keep.set('VirtualService', [vs('kept')]);
    accept.set('VirtualService', [vs('accepted')]);
    const meshmux = await startFromYaml(
      `sources:\n  - {name: keep, type: xds, address: ${keep.address}, reconnect: {initialDelay: 50ms}}\n` +
        `  - {name: accept, type: xds, address: ${accept.address}, onEmpty: accept, reconnect: {initialDelay: 50ms}}\n`,
      dir,
    );
    const client = new IstiodClient({ address: meshmux.xds, backoff: { maxMs: 200 } }).start();
    try {
      await client.waitFor((c) => c.configs(VS).size === 2, 10_000);
      const stale = Promise.all([
        sourceState(meshmux, 'keep', 'stale'),
        sourceState(meshmux, 'accept', 'stale'),
      ]);
      await keep.stop();
      await accept.stop();
      await stale;
      await keep.restart({ empty: true });
      await accept.restart({ empty: true });
      await Promise.all([sourceState(meshmux, 'keep', 'synced'), sourceState(meshmux, 'accept', 'synced')]);
      // Both empty states are in the merge now; a later change of the same type URL marks the point
      // after which a deletion of `kept` would have reached the istiod too.
      accept.set('VirtualService', [vs('marker')]);
      accept.push();
      await client.waitFor(
        (c) => c.configs(VS).has('shop/marker') && !c.configs(VS).has('shop/accepted'),
        10_000,
        () => 'the marker, after the accepted empty state',
      );
      // Had the disconnect deleted `kept`, the empty state would have found nothing to hold.
      assert.ok(
        client.configs(VS).has('shop/kept'),
        'onEmpty: keep holds; neither the disconnect nor the empty state deleted',
      );
      const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
        name: string;
        state: string;
      }>;
      assert.deepEqual(
        sources.map((s) => [s.name, s.state]),
        [
          ['keep', 'synced'],
          ['accept', 'synced'],
        ],
      );
    } finally {
      client.close();
      await meshmux.stop();
      await keep.stop();
      await accept.stop();
      await dispose();
    }
  });

  it('shows nothing new to istiods when the upstream sends garbage or drops streams mid-way, and reports it', async () => {
    const { dir, dispose } = await tempDir();
    const upstream = await FakeAdsServer.start({ peer: 'istiod' });
    upstream.set('VirtualService', [vs('reviews')]).set('ServiceEntry', [se('cards', 'api.cards.example')]);
    const meshmux = await startFromYaml(
      xdsConfig('mesh-a', upstream.address, '    reconnect: {initialDelay: 50ms}\n'),
      dir,
    );
    const client = new IstiodClient({ address: meshmux.xds, backoff: { maxMs: 200 } }).start();
    try {
      await client.waitForSync(10_000);
      const received = client.received.length;
      upstream.sendRaw(Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01));
      await firstMatch(
        meshmux.engine.snapshots$,
        (s) => s.sources[0]?.lastError?.code === 'DECODE',
        15_000,
        'the source to report a DECODE error',
      );
      // Mid-way: the upstream answers part of the types with a state it then loses, and drops.
      upstream.set('ServiceEntry', [se('cards', 'api.cards.example'), se('half', 'half.example')]);
      upstream.mute = new Set(['networking.istio.io/v1alpha3/VirtualService']);
      const streams = upstream.streams;
      upstream.disconnectAll();
      await upstream.waitFor(
        () => upstream.sent.some((s) => s.stream > streams && s.typeUrl === SE && s.resources === 2),
        5_000,
        'a partial answer',
      );
      upstream.disconnectAll();
      upstream.mute = new Set();
      upstream.set('ServiceEntry', [se('cards', 'api.cards.example')]);
      await sourceState(meshmux, 'mesh-a', 'synced');
      await marker(client, upstream, 'after-garbage');
      assert.deepEqual(
        client.received.slice(received).map((r) => r.typeUrl),
        [SIDECAR],
      );
      assert.ok(client.configs(VS).has('shop/reviews'));
      const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
        lastError?: string;
      }>;
      assert.match(sources[0]?.lastError ?? '', /undecodable DiscoveryResponse|stream ended|dropped/);
    } finally {
      client.close();
      await meshmux.stop();
      await upstream.stop();
      await dispose();
    }
  });
});

describe('peers behind meshmux', () => {
  it('re-serves Nacos’s v1alpha3 ServiceEntries to an istiod that asks for v1, and a Galley’s collections', async () => {
    const { dir, dispose } = await tempDir();
    const nacos = await FakeAdsServer.start({ peer: 'nacos' });
    nacos.set('ServiceEntry', [se('foo.DEFAULT-GROUP.public', 'foo.DEFAULT-GROUP.publicnacos', 'public')]);
    const galley = await FakeGalley.start({
      collections: [
        'istio/networking/v1alpha3/virtualservices',
        'istio/networking/v1alpha3/destinationrules',
      ],
    });
    galley
      .set('VirtualService', [vs('from-galley')])
      .set('DestinationRule', [dr('from-galley', 'from-galley')]);
    // The configuration shapes of the issue, as written, plus the kinds this Galley serves.
    const meshmux = await startFromYaml(
      `sources:\n  - name: mesh-a\n    type: xds\n    address: ${nacos.address}\n` +
        `  - name: galley\n    type: mcp\n    address: ${galley.address}\n    kinds: [VirtualService, DestinationRule]\n`,
      dir,
    );
    const client = new IstiodClient({ address: meshmux.xds, backoff: { maxMs: 200 } }).start();
    const legacy = new IstiodClient({
      address: meshmux.xds,
      release: 'legacy',
      backoff: { maxMs: 200 },
    }).start();
    try {
      await client.waitForSync(10_000);
      await legacy.waitForSync(10_000);
      assert.ok(client.configs(SE).has('public/foo.DEFAULT-GROUP.public'));
      assert.ok(
        legacy.configs('networking.istio.io/v1alpha3/ServiceEntry').has('public/foo.DEFAULT-GROUP.public'),
      );
      assert.ok(client.configs(VS).has('shop/from-galley'));
      assert.ok(client.configs(DR).has('shop/from-galley'));
      galley.set('VirtualService', []).push();
      await client.waitFor((c) => !c.configs(VS).has('shop/from-galley'), 10_000);
      assert.deepEqual(client.problems, []);
    } finally {
      client.close();
      legacy.close();
      await meshmux.stop();
      await nacos.stop();
      await galley.stop();
      await dispose();
    }
  });
});

describe('a three-hop meshmux chain', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  const chain: Meshmux[] = [];
  let atA: IstiodClient;
  let atC: IstiodClient;

  before(async () => {
    ({ dir, dispose } = await copyOfExamples());
    const a = await startFromYaml(
      `sources:\n  - name: local\n    type: file\n    path: .\n    rescanInterval: 200ms\n`,
      dir,
    );
    chain.push(a);
    const b = await startFromYaml(xdsConfig('hop-b', a.xds), dir);
    chain.push(b);
    const c = await startFromYaml(xdsConfig('hop-c', b.xds), dir);
    chain.push(c);
    atA = new IstiodClient({ address: a.xds, backoff: { maxMs: 200 } }).start();
    atC = new IstiodClient({ address: c.xds, backoff: { maxMs: 200 } }).start();
    await atA.waitForSync(10_000);
    await atC.waitForSync(10_000);
  });
  after(async () => {
    atA.close();
    atC.close();
    for (const m of chain.reverse()) await m.stop();
    await dispose();
  });

  it('delivers the same objects, bodies and creation times at the end as at the start', () => {
    const first = inventory(atA);
    const last = inventory(atC);
    assert.equal(first.size, 7);
    assert.deepEqual([...last.keys()].sort(), [...first.keys()].sort());
    for (const [key, config] of first) {
      const end = last.get(key);
      assert.deepEqual(Buffer.from(end?.bodyBytes ?? []), Buffer.from(config.bodyBytes), `${key} body`);
      assert.deepEqual(end?.createTime, config.createTime, `${key} create_time`);
      assert.deepEqual(end?.labels, config.labels, `${key} labels`);
    }
    assert.deepEqual(atC.problems, []);
  });

  it('keeps every metadata.version identical end to end', () => {
    const last = inventory(atC);
    for (const [key, config] of inventory(atA))
      assert.equal(last.get(key)?.version, config.version, `${key} version`);
  });

  it('passes a change along all three hops', async (t) => {
    const file = path.join(dir, 'shop-routing.yaml');
    const before = atC.configs(VS).get('shop/reviews')?.version;
    const changedAt = performance.now();
    await writeFile(file, (await readFile(file, 'utf8')).replace('timeout: 3s', 'timeout: 4s'));
    await atC.waitFor((x) => x.configs(VS).get('shop/reviews')?.version !== before, 10_000);
    t.diagnostic(
      `a file change crossed three hops in ${Math.round(performance.now() - changedAt)} ms (incl. file rescan)`,
    );
    const http = atC.configs(VS).get('shop/reviews')?.body['http'] as Array<Record<string, unknown>>;
    assert.equal((http[1]?.['timeout'] as { seconds?: number } | undefined)?.seconds, 4);
  });

  it('sends nothing to the end of the chain when the middle hop restarts with the same content', async (t) => {
    const [a, b, c] = chain;
    assert.ok(a !== undefined && b !== undefined && c !== undefined);
    const bytes = await pushedBytes(c);
    const received = atC.received.length;
    const stale = sourceState(c, 'hop-c', 'stale');
    await b.stop();
    await stale;
    const synced = sourceState(c, 'hop-c', 'synced');
    const restartedAt = performance.now();
    chain[1] = await startFromYaml(xdsConfig('hop-b', a.xds), dir, { xds: `127.0.0.1:${b.xdsPort}` });
    await synced;
    t.diagnostic(
      `middle hop restarted → end of chain resynced in ${Math.round(performance.now() - restartedAt)} ms`,
    );
    assert.equal((await pushedBytes(c)) - bytes, 0, 'no bytes to the istiod');
    const file = path.join(dir, 'payments-external.yaml');
    await writeFile(file, (await readFile(file, 'utf8')).replace('sni: api.cards', 'sni: edge.cards'));
    await atC.waitFor((x) => x.received.length > received, 10_000);
    assert.deepEqual(
      atC.received.slice(received).map((r) => r.typeUrl),
      [DR],
      'only the later change reached the istiod',
    );
  });
});
