import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RunningMeshmux } from '../../src/app.js';
import { KINDS } from '../../src/schema/kinds.js';
import { IstiodClient, MESH_CONFIG_TYPE_URL } from '../support/istiod-client.js';
import { copyOfExamples, startFromYaml } from '../support/meshmux-harness.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { firstMatch } from '../support/deadline.js';

const VS_V1 = 'networking.istio.io/v1/VirtualService';
const SE_V1 = 'networking.istio.io/v1/ServiceEntry';
const DR_V1 = 'networking.istio.io/v1/DestinationRule';

/** A ServiceEntry file whose arrival marks that everything before it has arrived. */
const MARKER_SE = (name: string): string => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: shop}
spec: {hosts: [${name}.example.com], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
`;

function fileConfig(dir: string, extra = ''): string {
  return `sources:\n  - name: local\n    type: file\n    path: ${JSON.stringify(dir)}\n    rescanInterval: 200ms\n${extra}`;
}

describe('an istiod syncing from meshmux over MCP-over-xDS', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  const clients: IstiodClient[] = [];
  const connect = (options: Partial<ConstructorParameters<typeof IstiodClient>[0]> = {}): IstiodClient => {
    const c = new IstiodClient({ address: meshmux.xds, backoff: { maxMs: 200 }, ...options }).start();
    clients.push(c);
    return c;
  };

  before(async () => {
    ({ dir, dispose } = await copyOfExamples());
    meshmux = await startFromYaml(fileConfig(dir), dir);
  });
  after(async () => {
    for (const c of clients) c.close();
    await meshmux.stop();
    await dispose();
  });

  for (const release of ['current', 'legacy'] as const) {
    it(`syncs every type a ${release} istiod requests, empty ones too, and every object decodes`, async () => {
      const client = connect({ release });
      await client.waitForSync(10_000);
      const expected = release === 'current' ? KINDS.currentTypeUrls() : KINDS.legacyTypeUrls();
      assert.deepEqual([...client.requestedTypeUrls].sort(), [...expected].sort());
      for (const typeUrl of expected)
        assert.ok((client.responses.get(typeUrl) ?? 0) >= 1, `answered ${typeUrl}`);
      assert.deepEqual(client.problems, []);
      const vsType = release === 'current' ? VS_V1 : 'networking.istio.io/v1alpha3/VirtualService';
      const vs = client.configs(vsType).get('shop/reviews');
      assert.ok(vs, 'the example VirtualService arrives');
      assert.equal(vs.bodyType, 'istio.networking.v1alpha3.VirtualService');
      assert.ok(vs.createTime, 'create_time is set');
      assert.equal(vs.labels['team'], 'storefront');
      const total = [...client.store.values()].reduce((n, m) => n + m.size, 0);
      assert.equal(total, 7, 'the seven example objects');
      assert.equal(client.meshConfig, undefined, 'no MeshConfig without a mesh section');
      assert.equal(client.responses.get(MESH_CONFIG_TYPE_URL) ?? 0, 0);
    });
  }

  it('delivers an edited file as an update of exactly the objects that changed', async () => {
    const client = connect();
    await client.waitForSync(10_000);
    const before = client.configs(VS_V1).get('shop/reviews');
    const updatesBefore = client.updates;
    const file = path.join(dir, 'shop-routing.yaml');
    await writeFile(file, (await readFile(file, 'utf8')).replace('timeout: 3s', 'timeout: 4s'));
    await client.waitFor((c) => c.configs(VS_V1).get('shop/reviews')?.version !== before?.version, 10_000);
    assert.equal(client.updates - updatesBefore, 1, 'only the VirtualService changed');
    const http = client.configs(VS_V1).get('shop/reviews')?.body['http'] as Array<Record<string, unknown>>;
    assert.deepEqual(http[1]?.['timeout'], { seconds: 4 });
  });

  it('delivers added and deleted files as creations and deletions', async () => {
    const client = connect();
    await client.waitForSync(10_000);
    await writeFile(
      path.join(dir, 'new-se.yaml'),
      'apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ledger, namespace: payments}\n' +
        'spec: {hosts: [ledger.example.com], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}\n',
    );
    await client.waitFor((c) => c.configs(SE_V1).has('payments/ledger'), 10_000);
    await rm(path.join(dir, 'new-se.yaml'));
    await client.waitFor((c) => !c.configs(SE_V1).has('payments/ledger'), 10_000);
    assert.ok(client.configs(SE_V1).has('payments/card-processor'), 'the other ServiceEntry stays');
  });

  it('sends nothing new when a file is rewritten with identical content', async () => {
    const client = connect();
    await client.waitForSync(10_000);
    const security = path.join(dir, 'security.yaml');
    const external = path.join(dir, 'payments-external.yaml');
    const received = client.received.length;
    const updates = client.updates;
    // Rewrite one file unchanged, then change another: once the change arrives, the rewrite has
    // been read too (one scan reads both), and it must have produced nothing.
    await writeFile(security, await readFile(security, 'utf8'));
    await writeFile(
      external,
      (await readFile(external, 'utf8')).replace('sni: api.cards', 'sni: edge.cards'),
    );
    await client.waitFor((c) => c.updates > updates, 10_000);
    assert.equal(client.updates - updates, 1);
    const newResponses = client.received.slice(received).map((r) => r.typeUrl);
    assert.deepEqual(newResponses, [DR_V1], 'one response, for DestinationRule only');
  });

  it('keeps serving the last valid objects of a file that turns invalid, and reports it', async () => {
    const client = connect();
    await client.waitForSync(10_000);
    const file = path.join(dir, 'sidecar.yaml');
    const good = await readFile(file, 'utf8');
    await writeFile(file, good.replace('mode: REGISTRY_ONLY', 'mode: NOT_A_MODE'));
    await waitForSourceErrors(meshmux, 1);
    // A later change in another file: once it has arrived, a deletion would have too.
    const marker = path.join(dir, 'marker-invalid.yaml');
    await writeFile(marker, MARKER_SE('after-invalid'));
    await client.waitFor(
      (c) => c.configs(SE_V1).has('shop/after-invalid'),
      10_000,
      () => 'the marker',
    );
    assert.ok(client.configs('networking.istio.io/v1/Sidecar').has('shop/default'));
    const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
      errors: string[];
    }>;
    assert.match(
      sources[0]?.errors[0] ?? '',
      /sidecar\.yaml doc 0 line \d+ field spec\.outboundTrafficPolicy\.mode/,
    );
    await writeFile(file, good);
    await waitForSourceErrors(meshmux, 0);
    await rm(marker);
    await client.waitFor(
      (c) => !c.configs(SE_V1).has('shop/after-invalid'),
      10_000,
      () => 'the marker gone',
    );
  });

  it('treats two streams with the same node id as independent clients', async () => {
    const a = connect({ nodeId: 'sidecar~10.0.0.1~test-1.default~default.svc.cluster.local' });
    const b = connect({ nodeId: 'sidecar~10.0.0.1~test-1.default~default.svc.cluster.local' });
    await Promise.all([a.waitForSync(10_000), b.waitForSync(10_000)]);
    const syncz = (await (await fetch(`${meshmux.admin}/debug/syncz`)).json()) as Array<{
      client: { nodeId: string };
    }>;
    const same = syncz.filter(
      (s) => s.client.nodeId === 'sidecar~10.0.0.1~test-1.default~default.svc.cluster.local',
    );
    assert.equal(same.length, 2);
  });

  it('answers a first request carrying a timestamp nonce, ignores stale nonces, and is silent on ACK', async () => {
    const raw = new RawAdsStream(meshmux.xds);
    try {
      raw.send({
        type_url: VS_V1,
        response_nonce: '2026-01-01 00:00:00 +0000 UTC m=+0.1',
        node: { id: 'raw', metadata: { fields: { GENERATOR: { stringValue: 'api' } } } },
      });
      const first = await raw.next();
      assert.equal(first.type_url, VS_V1);
      assert.equal(first.resources.length, 1);
      assert.ok(first.version_info.length > 0 && first.nonce.length > 0);
      raw.send({ type_url: VS_V1, response_nonce: 'not-a-nonce-we-sent', version_info: first.version_info });
      raw.send({ type_url: VS_V1, response_nonce: first.nonce, version_info: first.version_info });
      raw.send({ type_url: SE_V1, response_nonce: 'also from a clock' });
      const second = await raw.next();
      assert.equal(second.type_url, SE_V1, 'the stale nonce and the ACK produced nothing');
      assert.notEqual(second.nonce, first.nonce);
    } finally {
      raw.close();
    }
  });

  it('exposes health, readiness, metrics and the merged config over HTTP', async () => {
    assert.equal((await fetch(`${meshmux.http}/healthz`)).status, 200);
    const ready = await fetch(`${meshmux.http}/ready`);
    assert.equal(ready.status, 200);
    const metrics = await (await fetch(`${meshmux.http}/metrics`)).text();
    assert.match(metrics, /meshmux_served_objects\{kind="networking.istio.io\/VirtualService"\} 1/);
    const configz = (await (await fetch(`${meshmux.admin}/debug/configz`)).json()) as Array<
      Record<string, unknown>
    >;
    const vs = configz.find((o) => o['kind'] === 'networking.istio.io/VirtualService');
    assert.equal(vs?.['namespace'], 'shop');
    assert.ok((vs?.['spec'] as { hosts: string[] }).hosts.includes('reviews.shop.svc.cluster.local'));
  });
});

describe('MeshConfig', () => {
  it('is answered once with the configured mesh section and never awaited', async () => {
    const { dir, dispose } = await copyOfExamples();
    const meshmux = await startFromYaml(
      fileConfig(dir, 'mesh:\n  rootNamespace: istio-system\n  enableTracing: true\n'),
      dir,
    );
    const client = new IstiodClient({ address: `127.0.0.1:${meshmux.xdsPort}` }).start();
    try {
      await client.waitForSync(10_000);
      await client.waitFor((c) => c.meshConfig !== undefined, 10_000);
      assert.equal(client.meshConfig?.['root_namespace'], 'istio-system');
      assert.equal(client.responses.get(MESH_CONFIG_TYPE_URL), 1);
      assert.ok(!client.acks.some((a) => a.typeUrl === MESH_CONFIG_TYPE_URL), 'istiod never ACKs it');
      assert.deepEqual(client.problems, []);
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });
});

function waitForSourceErrors(meshmux: RunningMeshmux, count: number): Promise<unknown> {
  return firstMatch(
    meshmux.engine.snapshots$,
    (s) => s.sources[0]?.errors.length === count,
    15_000,
    `the first source to report ${count} errors`,
  );
}
