import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { CLI } from '../support/meshmux-cli.js';
import { parseMeshmuxConfig } from '../../src/settings/meshmux-config.js';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { createTestCa } from '../support/test-pki.js';
import { EF, VS } from '../support/type-urls.js';

const run = promisify(execFile);

const MESH = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: storefront, namespace: shop, labels: {team: shop}}
spec: {hosts: [storefront], http: [{route: [{destination: {host: storefront}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: canary-only, namespace: shop, labels: {istio.io/rev: canary}}
spec: {hosts: [canary], http: [{route: [{destination: {host: canary}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: charge, namespace: payments}
spec: {hosts: [charge], http: [{route: [{destination: {host: charge}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: internal, namespace: ops}
spec: {hosts: [internal], http: [{route: [{destination: {host: internal}}]}]}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua, namespace: istio-system}
spec: {configPatches: [{applyTo: HTTP_FILTER, patch: {operation: INSERT_BEFORE, value: {name: envoy.lua}}}]}
`;

/** The policy shape of the issue, as written. */
const POLICIES = `policies:
  - name: canary
    match:
      metadata: {ISTIO_REVISION: canary}
    allow:
      namespaces: ["shop", "payments"]
  - name: fleet
    match:
      peerCidrs: ["127.0.0.0/8"]
    allow:
      namespaces: ["*"]
    deny:
      kinds: [EnvoyFilter]
`;

function names(client: IstiodClient, typeUrl: string): string[] {
  return [...client.configs(typeUrl).keys()].sort();
}

describe('per-istiod policy views', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  const clients: IstiodClient[] = [];
  const connect = (o: Partial<ConstructorParameters<typeof IstiodClient>[0]> = {}) => {
    const c = new IstiodClient({ address: meshmux.xds, backoff: { maxMs: 200 }, ...o }).start();
    clients.push(c);
    return c;
  };
  const config = (policies: string) =>
    `sources:\n  - name: local\n    type: file\n    path: ./mesh\n${policies}`;

  before(async () => {
    ({ dir, dispose } = await tempDir());
    await run('mkdir', ['-p', path.join(dir, 'mesh')]);
    await writeFile(path.join(dir, 'mesh', 'all.yaml'), MESH);
    meshmux = await startFromYaml(config(POLICIES), dir);
  });
  after(async () => {
    for (const c of clients) c.close();
    await meshmux.stop();
    await dispose();
  });

  it('gives a canary istiod only its namespaces, with objects of its revision', async () => {
    const canary = connect({ revision: 'canary' });
    await canary.waitForSync(10_000);
    assert.deepEqual(names(canary, VS), ['payments/charge', 'shop/canary-only', 'shop/storefront']);
    assert.deepEqual(names(canary, EF), []);
  });

  it('filters objects of another revision before sending them, as istiod would after', async () => {
    const stable = connect({ revision: 'stable' });
    await stable.waitForSync(10_000);
    assert.deepEqual(names(stable, VS), ['ops/internal', 'payments/charge', 'shop/storefront']);
    const sent = stable.received.filter((r) => r.typeUrl === VS).at(-1);
    assert.equal(sent?.resourceCount, 3, 'the canary object never reached the wire');
    assert.deepEqual(names(stable, EF), [], 'the fleet policy denies EnvoyFilters');
  });

  it('lets clients of one view share the responses built once for it', async () => {
    const before = meshmux.ads.counters().assemblies;
    const a = connect({
      revision: 'stable',
      nodeId: 'sidecar~10.0.0.1~istiod-a.istio-system~istio-system.svc.cluster.local',
    });
    const b = connect({
      revision: 'stable',
      nodeId: 'sidecar~10.0.0.2~istiod-b.istio-system~istio-system.svc.cluster.local',
    });
    await Promise.all([a.waitForSync(10_000), b.waitForSync(10_000)]);
    assert.equal(meshmux.ads.counters().assemblies, before, 'no response was assembled for them');
  });

  it('lists what a client would receive at /debug/preview without connecting it', async () => {
    const url = `${meshmux.admin}/debug/preview?node=sidecar~1.2.3.4~x.ns~ns.svc.cluster.local&meta.ISTIO_REVISION=canary`;
    const preview = (await (await fetch(url)).json()) as {
      policy: string;
      types: Array<{ typeUrl: string; objects: Array<{ name: string }> }>;
    };
    assert.equal(preview.policy, 'canary');
    const vs = preview.types.find((t) => t.typeUrl === VS);
    assert.deepEqual(
      vs?.objects.map((o) => o.name),
      ['payments/charge', 'shop/canary-only', 'shop/storefront'],
    );
  });

  it('removes exactly the newly forbidden objects when a policy narrows, and sends nothing to others', async () => {
    const canary = connect({ revision: 'canary' });
    const fleet = connect();
    await Promise.all([canary.waitForSync(10_000), fleet.waitForSync(10_000)]);
    const canaryReceived = canary.received.length;
    const fleetUpdates = fleet.updates;
    const narrowed = POLICIES.replace(
      'kinds: [EnvoyFilter]',
      'kinds: [EnvoyFilter]\n      namespaces: [ops]',
    );
    await meshmux.reload(parseMeshmuxConfig(config(narrowed), 'reloaded', dir));
    await fleet.waitFor((c) => !c.configs(VS).has('ops/internal'), 10_000);
    assert.equal(fleet.updates - fleetUpdates, 1, 'one deletion, nothing else');
    // Without a revision of its own, the fleet istiod also gets revision-labelled objects (istiod's rule).
    assert.deepEqual(names(fleet, VS), ['payments/charge', 'shop/canary-only', 'shop/storefront']);
    assert.equal(canary.received.length, canaryReceived, 'the canary view did not change');
    // Both views serve storefront: its change is framed once, in the part of the kind the new
    // configuration's views share, the canary view's included (its filter unchanged, its
    // clients move to the new configuration's split). Two parts of VirtualServices: the objects
    // both policies admit, and those of them labelled for the canary revision.
    await writeFile(
      path.join(dir, 'mesh', 'all.yaml'),
      MESH.replace('hosts: [storefront]', 'hosts: [storefront, shop]'),
    );
    const changed = (c: IstiodClient) =>
      (c.configs(VS).get('shop/storefront')?.body['hosts'] as string[] | undefined)?.length === 2;
    await Promise.all([canary.waitFor(changed, 10_000), fleet.waitFor(changed, 10_000)]);
    assert.equal(meshmux.ads.counters().blockLists, 2, 'the parts of one split only');
    await writeFile(path.join(dir, 'mesh', 'all.yaml'), MESH);
    await meshmux.reload(parseMeshmuxConfig(config(POLICIES), 'restored', dir));
    await fleet.waitFor((c) => c.configs(VS).has('ops/internal'), 10_000);
  });
});

describe('clients no policy admits', () => {
  it('are refused with PERMISSION_DENIED naming the identity they presented', async () => {
    const { dir, dispose } = await tempDir();
    await writeFile(path.join(dir, 'vs.yaml'), MESH);
    const meshmux = await startFromYaml(
      `sources: [{name: local, type: file, path: ./vs.yaml}]\npolicies: [{name: remote-only, match: {peerCidrs: ["10.0.0.0/8"]}}]\n`,
      dir,
    );
    const client = new IstiodClient({
      address: meshmux.xds,
      backoff: { initialMs: 5_000, maxMs: 5_000 },
    }).start();
    try {
      await client.waitFor((c) => c.streamEnds.length > 0, 10_000);
      const end = client.streamEnds[0];
      assert.equal(end?.code, grpc.status.PERMISSION_DENIED);
      assert.match(
        end?.details ?? '',
        /no policy matches the client \(node=sidecar~10\.1\.2\.3~istiod-abc\.istio-system\S* peer=127\.0\.0\.1:\d+/,
      );
      assert.equal(client.responses.size, 0, 'nothing was sent');
    } finally {
      client.close();
      await meshmux.stop();
      await dispose();
    }
  });
});

describe('TLS', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  let pki: Awaited<ReturnType<typeof createTestCa>>;
  let tlsAddress: string;
  const clients: IstiodClient[] = [];

  before(async () => {
    ({ dir, dispose } = await tempDir());
    pki = await createTestCa(dir);
    const server = await pki.issue('server', 'DNS:localhost,IP:127.0.0.1');
    await copyFile(server.cert, path.join(dir, 'live.pem'));
    await copyFile(server.key, path.join(dir, 'live.key'));
    await writeFile(path.join(dir, 'vs.yaml'), MESH);
    meshmux = await startFromYaml(
      `server:
  xdsTls: 127.0.0.1:0
  tls: {cert: ./live.pem, key: ./live.key, clientCa: ${JSON.stringify(pki.caCert)}, refreshInterval: 100ms}
sources: [{name: local, type: file, path: ./vs.yaml}]
policies:
  - name: meshmux-peers
    match: {certSan: ["spiffe://cluster.local/ns/istio-system/*"]}
    requireClientCert: true
  - name: istiods
    match: {peerCidrs: ["127.0.0.0/8"]}
    deny: {kinds: [EnvoyFilter]}
`,
      dir,
    );
    assert.ok(meshmux.xdsTlsPort !== undefined);
    tlsAddress = `localhost:${meshmux.xdsTlsPort}`;
  });
  after(async () => {
    for (const c of clients) c.close();
    await meshmux.stop();
    await dispose();
  });

  it('serves an istiod over server-authenticated TLS, without a client certificate', async () => {
    const client = new IstiodClient({
      address: tlsAddress,
      credentials: grpc.credentials.createSsl(await pki.read(pki.caCert)),
    }).start();
    clients.push(client);
    await client.waitForSync(10_000);
    assert.deepEqual(names(client, EF), []);
    assert.equal(names(client, VS).length, 4);
  });

  it('recognises a client certificate’s SAN and applies the policy that asks for it', async () => {
    const peer = await pki.issue('peer', 'URI:spiffe://cluster.local/ns/istio-system/sa/meshmux');
    const creds = grpc.credentials.createSsl(
      await pki.read(pki.caCert),
      await pki.read(peer.key),
      await pki.read(peer.cert),
    );
    const client = new IstiodClient({ address: tlsAddress, credentials: creds }).start();
    clients.push(client);
    await client.waitForSync(10_000);
    assert.deepEqual(names(client, EF), ['istio-system/lua'], 'the peer policy allows EnvoyFilters');
    const syncz = (await (await fetch(`${meshmux.admin}/debug/syncz`)).json()) as Array<{
      policy: string;
      client: { sans: string[] };
    }>;
    assert.ok(
      syncz.some(
        (s) =>
          s.policy === 'meshmux-peers' &&
          s.client.sans.includes('URI:spiffe://cluster.local/ns/istio-system/sa/meshmux'),
      ),
    );
  });

  it('keeps streams open across a certificate rotation and presents the new certificate to new clients', async () => {
    const first = new IstiodClient({
      address: tlsAddress,
      credentials: grpc.credentials.createSsl(await pki.read(pki.caCert)),
    }).start();
    clients.push(first);
    await first.waitForSync(10_000);
    const other = await createTestCa(dir, 'rotated CA');
    const rotated = await other.issue('server-2', 'DNS:localhost,IP:127.0.0.1');
    await copyFile(rotated.key, path.join(dir, 'live.key'));
    await copyFile(rotated.cert, path.join(dir, 'live.pem'));
    const second = new IstiodClient({
      address: tlsAddress,
      credentials: grpc.credentials.createSsl(await other.read(other.caCert)),
      backoff: { maxMs: 100 },
    }).start();
    clients.push(second);
    await second.waitForSync(10_000);
    await writeFile(path.join(dir, 'vs.yaml'), MESH.replace('host: charge}', 'host: charge-v2}'));
    await first.waitFor(
      (c) => JSON.stringify(c.configs(VS).get('payments/charge')?.body).includes('charge-v2'),
      10_000,
    );
    assert.equal(first.streams, 1, 'the first client never reconnected');
  });
});

describe('meshmux preview', () => {
  it('prints, per type, the names and versions a client would receive', async () => {
    const { dir, dispose } = await tempDir();
    try {
      await writeFile(path.join(dir, 'mesh.yaml'), MESH);
      await writeFile(
        path.join(dir, 'meshmux.yaml'),
        `sources: [{name: local, type: file, path: ./mesh.yaml}]\n${POLICIES}`,
      );
      const { stdout } = await run(
        process.execPath,
        [
          CLI,
          'preview',
          '--config',
          'meshmux.yaml',
          '--node-id',
          'sidecar~1.2.3.4~i.x~x.svc.cluster.local',
          '--meta',
          'ISTIO_REVISION=canary',
        ],
        { cwd: dir, env: { ...process.env, MESHMUX_LOG_LEVEL: 'silent' } },
      );
      const out = JSON.parse(stdout) as {
        policy: string;
        types: Array<{ typeUrl: string; objects: Array<{ name: string; version: string }> }>;
      };
      assert.equal(out.policy, 'canary');
      const vs = out.types.find((t) => t.typeUrl === VS);
      assert.deepEqual(
        vs?.objects.map((o) => o.name),
        ['payments/charge', 'shop/canary-only', 'shop/storefront'],
      );
      assert.ok(vs?.objects.every((o) => o.version.length > 0));
    } finally {
      await dispose();
    }
  });
});
