/**
 * Two clusters read by `type: kubernetes` sources, served to an istiod stand-in over real gRPC:
 * objects of both merged by priority with their provenance, added/changed/deleted objects
 * delivered, a watch that expires (410) in the middle of a burst of changes, and an API server
 * that goes away and comes back. The API servers are the in-process fake whose fidelity
 * test/fake-kube-apiserver.test.ts proves with the real kubectl.
 */
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RunningMeshmux } from '../../src/app.js';
import { firstMatch } from '../support/deadline.js';
import { FakeKubeApiServer, type KubeObject, type ServedKind } from '../support/fake-kube-apiserver.js';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { SIDECAR, VS } from '../support/type-urls.js';

const VIRTUAL_SERVICES: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'VirtualService',
  plural: 'virtualservices',
};

function vs(name: string, host: string, extra: Partial<KubeObject['metadata']> = {}): KubeObject {
  return {
    kind: 'VirtualService',
    metadata: { name, namespace: 'shop', ...extra },
    spec: { hosts: [host], http: [{ route: [{ destination: { host } }] }] },
  };
}

/** The first host of every VirtualService the istiod holds: `ns/name` → host. */
function hosts(client: IstiodClient): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, config] of client.configs(VS)) {
    out.set(name, (config.body['hosts'] as string[] | undefined)?.[0] ?? '');
  }
  return out;
}

/** The hosts the API server holds now, as the istiod should hold them. */
function expectedHosts(api: FakeKubeApiServer, names: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of names) {
    const found = api.get('VirtualService', 'shop', name);
    if (found !== undefined) out.set(`shop/${name}`, (found.spec as { hosts: string[] }).hosts[0] ?? '');
  }
  return out;
}

function sorted(map: ReadonlyMap<string, string>): Array<[string, string]> {
  return [...map].sort(([a], [b]) => a.localeCompare(b));
}

