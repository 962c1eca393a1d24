/**
 * The Kubernetes source against the in-process API server, reached through a kubeconfig file:
 * objects listed then watched, bookkeeping metadata dropped, a CRD not installed is no error, a
 * 410 relists and keeps what still exists, and an unreachable API server leaves the state stale.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { SourceEvent, SourceSnapshotEvent } from '../../src/core/source-event.js';
import { KubernetesSource } from '../../src/upstream/kubernetes/kubernetes-source.js';
import { FakeKubeApiServer, type KubeObject, type ServedKind } from '../support/fake-kube-apiserver.js';
import { within } from '../support/deadline.js';
import { tempDir } from '../support/meshmux-harness.js';
import { SourceEventRecorder } from '../support/source-event-recorder.js';

const VS: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'VirtualService',
  plural: 'virtualservices',
};

function vs(namespace: string, name: string, host = `${name}.example.com`): KubeObject {
  return { kind: 'VirtualService', metadata: { name, namespace }, spec: { hosts: [host] } };
}

function names(snapshot: SourceEvent): string[] {
  return (snapshot as SourceSnapshotEvent).resources.map((r) => `${r.namespace}/${r.name}`).sort();
}

async function kubeconfigFor(url: string): Promise<string> {
  const { dir } = await tempDir('kube');
  const file = path.join(dir, 'kubeconfig');
  await writeFile(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '  - name: other',
      '    cluster: { server: "http://127.0.0.1:1" }',
      '  - name: east',
      `    cluster: { server: "${url}", insecure-skip-tls-verify: true }`,
      'users:',
      '  - name: reader',
      '    user: { token: "t0ken" }',
      'contexts:',
      '  - name: other',
      '    context: { cluster: other, user: reader }',
      '  - name: east',
      '    context: { cluster: east, user: reader }',
      'current-context: other',
      '',
    ].join('\n'),
  );
  return file;
}

describe('Kubernetes source', () => {
  let api: FakeKubeApiServer;
  let kubeconfig: string;
  let recorder: SourceEventRecorder | undefined;
  before(async () => {
    api = await FakeKubeApiServer.start([VS]);
    kubeconfig = await kubeconfigFor(api.url);
  });
  after(() => api.stop());
  afterEach(() => recorder?.close());

  const start = (
    extra: Partial<ConstructorParameters<typeof KubernetesSource>[0]> = {},
  ): SourceEventRecorder => {
    recorder = new SourceEventRecorder(
      new KubernetesSource({
        name: 'east',
        defaultNamespace: 'default',
        kubeconfig,
        context: 'east',
        ...extra,
      }).events$,
    );
    return recorder;
  };

  it('serves the listed objects of the chosen context, with labels and without kubectl bookkeeping', async () => {
    api.put({
      kind: 'VirtualService',
      metadata: {
        name: 'cart',
        namespace: 'shop',
        labels: { app: 'cart' },
        annotations: { team: 'a', 'kubectl.kubernetes.io/last-applied-configuration': '{}' },
        managedFields: [{ manager: 'kubectl' }],
      },
      spec: { hosts: ['cart.example.com'] },
    });
    const events = start();
    const snapshot = (await events.next(
      (e) => e.type === 'snapshot' && names(e).includes('shop/cart'),
    )) as SourceSnapshotEvent;
    const cart = snapshot.resources.find((r) => r.name === 'cart')!;
    assert.equal(cart.kind, 'networking.istio.io/VirtualService');
    assert.deepEqual(cart.labels, { app: 'cart' });
    assert.deepEqual(cart.annotations, { team: 'a' });
    assert.equal(cart.createTime.seconds, 0);
    await within(
      (async () => {
        while (api.openWatches === 0) await new Promise((r) => setTimeout(r, 20));
      })(),
      10_000,
      'the watch to open',
    );
    assert.equal(api.openWatches, 1, 'one watch for the one served kind, not one per version');
  });

  it('delivers added, changed and deleted objects from the watch', async () => {
    const events = start();
    await events.snapshot();
    api.put(vs('shop', 'added'));
    await events.next((e) => e.type === 'snapshot' && names(e).includes('shop/added'));
    api.remove('VirtualService', 'shop', 'added');
    await events.next((e) => e.type === 'snapshot' && !names(e).includes('shop/added'), events.count);
  });

  it('relists after a 410 and keeps every object that still exists', async () => {
    const events = start();
    await events.snapshot();
    const marker = events.count;
    api.compact('event');
    api.put(vs('shop', 'after-gone'));
    const snapshot = await events.next(
      (e) => e.type === 'snapshot' && names(e).includes('shop/after-gone'),
      marker,
    );
    assert.ok(names(snapshot).includes('shop/cart'));
  });

  it('reads only the namespaces asked for', async () => {
    api.put(vs('team-a', 'home'));
    const events = start({ namespaces: ['team-*'] });
    const snapshot = await events.snapshot();
    assert.deepEqual(names(snapshot), ['team-a/home']);
  });

  it('treats a kind whose CRD is not installed as not served, and is synced without it', async () => {
    const events = start({ kinds: ['VirtualService', 'Sidecar'] });
    const snapshot = await events.snapshot();
    assert.equal(snapshot.errors.length, 0);
  });

  it('is stale with its last state while the API server is down', async () => {
    const events = start();
    await events.snapshot();
    const marker = events.count;
    await api.stop();
    await events.next((e) => e.type === 'status' && e.state === 'stale', marker, 30_000);
    assert.equal(
      events.events.slice(marker).filter((e) => e.type === 'snapshot').length,
      0,
      'no state withdrawn while down',
    );
    await api.restart();
    await events.next((e) => e.type === 'status' && e.state === 'synced', marker, 60_000);
  });
});
