/**
 * What a snapshot costs the streams, through real gRPC streams of istiods that ask for every type:
 * once meshmux is ready, a change of one kind has each stream look at that kind (and MeshConfig,
 * sent once whatever the snapshot) only, not at each of the types it subscribed to, and every
 * change still reaches every istiod, whichever kind it is of.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IstiodClient } from '../support/istiod-client.js';
import { startFromYaml, tempDir } from '../support/meshmux-harness.js';
import { until } from '../support/deadline.js';
import { DR, SE, VS } from '../support/type-urls.js';

const WAIT_MS = 15_000;
const CLIENTS = 3;

function config(seHost: string, vsHost: string): string {
  const entries = Array.from(
    { length: 10 },
    (_, i) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-${i}, namespace: shop}
spec: {hosts: [${i === 3 ? seHost : `svc-${i}.example.com`}], ports: [{number: 443, name: https, protocol: TLS}], resolution: DNS}
`,
  );
  const route = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: shop}
spec: {hosts: [${vsHost}], http: [{route: [{destination: {host: svc-0.example.com}}]}]}
`;
  return [...entries, route].join('---\n');
}

const RULE = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: svc-0, namespace: shop}
spec: {host: svc-0.example.com, trafficPolicy: {tls: {mode: SIMPLE}}}
`;

function hostsOf(client: IstiodClient, typeUrl: string, key: string): unknown {
  return client.configs(typeUrl).get(key)?.body['hosts'];
}

describe('a snapshot after meshmux is ready', () => {
  let dir: string;
  let dispose: () => Promise<void>;
  let meshmux: Awaited<ReturnType<typeof startFromYaml>>;
  let clients: IstiodClient[] = [];
  const file = (): string => path.join(dir, 'shop.yaml');

  before(async () => {
    ({ dir, dispose } = await tempDir());
    await writeFile(file(), config('svc-3.example.com', 'front.example.com'));
    meshmux = await startFromYaml(`sources: [{name: shop, type: file, path: ./shop.yaml}]\n`, dir);
    clients = Array.from({ length: CLIENTS }, () => new IstiodClient({ address: meshmux.xds }).start());
    for (const c of clients) await c.waitForSync(WAIT_MS);
  });
  after(async () => {
    for (const c of clients) c.close();
    await meshmux.stop();
    await dispose();
  });

  const allAcknowledged = (): Promise<void> =>
    until(() => meshmux.ads.reports().every((s) => s.types.every((t) => !t.awaitingAck)), WAIT_MS, 'ACKs');

  /** Rewrites the file, waits until every istiod holds `done`, and returns the checks and snapshots meanwhile. */
  async function change(
    yaml: string,
    done: (c: IstiodClient) => boolean,
  ): Promise<{ checks: number; snapshots: number }> {
    // Every response acknowledged: nothing left over from what came before.
    await allAcknowledged();
    const before = meshmux.ads.counters().snapshotChecks;
    let snapshots = -1; // the current one, replayed on subscribing
    const counting = meshmux.engine.snapshots$.subscribe(() => snapshots++);
    try {
      await writeFile(file(), yaml);
      await until(() => clients.every(done), WAIT_MS, 'the change at every istiod');
      await allAcknowledged();
    } finally {
      counting.unsubscribe();
    }
    return { checks: meshmux.ads.counters().snapshotChecks - before, snapshots };
  }

  it('has each stream look at the kind that moved, not at every type it asked for', async () => {
    const typesAsked = (clients[0]?.requestedTypeUrls.length ?? 0) + 1; // and MeshConfig
    assert.ok(typesAsked > 10, `an istiod of today asks for many types (${typesAsked})`);
    const { checks, snapshots } = await change(
      config('svc-3.moved.example.com', 'front.example.com'),
      (c) => JSON.stringify(hostsOf(c, SE, 'shop/svc-3')) === '["svc-3.moved.example.com"]',
    );
    assert.ok(snapshots >= 1, 'the change came as a snapshot');
    // ServiceEntry and MeshConfig per stream in the snapshot that moved the kind; MeshConfig only
    // in any other (a report of the source's status, say).
    assert.equal(
      checks,
      CLIENTS * (snapshots + 1),
      `${checks} checks for ${snapshots} snapshots and ${CLIENTS} streams of ${typesAsked} types`,
    );
  });

  it('still brings a change of another kind to every istiod, and nothing else', async () => {
    const sentBefore = clients.map((c) => c.received.length);
    const { checks, snapshots } = await change(
      config('svc-3.moved.example.com', 'front.moved.example.com'),
      (c) => JSON.stringify(hostsOf(c, VS, 'shop/front')) === '["front.moved.example.com"]',
    );
    assert.equal(checks, CLIENTS * (snapshots + 1), `${checks} checks for ${snapshots} snapshots`);
    for (const [i, c] of clients.entries()) {
      const got = c.received.slice(sentBefore[i]).map((r) => r.typeUrl);
      assert.deepEqual(got, [VS], `istiod ${i} got the VirtualServices alone`);
      assert.deepEqual(hostsOf(c, SE, 'shop/svc-3'), ['svc-3.moved.example.com'], 'the ServiceEntry kept');
    }
  });

  it('brings a kind that had no objects, and takes it away when it has none again', async () => {
    const moved = config('svc-3.moved.example.com', 'front.moved.example.com');
    await change(`${moved}---\n${RULE}`, (c) => c.configs(DR).has('shop/svc-0'));
    await change(moved, (c) => c.configs(DR).size === 0);
    for (const c of clients) assert.equal(c.configs(SE).size, 10);
  });
});
