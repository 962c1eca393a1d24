/**
 * A Kubernetes API server and a source of it for the Kubernetes source's tests: one VirtualService
 * and one DestinationRule, `shop/cart`, served by the in-process API server through a kubeconfig.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { SourceEvent, SourceSnapshotEvent } from '../../src/core/source-event.js';
import { KubernetesSource, loadKubernetesClient } from '../../src/upstream/kubernetes/kubernetes-source.js';
import { FakeKubeApiServer, type KubeObject, type ServedKind } from './fake-kube-apiserver.js';
import { tempDir } from './meshmux-harness.js';
import { SourceEventRecorder } from './source-event-recorder.js';

export const VS: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'VirtualService',
  plural: 'virtualservices',
};

export function vs(namespace: string, name: string, host = `${name}.example.com`): KubeObject {
  return { kind: 'VirtualService', metadata: { name, namespace }, spec: { hosts: [host] } };
}

/** A VirtualService of namespace `shop` routing its host to itself, `spec` merged over it. */
export function routedVs(name: string, spec: Record<string, unknown> = {}): KubeObject {
  const host = `${name}.example.com`;
  return {
    kind: 'VirtualService',
    metadata: { name, namespace: 'shop' },
    spec: { hosts: [host], http: [{ route: [{ destination: { host } }] }], ...spec },
  };
}

export function names(snapshot: SourceEvent): string[] {
  return [...(snapshot as SourceSnapshotEvent).resources].map((r) => `${r.namespace}/${r.name}`).sort();
}

export async function kubeconfigFor(url: string): Promise<string> {
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

export const DR: ServedKind = { ...VS, kind: 'DestinationRule', plural: 'destinationrules' };

/** Creates DestinationRule `namespace/name` in `api`. */
export function putDestinationRule(api: FakeKubeApiServer, namespace: string, name: string): void {
  api.put({ kind: 'DestinationRule', metadata: { name, namespace }, spec: { host: name } });
}

/** An API server holding one VirtualService and one DestinationRule, `shop/cart`. */
export async function cartApiServer(): Promise<FakeKubeApiServer> {
  await loadKubernetesClient();
  const api = await FakeKubeApiServer.start([VS, DR]);
  putDestinationRule(api, 'shop', 'cart');
  api.put(vs('shop', 'cart'));
  return api;
}

/** A source reading the DestinationRules and VirtualServices `api` serves. */
export async function cartSource(
  api: FakeKubeApiServer,
  extra: Partial<ConstructorParameters<typeof KubernetesSource>[0]> = {},
): Promise<SourceEventRecorder> {
  return new SourceEventRecorder(
    new KubernetesSource({
      name: 'east',
      defaultNamespace: 'default',
      kubeconfig: await kubeconfigFor(api.url),
      context: 'east',
      kinds: ['DestinationRule', 'VirtualService'],
      ...extra,
    }).events$,
  );
}

/** Lists (not watches) of DestinationRules in `namespace` asked of `api` since request `from`. */
export function listsOf(api: FakeKubeApiServer, namespace: string, from: number): number {
  return api.requests
    .slice(from)
    .filter((r) => r.includes(`/namespaces/${namespace}/destinationrules?`) && !r.includes('watch=')).length;
}
