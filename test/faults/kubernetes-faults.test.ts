/**
 * Kubernetes API faults against meshmux running as its own process, with an istiod stand-in
 * connected: what the cluster serves that no Istio object looks like must cost that object alone,
 * never the process or the other objects.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connectIstiod, report } from '../support/fault-kit.js';
import {
  FakeKubeApiServer,
  RawJson,
  type KubeObject,
  type ServedKind,
} from '../support/fake-kube-apiserver.js';
import { until } from '../support/deadline.js';
import { routedVs } from '../support/kubernetes-cart.js';
import type { IstiodClient } from '../support/istiod-client.js';
import { MeshmuxProcess } from '../support/meshmux-process.js';
import { tempDir } from '../support/meshmux-harness.js';
import { DR, VS } from '../support/type-urls.js';

const VIRTUAL_SERVICES: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'VirtualService',
  plural: 'virtualservices',
};

/** An unknown field nested `depth` levels deep, as JSON text (`JSON.stringify` cannot write it). */
function nested(depth: number): RawJson {
  return new RawJson(`${'{"a":'.repeat(depth)}{}${'}'.repeat(depth)}`);
}

/** Writes, in `dir`, `meshmux.yaml` with one source named `cluster` reading `kinds` from `api`. */
async function configureCluster(
  dir: string,
  api: FakeKubeApiServer,
  kinds: readonly string[],
  stateDir = 'none',
  namespaces?: readonly string[],
): Promise<void> {
  await writeFile(path.join(dir, 'kubeconfig'), api.kubeconfig());
  await writeFile(
    path.join(dir, 'meshmux.yaml'),
    [
      `state: { dir: ${stateDir} }`,
      'sources:',
      '  - name: cluster',
      '    type: kubernetes',
      '    kubeconfig: ./kubeconfig',
      `    kinds: [${kinds.join(', ')}]`,
      ...(namespaces === undefined ? [] : [`    namespaces: [${namespaces.join(', ')}]`]),
      '',
    ].join('\n'),
  );
}

describe('faults: a Kubernetes object nested 5,000 levels deep', () => {
  let dir: { dir: string; dispose: () => Promise<void> };
  let api: FakeKubeApiServer;
  let meshmux: MeshmuxProcess | undefined;
  let client: IstiodClient | undefined;

  before(async () => {
    dir = await tempDir('meshmux-kube-deep-');
    api = await FakeKubeApiServer.start([VIRTUAL_SERVICES]);
    for (let i = 0; i < 20; i++) api.put(routedVs(`vs-${i}`));
    // In the list from the start: before the fix, every start of the process ended here.
    api.put(routedVs('deep', { x: nested(5_000) }));
    await configureCluster(dir.dir, api, ['VirtualService']);
  });
  after(async () => {
    client?.close();
    await meshmux?.stop();
    await api.stop();
    await dir.dispose();
  });

  it('serves the other objects and names the deep one, listed at start or arriving on the watch', async () => {
    const running = await MeshmuxProcess.start(path.join(dir.dir, 'meshmux.yaml'), { cwd: dir.dir });
    meshmux = running;
    const istiod = connectIstiod(running.xds);
    client = istiod;
    await until(() => istiod.configs(VS).size === 20 || !running.alive, 30_000, 'the 20 valid objects', {
      describe: () => `the istiod holds ${istiod.configs(VS).size}; ${running.tail(10)}`,
    });
    assert.ok(running.alive, `meshmux exited:\n${running.tail(10)}`);
    const servedMs = performance.now() - running.spawnedAt;
    const sources = await running.debug<Array<{ name: string; errors?: unknown }>>('sources');
    const shown = JSON.stringify(sources);
    assert.match(shown, /VirtualService\/shop\/deep/, shown.slice(0, 2_000));
    assert.match(shown, /nested more than 128 levels deep/);
    assert.match(shown, /spec\.x\.a\.a\.a\.a\.a\.a…/);

    // The same object on the watch: each later change still arrives.
    api.put(routedVs('deep-later', { x: nested(5_000) }));
    api.put(routedVs('after-deep'));
    await until(() => istiod.configs(VS).has('shop/after-deep') || !running.alive, 15_000, 'a later change', {
      describe: () => running.tail(10),
    });
    assert.ok(running.alive, `meshmux exited:\n${running.tail(10)}`);
    assert.equal(istiod.configs(VS).size, 21);
    report('deeply nested Kubernetes object', { 'served after spawn (ms)': servedMs, 'objects lost': 0 });
  });
});

