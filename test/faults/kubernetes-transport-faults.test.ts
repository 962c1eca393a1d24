/**
 * What stands between meshmux and the Kubernetes API server failing it, against meshmux running as
 * its own process with an istiod stand-in connected: a credential rotated in its kubeconfig.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { connectIstiod, report } from '../support/fault-kit.js';
import { FakeKubeApiServer, type KubeObject, type ServedKind } from '../support/fake-kube-apiserver.js';
import { until } from '../support/deadline.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { VS } from '../support/type-urls.js';

const VIRTUAL_SERVICES: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'VirtualService',
  plural: 'virtualservices',
};

function vs(name: string): KubeObject {
  const host = `${name}.example.com`;
  return {
    kind: 'VirtualService',
    metadata: { name, namespace: 'shop' },
    spec: { hosts: [host], http: [{ route: [{ destination: { host } }] }] },
  };
}

function kubeconfig(server: string, token: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
    `users: [{name: c, user: {token: "${token}"}}]`,
    'contexts: [{name: c, context: {cluster: c, user: c}}]',
    'current-context: c',
    '',
  ].join('\n');
}

/** `meshmux.yaml` in `dir`: the VirtualServices of the cluster `./kubeconfig` names, and `extra` sources. */
async function configure(dir: string, extra: readonly string[] = []): Promise<string> {
  const file = path.join(dir, 'meshmux.yaml');
  await writeFile(
    file,
    [
      'state: { dir: none }',
      'sources:',
      '  - name: cluster',
      '    type: kubernetes',
      '    kubeconfig: ./kubeconfig',
      '    kinds: [VirtualService]',
      ...extra,
      '',
    ].join('\n'),
  );
  return file;
}

describe('faults: a Kubernetes token rotated in its kubeconfig', () => {
  it('takes the new token from the file at the next retry, with no reload', async () => {
    const api = await FakeKubeApiServer.start([VIRTUAL_SERVICES], 0, { token: 'token-a' });
    for (let i = 0; i < 5; i++) api.put(vs(`vs-${i}`));
    const dir = await tempDir('meshmux-kube-rotated-');
    await writeFile(path.join(dir.dir, 'kubeconfig'), kubeconfig(api.url, 'token-a'));
    const meshmux = await MeshmuxProcess.start(await configure(dir.dir, ['    maxStale: 15s']), {
      cwd: dir.dir,
    });
    const istiod = connectIstiod(meshmux.xds);
    try {
      await until(() => istiod.configs(VS).size === 5, 30_000, 'the first state', {
        describe: () => meshmux.tail(10),
      });
      // The rotation: the new token written over the same file, the old one revoked, and the
      // watch cut (as the API server does when it stops taking a token).
      await writeFile(path.join(dir.dir, 'kubeconfig'), kubeconfig(api.url, 'token-b'));
      api.rotateToken('token-b');
      api.cutWatches('VirtualService');
      const rotatedAt = performance.now();
      api.put(vs('vs-new'));
      await until(
        () => istiod.configs(VS).has('shop/vs-new'),
        20_000,
        'a VirtualService created after the rotation',
        {
          describe: () => `the istiod holds ${istiod.configs(VS).size}; ${meshmux.tail(10)}`,
        },
      );
      const arrivedMs = performance.now() - rotatedAt;
      assert.equal(istiod.configs(VS).size, 6);
      report('a Kubernetes token rotated in its kubeconfig', {
        'ms from the rotation to a change served': arrivedMs,
        'objects lost of 5': 5 - (istiod.configs(VS).size - 1),
      });
    } finally {
      istiod.close();
      await meshmux.stop();
      await api.stop();
      await dir.dispose();
    }
  });
});
