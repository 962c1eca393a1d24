import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { firstMatch } from '../support/deadline.js';
import { DR, SE, VS } from '../support/type-urls.js';

/** A POST the admin listener accepts. */
const JSON_POST = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' };

function vs(name: string, namespace: string, host: string, extra = ''): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  hosts: [${host}]
  http: [{route: [{destination: {host: ${host}}}]${extra}}]
---
`;
}

function se(name: string, namespace: string, host: string): string {
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: ${namespace}}
spec: {hosts: [${host}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
---
`;
}

describe('merging a platform source and a team source', () => {
  let root: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  let client: IstiodClient;

  before(async () => {
    ({ dir: root, dispose } = await tempDir());
    await mkdir(path.join(root, 'platform'));
    await mkdir(path.join(root, 'team-a'));
    await writeFile(
      path.join(root, 'platform', 'shared.yaml'),
      vs('checkout', 'team-a', 'checkout.team-a.svc.cluster.local', ', timeout: 1s') +
        se('payments-api', 'platform', 'pay.example.com'),
    );
    await writeFile(
      path.join(root, 'team-a', 'mine.yaml'),
      vs('checkout', 'team-a', 'checkout.team-a.svc.cluster.local', ', timeout: 9s') +
        vs('cart', 'team-a-dev', 'cart.team-a-dev.svc.cluster.local') +
        vs('sneaky', 'shop', 'shop.svc.cluster.local') +
        vs('implicit', '', 'implicit.team-a.svc.cluster.local').replace('namespace: }', '}') +
        se('also-pay', 'team-a', 'pay.example.com'),
    );
    // The configuration shape of the issue, as written.
    meshmux = await startFromYaml(
      `sources:
  - name: platform
    type: file
    path: ./platform
    priority: 200
  - name: team-a
    type: file
    path: ./team-a
    priority: 100
    namespace: team-a
    allow:
      namespaces: ["team-a", "team-a-*"]
      kinds: [VirtualService, DestinationRule]
`,
      root,
    );
    client = new IstiodClient({ address: meshmux.xds }).start();
    await client.waitForSync(10_000);
  });
  after(async () => {
    client.close();
    await meshmux.stop();
    await dispose();
  });

  it('serves the higher-priority definition of an object both sources define, with its provenance', () => {
    const checkout = client.configs(VS).get('team-a/checkout');
    assert.equal(checkout?.annotations['meshmux.io/source'], 'platform');
    const http = checkout?.body['http'] as Array<{ timeout?: { seconds?: number } }>;
    assert.equal(http[0]?.timeout?.seconds, 1);
  });

  it('admits a team’s objects inside its namespaces and defaults its namespace', () => {
    assert.ok(client.configs(VS).has('team-a-dev/cart'));
    assert.equal(client.configs(VS).get('team-a/implicit')?.annotations['meshmux.io/source'], 'team-a');
  });

  it('drops what a source may not write, counts it and lists it on /debug/rejections', async () => {
    assert.ok(!client.configs(VS).has('shop/sneaky'));
    assert.ok(!client.configs(SE).has('team-a/also-pay'));
    const rejections = (await (await fetch(`${meshmux.admin}/debug/rejections`)).json()) as Array<
      Record<string, string>
    >;
    assert.deepEqual(
      rejections.map((r) => `${r['source']} ${r['namespace']}/${r['name']} ${r['reason']}`).sort(),
      ['team-a shop/sneaky namespace-not-allowed', 'team-a team-a/also-pay kind-not-allowed'],
    );
  });

  it('reports the object both sources define on /debug/conflicts, resolved by priority', async () => {
    const conflicts = (await (await fetch(`${meshmux.admin}/debug/conflicts`)).json()) as Array<{
      type: string;
      subject: string;
      resolution: string;
      parties: Array<{ source: string; served: boolean }>;
    }>;
    const sameKey = conflicts.find((c) => c.type === 'same-key');
    assert.equal(sameKey?.subject, 'networking.istio.io/VirtualService|team-a/checkout');
    assert.equal(sameKey?.resolution, 'priority');
    assert.deepEqual(
      sameKey?.parties.map((p) => [p.source, p.served]),
      [
        ['platform', true],
        ['team-a', false],
      ],
    );
  });

  it('hands an object to the next holder in the same snapshot when the winner drops it', async () => {
    const versions = client.received.length;
    await writeFile(
      path.join(root, 'platform', 'shared.yaml'),
      se('payments-api', 'platform', 'pay.example.com'),
    );
    await client.waitFor(
      (c) => c.configs(VS).get('team-a/checkout')?.annotations['meshmux.io/source'] === 'team-a',
      10_000,
    );
    const vsResponses = client.received.slice(versions).filter((r) => r.typeUrl === VS);
    assert.equal(vsResponses.length, 1, 'one response moved the object to its new holder');
    assert.ok(
      vsResponses.every((r) => r.resourceCount === 3),
      'never a response without it',
    );
  });

  it('holds a source update that would delete most of its objects until an operator confirms it', async () => {
    const many = Array.from({ length: 14 }, (_, i) =>
      vs(`bulk-${i}`, 'team-a', `bulk-${i}.example.com`),
    ).join('');
    await writeFile(path.join(root, 'team-a', 'bulk.yaml'), many);
    await client.waitFor((c) => c.configs(VS).has('team-a/bulk-13'), 10_000);
    await rm(path.join(root, 'team-a', 'bulk.yaml'));
    await firstMatch(
      meshmux.engine.snapshots$,
      (s) => s.sources[1]?.held !== undefined,
      15_000,
      'team-a’s update to be held',
    );
    // A later change from the other source: once it has arrived, a deletion would have too.
    const marker = path.join(root, 'platform', 'marker.yaml');
    await writeFile(marker, vs('marker-held', 'platform', 'marker-held.example.com'));
    await client.waitFor(
      (c) => c.configs(VS).has('platform/marker-held'),
      10_000,
      () => 'the marker',
    );
    assert.ok(client.configs(VS).has('team-a/bulk-13'), 'nothing deleted while held');
    await rm(marker);
    await client.waitFor(
      (c) => !c.configs(VS).has('platform/marker-held'),
      10_000,
      () => 'the marker gone',
    );
    const sources = (await (await fetch(`${meshmux.admin}/debug/sources`)).json()) as Array<{
      held?: { reason: string; deletions: number };
    }>;
    assert.equal(sources[1]?.held?.reason, 'mass-delete');
    assert.equal(sources[1]?.held?.deletions, 14);
    const wrong = await fetch(`${meshmux.admin}/debug/sources/platform/confirm`, JSON_POST);
    assert.equal(wrong.status, 409, 'platform holds nothing');
    const unknown = await fetch(`${meshmux.admin}/debug/sources/nobody/confirm`, JSON_POST);
    assert.equal(unknown.status, 404, 'no such source');
    assert.ok(client.configs(VS).has('team-a/bulk-13'), 'a refused confirmation applies nothing');
    const confirm = await fetch(`${meshmux.admin}/debug/sources/team-a/confirm`, JSON_POST);
    assert.equal(confirm.status, 200);
    await client.waitFor((c) => !c.configs(VS).has('team-a/bulk-13'), 10_000);
    assert.ok(client.configs(VS).has('team-a/checkout'));
  });

  it('keeps a source’s objects when its whole state suddenly turns empty', async () => {
    await rm(path.join(root, 'platform', 'shared.yaml'));
    await firstMatch(
      meshmux.engine.snapshots$,
      (s) => s.sources[0]?.held?.reason === 'empty',
      15_000,
      'platform’s empty state to be held',
    );
    await writeFile(
      path.join(root, 'team-a', 'marker.yaml'),
      vs('marker-empty', 'team-a', 'marker.example.com'),
    );
    await client.waitFor(
      (c) => c.configs(VS).has('team-a/marker-empty'),
      10_000,
      () => 'the marker',
    );
    assert.ok(client.configs(SE).has('platform/payments-api'));
    assert.equal(client.configs(DR).size, 0);
  });
});