const DESTINATION_RULES: ServedKind = {
  group: 'networking.istio.io',
  versions: ['v1', 'v1beta1', 'v1alpha3'],
  kind: 'DestinationRule',
  plural: 'destinationrules',
};

function dr(name: string, namespace = 'shop'): KubeObject {
  return {
    kind: 'DestinationRule',
    metadata: { name, namespace },
    spec: { host: `${name}.example.com`, trafficPolicy: { tls: { mode: 'ISTIO_MUTUAL' } } },
  };
}

describe('faults: a Kubernetes API server that lists a small kind empty for a while', () => {
  it('holds the kind a relist takes whole, lists it again until it is back, and applies deletions on the watch', async () => {
    const dir = await tempDir('meshmux-kube-empty-list-');
    const api = await FakeKubeApiServer.start([VIRTUAL_SERVICES, DESTINATION_RULES]);
    for (let i = 0; i < 20; i++) api.put(routedVs(`vs-${i}`));
    for (let i = 0; i < 3; i++) api.put(dr(`dr-${i}`));
    await configureCluster(dir.dir, api, ['VirtualService', 'DestinationRule']);
    const meshmux = await MeshmuxProcess.start(path.join(dir.dir, 'meshmux.yaml'), { cwd: dir.dir });
    const istiod = connectIstiod(meshmux.xds);
    const held = async (): Promise<string | undefined> => {
      const sources = await meshmux.debug<Array<{ name: string; held?: { reason: string } }>>('sources');
      return sources.find((s) => s.name === 'cluster')?.held?.reason;
    };
    try {
      await until(
        () => istiod.configs(VS).size === 20 && istiod.configs(DR).size === 3,
        30_000,
        'the first state',
        { describe: () => meshmux.tail(10) },
      );
      // A compaction ends the watches; the relists that follow find no DestinationRule, as from
      // an API server whose cache lags behind its storage.
      api.fault('DestinationRule', 'list', 'empty');
      const listed = api.requests.length;
      api.compact();
      await until(
        () => api.requests.slice(listed).some((r) => /destinationrules(\?|$)/.test(r) && !/watch=/.test(r)),
        15_000,
        'the relist of the DestinationRules',
      );
      // Past the settle window (1 s), where the guards judge the update.
      await new Promise((r) => setTimeout(r, 2_000));
      const kept = [istiod.configs(VS).size, istiod.configs(DR).size];
      assert.deepEqual(kept, [20, 3], `the istiod lost ${23 - (kept[0] ?? 0) - (kept[1] ?? 0)} of 23`);
      await until(async () => (await held()) === 'emptied-kind', 15_000, 'the emptied kind held', {
        describe: () => meshmux.tail(10),
      });
      // The other kind follows its watch meanwhile: a VirtualService created is served.
      const createdAt = performance.now();
      api.put(routedVs('vs-new'));
      await until(
        () => istiod.configs(VS).has('shop/vs-new'),
        15_000,
        'a VirtualService created during the hold',
      );
      const createdMs = performance.now() - createdAt;
      assert.equal(istiod.configs(DR).size, 3, 'the held kind still served');
      api.remove('VirtualService', 'shop', 'vs-new');
      await until(() => istiod.configs(VS).size === 20, 15_000, 'the VirtualService deleted again');
      // A DestinationRule created on the watch of the kind its list found empty says nothing of
      // the other three: the kind is listed again, not served as those three deleted.
      const requestsBefore = api.requests.length;
      api.put(dr('dr-new'));
      await until(
        () =>
          api.requests
            .slice(requestsBefore)
            .some((r) => /destinationrules(\?|$)/.test(r) && !/watch=/.test(r)),
        15_000,
        'a list of the DestinationRules after the one created',
      );
      await new Promise((r) => setTimeout(r, 1_500));
      const afterCreate = istiod.configs(DR).size;
      assert.equal(afterCreate, 3, `the istiod lost ${3 - afterCreate} of 3 DestinationRules to one created`);

      // A network blip cuts the watch meanwhile; then the API server catches up. The source lists
      // the emptied kind again by itself, and that list ends the hold: the istiod gains the new one.
      api.cutWatches('DestinationRule');
      api.fault('DestinationRule', 'list', undefined);
      const caughtUpAt = performance.now();
      await until(async () => (await held()) === undefined, 15_000, 'the hold ended by a list again');
      const endedMs = performance.now() - caughtUpAt;
      await until(() => istiod.configs(DR).size === 4, 5_000, 'the four DestinationRules served');
      assert.equal(istiod.configs(VS).size, 20);
      const lostOnRelist = 24 - istiod.configs(VS).size - istiod.configs(DR).size;

      // Deleting them all on the watch (`kubectl delete destinationrules --all`) is an edit: applied.
      for (const name of ['dr-0', 'dr-1', 'dr-2', 'dr-new']) api.remove('DestinationRule', 'shop', name);
      await until(() => istiod.configs(DR).size === 0, 15_000, 'the deletions applied', {
        describe: () => meshmux.tail(10),
      });
      assert.equal(await held(), undefined);
      assert.equal(istiod.configs(VS).size, 20);
      report('a Kubernetes kind listed empty for a while', {
        'objects lost of 23 to the empty list': lostOnRelist,
        'ms from the API server caught up to the hold ended': endedMs,
        'ms to serve a VirtualService created during the hold': createdMs,
      });
    } finally {
      istiod.close();
      await meshmux.stop();
      await api.stop();
      await dir.dispose();
    }
  });
});

