/**
 * A Kubernetes group the API server answers 404 for a while (an API server restarted before its
 * CRD handlers are up, CRDs being installed again), against meshmux running as its own process
 * with an istiod stand-in connected: a kind not served is never served as empty, and it is looked
 * for again until it is back.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { connectIstiod, report } from '../support/fault-kit.js';
import { FakeKubeApiServer, type KubeObject, type ServedKind } from '../support/fake-kube-apiserver.js';
import { until } from '../support/deadline.js';
import { routedVs } from '../support/kubernetes-cart.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { AUTHZ as AP, DR, VS } from '../support/type-urls.js';

const NETWORKING = 'networking.istio.io';

const KINDS: readonly ServedKind[] = [
  {
    group: NETWORKING,
    versions: ['v1', 'v1beta1', 'v1alpha3'],
    kind: 'VirtualService',
    plural: 'virtualservices',
  },
  {
    group: NETWORKING,
    versions: ['v1', 'v1beta1', 'v1alpha3'],
    kind: 'DestinationRule',
    plural: 'destinationrules',
  },
  {
    group: 'security.istio.io',
    versions: ['v1', 'v1beta1'],
    kind: 'AuthorizationPolicy',
    plural: 'authorizationpolicies',
  },
];

function dr(name: string): KubeObject {
  return {
    kind: 'DestinationRule',
    metadata: { name, namespace: 'shop' },
    spec: { host: `${name}.example.com` },
  };
}

function ap(name: string): KubeObject {
  return {
    kind: 'AuthorizationPolicy',
    metadata: { name, namespace: 'shop' },
    spec: { action: 'ALLOW', rules: [{}] },
  };
}

/** A cluster of 10 VirtualServices, 10 DestinationRules and 30 AuthorizationPolicies, and its config. */
async function cluster(stateDir: string): Promise<{
  api: FakeKubeApiServer;
  dir: { dir: string; dispose: () => Promise<void> };
  config: string;
}> {
  const api = await FakeKubeApiServer.start(KINDS);
  for (let i = 0; i < 10; i++) {
    api.put(routedVs(`vs-${i}`));
    api.put(dr(`dr-${i}`));
  }
  for (let i = 0; i < 30; i++) api.put(ap(`ap-${i}`));
  const dir = await tempDir('meshmux-kube-unserved-');
  await writeFile(path.join(dir.dir, 'kubeconfig'), api.kubeconfig());
  const config = path.join(dir.dir, 'meshmux.yaml');
  await writeFile(
    config,
    [
      `state: { dir: ${stateDir} }`,
      'sources:',
      '  - name: cluster',
      '    type: kubernetes',
      '    kubeconfig: ./kubeconfig',
      '    kinds: [VirtualService, DestinationRule, AuthorizationPolicy]',
      '',
    ].join('\n'),
  );
  return { api, dir, config };
}

async function sourceState(meshmux: MeshmuxProcess): Promise<string | undefined> {
  const sources = await meshmux.debug<Array<{ name: string; state: string }>>('sources');
  return sources.find((s) => s.name === 'cluster')?.state;
}

/**
 * How many of the 10 VirtualServices and 10 DestinationRules it was served the istiod holds,
 * asserted to be all of them.
 */
function keptAll(istiod: IstiodClient): { keptVs: number; keptDr: number } {
  const keptVs = istiod.configs(VS).size;
  const keptDr = istiod.configs(DR).size;
  assert.equal(keptVs, 10, `the istiod lost ${10 - keptVs} of 10 VirtualServices`);
  assert.equal(keptDr, 10, `the istiod lost ${10 - keptDr} of 10 DestinationRules`);
  return { keptVs, keptDr };
}