describe('Kubernetes sources, end to end', () => {
  let east: FakeKubeApiServer;
  let west: FakeKubeApiServer;
  let meshmux: RunningMeshmux & { xds: string; admin: string };
  let client: IstiodClient;
  let markersDir: string;
  let dispose: () => Promise<void>;
  let markers = 0;

  /** Resolves once the merged snapshot reports source `name` in `state`. */
  const sourceState = (name: string, state: string): Promise<unknown> =>
    firstMatch(
      meshmux.engine.snapshots$,
      (s) => s.sources.some((x) => x.name === name && x.state === state),
      30_000,
      `source ${name} to be ${state}`,
    );

  /** A change through another source; once the istiod holds it, every earlier change has arrived. */
  const marker = async (): Promise<void> => {
    markers += 1;
    const name = `marker-${markers}`;
    await writeFile(
      path.join(markersDir, `${name}.yaml`),
      `apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: ${name}, namespace: shop}\nspec: {outboundTrafficPolicy: {mode: REGISTRY_ONLY}}\n`,
    );
    await client.waitFor(
      (c) => c.configs(SIDECAR).has(`shop/${name}`),
      15_000,
      () => `marker ${name}`,
    );
  };

  before(async () => {
    east = await FakeKubeApiServer.start([VIRTUAL_SERVICES]);
    west = await FakeKubeApiServer.start([VIRTUAL_SERVICES]);
    east.put(
      vs('cart', 'cart.east.example.com', {
        labels: { app: 'cart' },
        creationTimestamp: '2024-05-01T10:00:00Z',
      }),
    );
    // East never empties: a source that suddenly holds nothing is held back by design.
    east.put(vs('stays', 'stays.east.example.com'));
    west.put(vs('cart', 'cart.west.example.com'));
    west.put(vs('only-west', 'only-west.example.com'));
    const temp = await tempDir('kube-e2e');
    dispose = temp.dispose;
    markersDir = path.join(temp.dir, 'markers');
    await mkdir(markersDir);
    await writeFile(path.join(temp.dir, 'east.kubeconfig'), east.kubeconfig('east'));
    await writeFile(path.join(temp.dir, 'west.kubeconfig'), west.kubeconfig('west'));
    meshmux = await startFromYaml(
      `
sources:
  - name: east
    type: kubernetes
    kubeconfig: ./east.kubeconfig
    kinds: [VirtualService]
    priority: 200
  - name: west
    type: kubernetes
    kubeconfig: ./west.kubeconfig
    kinds: [VirtualService]
    priority: 100
  - name: markers
    type: file
    path: ./markers
`,
      temp.dir,
    );
    client = new IstiodClient({ address: meshmux.xds }).start();
    await client.waitForSync(15_000);
  });
  after(async () => {
    client.close();
    await meshmux.stop();
    await east.stop();
    await west.stop();
    await dispose();
  });

  it('serves both clusters, the higher priority where both define an object, with provenance, labels and creation time', async () => {
    await client.waitFor(
      (c) => c.configs(VS).has('shop/only-west') && c.configs(VS).has('shop/cart'),
      15_000,
      () => `both clusters' objects; holding ${[...client.configs(VS).keys()].join(', ')}`,
    );
    const cart = client.configs(VS).get('shop/cart');
    assert.equal(cart?.annotations['meshmux.io/source'], 'east');
    assert.equal(hosts(client).get('shop/cart'), 'cart.east.example.com');
    assert.deepEqual(cart?.labels, { app: 'cart' });
    assert.equal(cart?.createTime?.seconds, Date.parse('2024-05-01T10:00:00Z') / 1000);
    assert.equal(client.configs(VS).get('shop/only-west')?.annotations['meshmux.io/source'], 'west');
    const conflicts = (await (await fetch(`${meshmux.admin}/debug/conflicts`)).json()) as Array<{
      subject: string;
      resolution: string;
      parties: Array<{ source: string; served: boolean }>;
    }>;
    const cartConflict = conflicts.find((c) => c.subject.endsWith('|shop/cart'));
    assert.equal(cartConflict?.resolution, 'priority');
    assert.deepEqual(
      cartConflict?.parties.map((p) => [p.source, p.served]),
      [
        ['east', true],
        ['west', false],
      ],
    );
  });

  it('delivers objects added, changed and deleted in a cluster, and hands an object to the other cluster when the winner deletes it', async () => {
    east.put(vs('added', 'added.example.com'));
    await client.waitFor(
      (c) => hosts(c).get('shop/added') === 'added.example.com',
      15_000,
      () => 'added',
    );
    east.put(vs('added', 'changed.example.com'));
    await client.waitFor(
      (c) => hosts(c).get('shop/added') === 'changed.example.com',
      15_000,
      () => 'changed',
    );
    east.remove('VirtualService', 'shop', 'added');
    await client.waitFor(
      (c) => !c.configs(VS).has('shop/added'),
      15_000,
      () => 'deleted',
    );

    east.remove('VirtualService', 'shop', 'cart');
    await client.waitFor(
      (c) => hosts(c).get('shop/cart') === 'cart.west.example.com',
      15_000,
      () => 'cart from west once east deleted it',
    );
    assert.equal(client.configs(VS).get('shop/cart')?.annotations['meshmux.io/source'], 'west');
    assert.deepEqual(client.problems, []);
  });

  for (const style of ['event', 'http'] as const) {
    it(`loses and duplicates nothing when the watch expires (410 as ${style === 'event' ? 'an ERROR event' : 'an HTTP status'}) in a burst of changes`, async () => {
      const names = Array.from({ length: 120 }, (_, i) => `burst-${style}-${i}`);
      const lists = (): number =>
        east.requests.filter((r) => r.includes('/virtualservices') && !r.includes('watch=')).length;
      const listsBefore = lists();
      for (const [i, name] of names.entries()) {
        east.put(vs(name, `${name}.v1.example.com`));
        if (i === 60) east.compact(style);
      }
      // After the compaction: changes, deletions and re-creations the relist must reconcile.
      for (const name of names.slice(0, 20)) east.remove('VirtualService', 'shop', name);
      for (const name of names.slice(20, 40)) east.put(vs(name, `${name}.v2.example.com`));
      east.compact(style);
      for (const name of names.slice(0, 10)) east.put(vs(name, `${name}.again.example.com`));
      for (const name of names.slice(100)) east.remove('VirtualService', 'shop', name);

      const expected = expectedHosts(east, names);
      const held = (): Map<string, string> =>
        new Map([...hosts(client)].filter(([name]) => name.startsWith(`shop/burst-${style}-`)));
      await client.waitFor(
        () => JSON.stringify(sorted(held())) === JSON.stringify(sorted(expected)),
        30_000,
        () => `the burst's final state; ${held().size} of ${expected.size} held`,
      );
      await marker();
      assert.deepEqual(sorted(held()), sorted(expected), 'nothing deleted or reverted after the relist');
      assert.equal(expected.size, 90);
      assert.ok(lists() > listsBefore, 'the expired watch was answered by a relist');
      assert.deepEqual(
        client.problems.filter((p) => p.reason === 'duplicate-name'),
        [],
        'no object twice in one response',
      );
    });
  }

  it('keeps serving a cluster while its API server is away, stale, and catches up when it returns', async () => {
    const before = new Map([...hosts(client)].filter(([, host]) => host.includes('west')));
    assert.ok(before.has('shop/only-west'));
    const stale = sourceState('west', 'stale');
    await west.stop();
    await stale;
    await marker();
    assert.deepEqual(
      sorted(new Map([...hosts(client)].filter(([, host]) => host.includes('west')))),
      sorted(before),
      'the stale cluster’s objects are still served',
    );
    west.put(vs('while-away', 'while-away.west.example.com'));
    west.remove('VirtualService', 'shop', 'only-west');
    const synced = sourceState('west', 'synced');
    await west.restart();
    await synced;
    await client.waitFor(
      (c) => c.configs(VS).has('shop/while-away') && !c.configs(VS).has('shop/only-west'),
      30_000,
      () => 'the changes made while the API server was away',
    );
  });
});