describe('faults: a Kubernetes API server that lists a kind empty when meshmux restarts', () => {
  it('holds the kind the first list after a restart takes whole, and lists it again until it is back', async () => {
    const dir = await tempDir('meshmux-kube-empty-restart-');
    const api = await FakeKubeApiServer.start([VIRTUAL_SERVICES, DESTINATION_RULES]);
    for (let i = 0; i < 20; i++) api.put(routedVs(`vs-${i}`));
    for (let i = 0; i < 3; i++) api.put(dr(`dr-${i}`));
    await configureCluster(dir.dir, api, ['VirtualService', 'DestinationRule'], './state');
    const config = path.join(dir.dir, 'meshmux.yaml');
    let meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir });
    const xds = meshmux.xds;
    const istiods: IstiodClient[] = [];
    /** An istiod connected to the process now running, once it holds the VirtualServices. */
    const istiodOf = async (process: MeshmuxProcess): Promise<IstiodClient> => {
      const client = connectIstiod(process.xds);
      istiods.push(client);
      await until(() => client.configs(VS).size === 20, 30_000, 'the VirtualServices served', {
        describe: () => process.tail(10),
      });
      return client;
    };
    const heldBy = async (process: MeshmuxProcess): Promise<string | undefined> => {
      const sources = await process.debug<Array<{ name: string; held?: { reason: string } }>>('sources');
      return sources.find((x) => x.name === 'cluster')?.held?.reason;
    };
    try {
      const first = await istiodOf(meshmux);
      await until(() => first.configs(DR).size === 3, 30_000, 'the first state');
      await meshmux.stop();
      // Restarted while the API server's cache lags: its first DestinationRule list is empty.
      api.fault('DestinationRule', 'list', 'empty');
      meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir, xds });
      await until(async () => (await heldBy(meshmux)) === 'emptied-kind', 15_000, 'held at the restart', {
        describe: () => meshmux.tail(10),
      });
      // What an istiod connecting now receives, and what the one that redialled keeps.
      const kept = (await istiodOf(meshmux)).configs(DR).size;
      assert.equal(kept, 3, `a new istiod lost ${3 - kept} of 3 DestinationRules`);
      await until(() => first.configs(VS).size === 20, 15_000, 'the first istiod redialled');
      assert.equal(first.configs(DR).size, 3, 'the istiod that redialled kept its DestinationRules');

      // Restarted again, the API server still behind: the hold it recorded holds the kind again,
      // whichever kind the source lists first.
      await meshmux.stop();
      meshmux = await MeshmuxProcess.start(config, { cwd: dir.dir, xds });
      await until(
        async () => (await heldBy(meshmux)) === 'emptied-kind',
        15_000,
        'held after a second restart',
        {
          describe: () => meshmux.tail(10),
        },
      );
      const second = await istiodOf(meshmux);
      const keptAgain = second.configs(DR).size;
      assert.equal(keptAgain, 3, `a new istiod lost ${3 - keptAgain} of 3 after the second restart`);

      // A DestinationRule created meanwhile, the lists still empty: not taken as the three deleted.
      api.put(dr('dr-new'));
      // Past the source's 2 s to list the kind again, and the settle window after it.
      await new Promise((r) => setTimeout(r, 3_500));
      const created = second.configs(DR).size;
      assert.equal(created, 3, `the istiod lost ${3 - created} of 3 DestinationRules to one created`);
      // The API server catches up: the source's own lists again end the hold, no operator.
      api.fault('DestinationRule', 'list', undefined);
      const caughtUpAt = performance.now();
      await until(
        async () => (await heldBy(meshmux)) === undefined,
        60_000,
        'the hold ended by a list again',
      );
      const endedMs = performance.now() - caughtUpAt;
      await until(() => second.configs(DR).size === 4, 5_000, 'the four DestinationRules served');
      report('a Kubernetes kind listed empty at a restart', {
        'objects lost of 23, at the restart': 3 - kept,
        'after a second restart': 3 - keptAgain,
        'of 3, to one created while held': 3 - created,
        'ms from the API server caught up to the hold ended': endedMs,
      });
    } finally {
      for (const client of istiods) client.close();
      await meshmux.stop();
      await api.stop();
      await dir.dispose();
    }
  });
});

