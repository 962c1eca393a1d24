/**
 * Two replicas, each its own process with its own state folder, sharing state through a real etcd,
 * both with an istiod stand-in connected, and the same slip made in both configuration files (a
 * namespace misspelt in a policy): each holds the change, and a confirmation on one applies it on
 * both. Needs `etcd` (Debian package `etcd-server`); skipped without it.
 */
import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { until } from '../support/deadline.js';
import { EtcdServer, etcdMissing } from '../support/etcd-server.js';
import { virtualServiceYaml } from '../support/fault-kit.js';
import { IstiodClient } from '../support/istiod-client.js';
import { tempDir } from '../support/meshmux-harness.js';
import { type MeshmuxProcess, startReplica } from '../support/meshmux-process.js';
import { suiteSkip } from '../support/required-peer.js';
import { VS } from '../support/type-urls.js';

const WAIT_MS = 20_000;

const policy = (namespaces: string): string[] => [
  'policies:',
  `  - { name: shops, match: { nodeId: 'shop-*' }, allow: { namespaces: [${namespaces}] } }`,
];

async function heldDigest(meshmux: MeshmuxProcess): Promise<string | undefined> {
  return (await meshmux.debug<{ held?: { digest: string } }>('policies')).held?.digest;
}

describe('replicas holding the same change of the policies', { skip: suiteSkip(etcdMissing()) }, () => {
  let etcd: EtcdServer;
  let dir: string;
  let dispose: () => Promise<void>;
  const replicas: MeshmuxProcess[] = [];
  const clients: IstiodClient[] = [];

  before(async () => {
    etcd = await EtcdServer.start();
    ({ dir, dispose } = await tempDir('meshmux-replica-policies-'));
    const shop = Array.from({ length: 20 }, (_, i) => virtualServiceYaml('shop', `svc-${i}`)).join('');
    await writeFile(path.join(dir, 'objects.yaml'), shop + virtualServiceYaml('web', 'front'));
  });
  after(async () => {
    for (const c of clients) c.close();
    for (const m of replicas) await m.kill('SIGKILL').catch(() => undefined);
    await etcd.dispose();
    await dispose();
  });

  it('applies on every replica a held change confirmed on one', async () => {
    for (const name of ['a', 'b']) {
      const meshmux = await startReplica(
        dir,
        name,
        { endpoint: etcd.endpoint, prefix: '/policies/', leaseTtl: '2s' },
        ['  - {name: local, type: file, path: ./objects.yaml}', ...policy('shop, web')],
      );
      replicas.push(meshmux);
      const client = new IstiodClient({ address: meshmux.xds, nodeId: `shop-${name}` }).start();
      clients.push(client);
      await client.waitFor(
        (c) => c.configs(VS).size === 21,
        WAIT_MS,
        () => `replica ${name} served`,
      );
    }
    // The same slip reaches both files (a ConfigMap mounted in both pods).
    for (const name of ['a', 'b']) {
      const file = path.join(dir, `${name}.yaml`);
      const text = await readFile(file, 'utf8');
      await writeFile(file, text.replace('[shop, web]', '[shp, web]'));
    }
    await until(
      async () => {
        const held = await Promise.all(replicas.map((m) => heldDigest(m)));
        return held.every((d) => d !== undefined && d === held[0]);
      },
      WAIT_MS,
      'the same change held on both replicas',
    );
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(
      clients.map((c) => c.configs(VS).size),
      [21, 21],
      'held: nothing withdrawn on either replica',
    );
    const confirmedAt = performance.now();
    const answer = await fetch(`${(replicas[0] as MeshmuxProcess).admin}/debug/policies/confirm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(answer.status, 200);
    for (const c of clients) {
      await c.waitFor(
        (x) => x.configs(VS).size === 1,
        WAIT_MS,
        () => 'the confirmed change on both',
      );
    }
    assert.deepEqual(await Promise.all(replicas.map((m) => heldDigest(m))), [undefined, undefined]);
    console.log(
      `# a change of the policies confirmed on one replica applied on both in ${Math.round(performance.now() - confirmedAt)} ms`,
    );
  });

  it('judges a change for the istiods of every replica, and on a replica started on a new node', async () => {
    const etcdOptions = { endpoint: etcd.endpoint, prefix: '/judged-together/', leaseTtl: '2s' };
    const sources = (namespaces: string): string[] => [
      '  - {name: local, type: file, path: ./objects.yaml}',
      ...policy(namespaces),
    ];
    const [c, d] = [
      await startReplica(dir, 'c', etcdOptions, sources('shop, web')),
      await startReplica(dir, 'd', etcdOptions, sources('shop, web')),
    ];
    replicas.push(c, d);
    // The istiod of policy `shops` is connected to replica c only.
    const first = new IstiodClient({ address: c.xds, nodeId: 'shop-1' }).start();
    clients.push(first);
    await first.waitFor(
      (x) => x.configs(VS).size === 21,
      WAIT_MS,
      () => 'replica c served',
    );
    // Replica d learns of it from c's record in etcd (written within a second of a change).
    await new Promise((r) => setTimeout(r, 2_000));
    for (const name of ['c', 'd']) {
      const file = path.join(dir, `${name}.yaml`);
      await writeFile(file, (await readFile(file, 'utf8')).replace('[shop, web]', '[shp, web]'));
    }
    await until(
      async () => (await heldDigest(c)) !== undefined,
      WAIT_MS,
      'the change held on replica c, which serves the istiod',
    );
    await d.waitForLog((l) => l.msg === 'configuration reloaded', 0, WAIT_MS, 'replica d reloaded');
    // The istiod moves to replica d (a reconnect, a rollout): it keeps what it held.
    first.close();
    const moved = new IstiodClient({ address: d.xds, nodeId: 'shop-1' }).start();
    clients.push(moved);
    await moved.waitForSync(WAIT_MS);
    await new Promise((r) => setTimeout(r, 500));
    const onD = moved.configs(VS).size;
    assert.equal(onD, 21, `the istiod lost ${21 - onD} of 21 on replica d`);
    assert.notEqual(await heldDigest(d), undefined, 'replica d holds the change too');

    // Replica d rescheduled onto a new node: SIGKILL, its state folder gone, started again with
    // the slip in its file. It judges the slip for the istiods on record in etcd.
    moved.close();
    await d.kill('SIGKILL');
    await rm(path.join(dir, 'state-d'), { recursive: true, force: true });
    const again = await startReplica(dir, 'd', etcdOptions, sources('shp, web'));
    replicas.push(again);
    const back = new IstiodClient({ address: again.xds, nodeId: 'shop-1' }).start();
    clients.push(back);
    await back.waitForSync(WAIT_MS);
    await new Promise((r) => setTimeout(r, 500));
    const afterRestart = back.configs(VS).size;
    assert.equal(afterRestart, 21, `the istiod lost ${21 - afterRestart} of 21 on the new replica`);
    assert.notEqual(await heldDigest(again), undefined, 'the change held on the replica started anew');
    console.log(
      '# an istiod of one replica moved to another after the same slip, and to one started on a new node: 0 of 21 lost each time',
    );
  });

  it('serves the policies a live replica runs, not those of a record whose writer’s clock runs ahead', async () => {
    const etcdOptions = { endpoint: etcd.endpoint, prefix: '/skewed/', leaseTtl: '2s' };
    const secret = Array.from({ length: 40 }, (_, i) => virtualServiceYaml('secret', `hidden-${i}`)).join('');
    await writeFile(
      path.join(dir, 'objects-secret.yaml'),
      `${secret}${await readFile(path.join(dir, 'objects.yaml'), 'utf8')}`,
    );
    const sources = ['  - {name: local, type: file, path: ./objects-secret.yaml}', ...policy('shop, web')];
    const running = await startReplica(dir, 'e', etcdOptions, sources);
    replicas.push(running);
    const first = new IstiodClient({ address: running.xds, nodeId: 'shop-1' }).start();
    clients.push(first);
    await first.waitFor(
      (x) => x.configs(VS).size === 21,
      WAIT_MS,
      () => 'replica e served',
    );
    // A record with no policies, saved an hour "later" by a replica whose clock runs ahead.
    const client = new Etcd3({ hosts: etcd.endpoint });
    try {
      await client.put('/skewed/policies/ghost-1').value(
        JSON.stringify({
          savedAt: new Date(Date.now() + 3_600_000).toISOString(),
          policies: [],
          clients: [],
        }),
      );
    } finally {
      client.close();
    }
    await new Promise((r) => setTimeout(r, 1_500));
    const started = await startReplica(dir, 'f', etcdOptions, sources);
    replicas.push(started);
    const second = new IstiodClient({ address: started.xds, nodeId: 'shop-2' }).start();
    clients.push(second);
    await second.waitForSync(WAIT_MS);
    await new Promise((r) => setTimeout(r, 1_500));
    const seen = second.configs(VS).size;
    assert.equal(seen, 21, `the new replica served ${seen - 21} objects its policies refuse`);
    assert.equal(
      await heldDigest(started),
      undefined,
      'nothing to judge: replica e runs the configured policies',
    );
  });
});
