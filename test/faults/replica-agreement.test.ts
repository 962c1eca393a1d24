/**
 * Three replicas reading the same files and the same git repository, each its own process with
 * its own state folder, sharing state through a real etcd. Files name no creation time, so each
 * replica stamps the moment it first reads an object; the replicas must still serve
 * byte-identical responses with the same `version_info` for the same view, for the objects they
 * started with and for one added later. A held update confirmed on one replica is applied on all;
 * a git webhook received by one makes all of them fetch.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringStruct } from '../support/ads-wire.js';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { DEFAULT_NODE_METADATA } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import type { MeshmuxProcess } from '../support/meshmux-process.js';
import { startReplica } from '../support/meshmux-process.js';
import { serviceEntry, TestRepo } from '../support/git-fixtures.js';
import { RawAdsStream } from '../support/raw-ads-stream.js';
import { suiteSkip } from '../support/required-peer.js';
import { SE, VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;

function virtualServices(names: readonly string[]): string {
  return names
    .map(
      (name) => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: shop}
spec: {hosts: [${name}.shop.svc.cluster.local], http: [{route: [{destination: {host: ${name}}}]}]}
`,
    )
    .join('---\n');
}

/** What a replica serves a new istiod of a type (default VirtualService): version and resource bytes (the nonce left out). */
async function served(
  meshmux: MeshmuxProcess,
  typeUrl = VS,
): Promise<{ version: string; bytes: string; count: number }> {
  const stream = new RawAdsStream(meshmux.xds);
  try {
    stream.send({
      node: {
        id: 'sidecar~10.0.0.1~istiod.istio-system~istio-system.svc.cluster.local',
        metadata: stringStruct(DEFAULT_NODE_METADATA),
      },
      type_url: typeUrl,
    });
    const response = await stream.next(WAIT_MS);
    return {
      version: response.version_info,
      bytes: Buffer.concat(response.resources.map((r) => Buffer.from(r.value))).toString('base64'),
      count: response.resources.length,
    };
  } finally {
    stream.close();
  }
}

describe('replicas agree on every byte they serve', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let dir: string;
  let dispose: () => Promise<void>;
  let repo: TestRepo;
  const replicas: MeshmuxProcess[] = [];

  async function replica(name: string): Promise<MeshmuxProcess> {
    const meshmux = await startReplica(
      dir,
      name,
      { endpoint: etcd.endpoint, prefix: '/agree/', leaseTtl: '2s' },
      [
        '  - {name: shop, type: file, path: ./shop.yaml}',
        // Polled once an hour: only a webhook brings a new commit in during the test.
        // A mirror of its own, as separate pods have (the default folder is shared by a host's processes).
        `  - {name: config, type: git, url: '${repo.fileUrl}', interval: 1h, cacheDir: git-${name}, webhook: {insecure: true}}`,
      ],
    );
    replicas.push(meshmux);
    return meshmux;
  }

  /** Resolves once every replica serves the same bytes and version, holding `count` objects. */
  async function agreed(count: number, what: string): Promise<{ version: string; bytes: string }> {
    let last: Array<{ version: string; bytes: string; count: number }> = [];
    await until(
      async () => {
        last = await Promise.all(replicas.map((m) => served(m)));
        const ok = last.every(
          (s) => s.count === count && s.bytes === last[0]?.bytes && s.version === last[0]?.version,
        );
        return ok;
      },
      WAIT_MS,
      what,
    );
    return last[0] as { version: string; bytes: string };
  }

  before(async () => {
    etcd = await EtcdServer.start();
    ({ dir, dispose } = await tempDir('meshmux-agree-'));
    await writeFile(path.join(dir, 'shop.yaml'), virtualServices(['reviews', 'ratings', 'cart']));
    repo = await TestRepo.create(dir);
    await repo.commitAndPush({ 'se.yaml': serviceEntry('payments', 'shop', 'payments.example.com') }, 'one');
  });
  after(async () => {
    for (const m of replicas) await m.kill('SIGKILL').catch(() => undefined);
    await etcd.dispose();
    await dispose();
  });

  it('serves byte-identical responses from replicas that first read the objects at different times', async () => {
    await replica('a');
    // The others start later, so each would stamp other creation times of its own.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await replica('b');
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await replica('c');
    const first = await agreed(3, 'three replicas serving the same three objects byte for byte');
    assert.notEqual(first.version, '');

    // An object added while they all run is stamped by each when it reads it; they converge too.
    await writeFile(path.join(dir, 'shop.yaml'), virtualServices(['reviews', 'ratings', 'cart', 'checkout']));
    const second = await agreed(4, 'three replicas serving the added object byte for byte');
    assert.notEqual(second.version, first.version);
  });

  it('applies a held update confirmed on one replica on every replica', async () => {
    // Emptying the file is held by the default guard (keepOnEmpty) on every replica.
    await writeFile(path.join(dir, 'shop.yaml'), '');
    await until(
      async () => {
        const held = await Promise.all(replicas.map((m) => heldDigest(m)));
        return held.every((d) => d !== undefined && d === held[0]);
      },
      WAIT_MS,
      'the same update held on every replica',
    );
    assert.equal((await served(replicas[1] as MeshmuxProcess)).count, 4, 'held: still served');

    const confirmedAt = performance.now();
    const answer = await fetch(`${(replicas[0] as MeshmuxProcess).admin}/debug/sources/shop/confirm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(answer.status, 200);
    await until(
      async () => (await Promise.all(replicas.map((m) => served(m)))).every((s) => s.count === 0),
      WAIT_MS,
      'the confirmed update applied on every replica',
    );
    console.log(
      `confirmation on one replica applied on all three in ${Math.round(performance.now() - confirmedAt)} ms`,
    );
  });

  it('makes every replica fetch when one receives a git webhook', async () => {
    const before = await Promise.all(replicas.map((m) => served(m, SE)));
    assert.ok(before.every((s) => s.count === 1));
    await repo.commitAndPush({ 'se2.yaml': serviceEntry('ledger', 'shop', 'ledger.example.com') }, 'two');
    const hookedAt = performance.now();
    const answer = await fetch(`${(replicas[2] as MeshmuxProcess).http}/hooks/git/config`, {
      method: 'POST',
    });
    assert.equal(answer.status, 202);
    await until(
      async () => (await Promise.all(replicas.map((m) => served(m, SE)))).every((s) => s.count === 2),
      WAIT_MS,
      'the new commit served by every replica after a webhook to one',
    );
    console.log(
      `webhook on one replica: all three serve the new commit in ${Math.round(performance.now() - hookedAt)} ms`,
    );
  });
});

/** The digest of the update a replica holds for the `shop` source, if any. */
async function heldDigest(meshmux: MeshmuxProcess): Promise<string | undefined> {
  const sources = await meshmux.debug<Array<{ name: string; held?: { digest: string } }>>('sources');
  return sources.find((s) => s.name === 'shop')?.held?.digest;
}