describe('faults: a Kubernetes API server that answers a list after a later one', () => {
  it('never serves what the older answer lacks as deleted', async () => {
    const dir = await tempDir('meshmux-kube-late-list-');
    const api = await FakeKubeApiServer.start([DESTINATION_RULES]);
    for (let i = 0; i < 2; i++) api.put(dr(`dr-${i}`));
    // team-x has no DestinationRule: the source lists it again some 2 s after its first list.
    await configureCluster(dir.dir, api, ['DestinationRule'], 'none', ['shop', 'team-x']);
    const meshmux = await MeshmuxProcess.start(path.join(dir.dir, 'meshmux.yaml'), { cwd: dir.dir });
    const istiod = connectIstiod(meshmux.xds);
    try {
      await until(() => istiod.configs(DR).size === 2, 30_000, 'the first state', {
        describe: () => meshmux.tail(10),
      });
      // That list again reads the server when asked (nothing in team-x) and answers 5 s late, as
      // an API server under load may.
      api.lagNextList('DestinationRule', 5_000);
      const asked = api.requests.length;
      await until(
        () =>
          api.requests
            .slice(asked)
            .some((r) => r.includes('/namespaces/team-x/destinationrules?') && !r.includes('watch=')),
        15_000,
        'the list again of team-x',
      );
      // Created after that list was asked: its watch event brings a list 2 s later that finds it.
      const createdAt = performance.now();
      api.put(dr('late', 'team-x'));
      await until(() => istiod.configs(DR).has('team-x/late'), 15_000, 'the DestinationRule served');
      const servedMs = performance.now() - createdAt;
      const from = istiod.received.length;
      // Past the late answer, and a watch opened from its resourceVersion.
      await new Promise((r) => setTimeout(r, 6_000));
      const dropped = istiod.received
        .slice(from)
        .filter((r) => r.typeUrl === DR && r.resourceCount < 3).length;
      assert.equal(dropped, 0, `${dropped} responses deleted the DestinationRule from the istiod`);
      assert.equal(istiod.configs(DR).size, 3);
      report('a Kubernetes list answered after a later one', {
        'responses that deleted the object': dropped,
        'ms from created to served': servedMs,
      });
    } finally {
      istiod.close();
      await meshmux.stop();
      await api.stop();
      await dir.dispose();
    }
  });
});
