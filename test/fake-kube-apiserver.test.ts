/**
 * The in-process API server speaks Kubernetes as the real `kubectl` understands it: discovery, list
 * at every served version, selectors, namespaced paths, and a watch that shows an object added
 * after it started. Also: a compacted resourceVersion is refused with 410 both ways.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { within } from './support/deadline.js';
import { FakeKubeApiServer, type ServedKind } from './support/fake-kube-apiserver.js';
import { missingPeerLine, suiteSkip } from './support/required-peer.js';
import { stopChild } from './support/stop-child.js';

const run = promisify(execFile);

const VS: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'VirtualService',
  plural: 'virtualservices',
};

const kubectlMissing =
  spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0
    ? undefined
    : missingPeerLine('kubectl', 'kubernetes-client');

function vs(
  namespace: string,
  name: string,
  labels: Record<string, string> = {},
): Parameters<FakeKubeApiServer['put']>[0] {
  return {
    kind: 'VirtualService',
    metadata: { name, namespace, labels },
    spec: { hosts: [`${name}.${namespace}.svc`] },
  };
}

interface ListJson {
  items: { apiVersion: string; metadata: { name: string; namespace: string } }[];
}

describe('fake Kubernetes API server, as kubectl sees it', { skip: suiteSkip(kubectlMissing) }, () => {
  let api: FakeKubeApiServer;

  async function kubectl(...args: string[]): Promise<ListJson> {
    if (kubectlMissing !== undefined) throw new Error(kubectlMissing);
    const { stdout } = await run('kubectl', ['--server', api.url, ...args, '-o', 'json'], {
      timeout: 30_000,
      env: { ...process.env, KUBECONFIG: '/dev/null', HOME: process.env['HOME'] ?? '/' },
    });
    return JSON.parse(stdout) as ListJson;
  }

  before(async () => {
    api = await FakeKubeApiServer.start([VS]);
    api.put(vs('shop', 'cart', { export: 'true' }));
    api.put(vs('shop', 'pay'));
    api.put(vs('team-a', 'home', { export: 'true' }));
  });
  after(() => api.stop());

  it('lists objects of every namespace with kubectl get -A', async () => {
    const list = await kubectl('get', 'virtualservices.networking.istio.io', '-A');
    assert.deepEqual(list.items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`).sort(), [
      'shop/cart',
      'shop/pay',
      'team-a/home',
    ]);
  });

  it('pages a long list as kubectl asks for it (limit and continue)', async () => {
    for (let i = 0; i < 1_100; i++) api.put(vs('paged', `p${i}`));
    const from = api.requests.length;
    const list = await kubectl('get', 'virtualservices.networking.istio.io', '-n', 'paged');
    assert.equal(new Set(list.items.map((i) => i.metadata.name)).size, 1_100);
    const reads = api.requests.slice(from).filter((r) => r.includes('/namespaces/paged/'));
    assert.ok(
      reads.some((r) => /[?&]limit=500/.test(r)),
      reads.join('\n'),
    );
    assert.equal(reads.filter((r) => r.includes('continue=')).length, 2, reads.join('\n'));
    for (let i = 0; i < 1_100; i++) api.remove('VirtualService', 'paged', `p${i}`);
  });

  it('shows the same objects at an older served version', async () => {
    const list = await kubectl('get', 'virtualservices.v1alpha3.networking.istio.io', '-A');
    assert.equal(list.items.length, 3);
    assert.ok(list.items.every((i) => i.apiVersion === 'networking.istio.io/v1alpha3'));
  });

  it('applies a namespace and a label selector', async () => {
    const list = await kubectl(
      'get',
      'virtualservices.networking.istio.io',
      '-n',
      'shop',
      '-l',
      'export=true',
    );
    assert.deepEqual(
      list.items.map((i) => i.metadata.name),
      ['cart'],
    );
  });

  it('applies a field selector', async () => {
    const list = await kubectl(
      'get',
      'virtualservices.networking.istio.io',
      '-A',
      '--field-selector',
      'metadata.name=home',
    );
    assert.deepEqual(
      list.items.map((i) => i.metadata.name),
      ['home'],
    );
  });

  it('streams an object added after kubectl get --watch started', async () => {
    const child = spawn(
      'kubectl',
      [
        '--server',
        api.url,
        'get',
        'virtualservices.networking.istio.io',
        '-n',
        'shop',
        '--watch',
        '--output-watch-events',
        '-o',
        'json',
      ],
      { env: { ...process.env, KUBECONFIG: '/dev/null' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      const seen = (async () => {
        while (api.openWatches === 0) await new Promise((r) => setTimeout(r, 20));
        api.put(vs('shop', 'late'));
        while (!out.includes('"late"')) await new Promise((r) => setTimeout(r, 20));
      })();
      await within(seen, 30_000, 'kubectl --watch to print the object added during the watch');
      const events = out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; object: { metadata: { name: string } } });
      assert.deepEqual(events.at(-1)?.type, 'ADDED');
      assert.deepEqual(events.at(-1)?.object.metadata.name, 'late');
    } finally {
      await stopChild(child, true);
    }
  });
});

describe('fake Kubernetes API server, 410 Gone', () => {
  let api: FakeKubeApiServer;
  before(async () => {
    api = await FakeKubeApiServer.start([VS]);
  });
  after(() => api.stop());

  it('answers a watch from a compacted resourceVersion with HTTP 410', async () => {
    const old = api.put(vs('shop', 'a'));
    api.put(vs('shop', 'b'));
    api.compact('http');
    const response = await fetch(
      `${api.url}/apis/networking.istio.io/v1/virtualservices?watch=true&resourceVersion=${old}`,
    );
    assert.equal(response.status, 410);
    assert.equal(((await response.json()) as { code: number }).code, 410);
  });

  it('ends an open watch with an ERROR event carrying code 410', async () => {
    const response = await fetch(
      `${api.url}/apis/networking.istio.io/v1/namespaces/shop/virtualservices?watch=true&resourceVersion=${api.resourceVersion}`,
    );
    assert.equal(response.status, 200);
    await within(
      (async () => {
        for (;;) {
          if (api.openWatches > 0) return;
          await new Promise((r) => setImmediate(r));
        }
      })(),
      10_000,
      'the watch to open',
    );
    api.compact('event');
    const body = await within(response.text(), 10_000, 'the watch to end');
    const events = body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; object: { code?: number } });
    assert.deepEqual(
      events.map((e) => [e.type, e.object.code]),
      [['ERROR', 410]],
    );
  });
});