describe('faults: a Kubernetes group answered 404 when meshmux restarts', () => {
  it('keeps the restored objects of the kinds not served, and lists them once they are', async () => {
    const { api, dir, config } = await cluster('./state');
    let meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir });
    const istiods: IstiodClient[] = [];
    try {
      const first = connectIstiod(meshmux.xds);
      istiods.push(first);
      await until(
        () => first.configs(VS).size === 10 && first.configs(DR).size === 10 && first.configs(AP).size === 30,
        30_000,
        'the first state',
        { describe: () => meshmux.tail(10) },
      );
      await meshmux.stop();
      const networking = api.unserveGroup(NETWORKING);
      meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir });
      const running = meshmux;
      const istiod = connectIstiod(running.xds);
      istiods.push(istiod);
      // The marker: an AuthorizationPolicy created after the restart reaches the istiod, so the
      // source's state after the 404s has been served by then.
      api.put(ap('ap-after-restart'));
      await until(() => istiod.configs(AP).has('shop/ap-after-restart'), 30_000, 'the marker', {
        describe: () => running.tail(10),
      });
      const { keptVs, keptDr } = keptAll(istiod);

      // The group is served again: the source finds it on its own, and a change arrives.
      for (const kind of networking) api.serve(kind);
      const backAt = performance.now();
      api.put(routedVs('vs-new'));
      await until(
        () => istiod.configs(VS).has('shop/vs-new'),
        90_000,
        'a VirtualService created once served',
        {
          describe: () => running.tail(10),
        },
      );
      const arrivedMs = performance.now() - backAt;
      assert.equal(istiod.configs(VS).size, 11);
      assert.equal(istiod.configs(DR).size, 10);
      await until(async () => (await sourceState(running)) === 'synced', 10_000, 'the source synced');
      report('a Kubernetes group answered 404 at a restart', {
        'VirtualServices lost of 10': 10 - keptVs,
        'DestinationRules lost of 10': 10 - keptDr,
        'ms from served again to a change served': arrivedMs,
      });
    } finally {
      for (const client of istiods) client.close();
      await meshmux.stop();
      await api.stop();
      await dir.dispose();
    }
  });
});

describe('faults: a Kubernetes group answered 404 for a while', () => {
  it('keeps what its kinds held, says stale, and follows their changes once they are served again', async () => {
    const { api, dir, config } = await cluster('none');
    const meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir });
    const istiod = connectIstiod(meshmux.xds);
    try {
      await until(
        () =>
          istiod.configs(VS).size === 10 && istiod.configs(DR).size === 10 && istiod.configs(AP).size === 30,
        30_000,
        'the first state',
        { describe: () => meshmux.tail(10) },
      );
      const asked = api.requests.length;
      const networking = api.unserveGroup(NETWORKING);
      // The source has looked for the group and found it gone (its watches were cut).
      await until(
        () => api.requests.slice(asked).includes(`GET /apis/${NETWORKING}`),
        30_000,
        'the group looked for',
      );
      await until(async () => (await sourceState(meshmux)) === 'stale', 30_000, 'the source stale', {
        describe: () => meshmux.tail(10),
      });
      api.put(ap('ap-while-gone'));
      await until(() => istiod.configs(AP).has('shop/ap-while-gone'), 30_000, 'the marker');
      const { keptVs, keptDr } = keptAll(istiod);

      for (const kind of networking) api.serve(kind);
      const backAt = performance.now();
      api.put(routedVs('vs-new'));
      api.remove('VirtualService', 'shop', 'vs-0');
      api.put(dr('dr-new'));
      await until(
        () =>
          istiod.configs(VS).has('shop/vs-new') &&
          !istiod.configs(VS).has('shop/vs-0') &&
          istiod.configs(DR).has('shop/dr-new'),
        30_000,
        'the changes made once served again',
        { describe: () => meshmux.tail(10) },
      );
      const arrivedMs = performance.now() - backAt;
      await until(async () => (await sourceState(meshmux)) === 'synced', 10_000, 'the source synced again');
      report('a Kubernetes group answered 404 for a while', {
        'objects lost of 20 while not served': 20 - keptVs - keptDr,
        'ms from served again to the changes served': arrivedMs,
      });
    } finally {
      istiod.close();
      await meshmux.stop();
      await api.stop();
      await dir.dispose();
    }
  });
});
