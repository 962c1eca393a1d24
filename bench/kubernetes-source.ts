/**
 * The Kubernetes source from API server to istiod:
 *
 *   npm run build && MESHMUX_LOG_LEVEL=silent MESHMUX_STATE_DIR=none node dist/bench/kubernetes-source.js [--objects 10000] [--changes 50]
 *
 * An in-process API server (the tests' fake, speaking list and chunked watch over HTTP) holds N
 * VirtualServices over 100 namespaces; meshmux reads it with a `type: kubernetes` source and an
 * istiod stand-in subscribes over gRPC. Printed: the time from meshmux's start to the istiod
 * holding all N objects (discovery, list, validation, merge, encoding, the first response), the
 * process's heap and RSS then; and for one-object changes made in the API server, the time until
 * the istiod has applied and ACKed the response carrying it (median, p90, max). Everything runs in
 * one process on loopback, so the figures include the API server's and the istiod's own work.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { startMeshmux } from '../src/app.js';
import { parseMeshmuxConfig } from '../src/settings/meshmux-config.js';
import { FakeKubeApiServer, type KubeObject } from '../test/support/fake-kube-apiserver.js';
import { IstiodClient } from '../test/support/istiod-client.js';
import { VS } from '../test/support/type-urls.js';
import { option } from './in-process.js';

const OBJECTS = Number(option('objects', '10000'));
const CHANGES = Number(option('changes', '50'));

function virtualService(i: number, round = 0): KubeObject {
  const host = `svc-${i}.ns-${i % 100}.svc.cluster.local`;
  return {
    kind: 'VirtualService',
    metadata: { name: `svc-${i}`, namespace: `ns-${i % 100}`, labels: { app: `svc-${i}` } },
    spec: {
      hosts: [host],
      http: [
        {
          timeout: `${round + 1}s`,
          route: [{ destination: { host, subset: 'v1' }, weight: 100 }],
        },
      ],
    },
  };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
}

const api = await FakeKubeApiServer.start([
  {
    group: 'networking.istio.io',
    versions: ['v1', 'v1beta1', 'v1alpha3'],
    kind: 'VirtualService',
    plural: 'virtualservices',
  },
]);
for (let i = 0; i < OBJECTS; i++) api.put(virtualService(i));
const dir = await mkdtemp(path.join(tmpdir(), 'meshmux-kube-bench-'));
await writeFile(path.join(dir, 'cluster.kubeconfig'), api.kubeconfig('cluster'));

const started = performance.now();
const meshmux = await startMeshmux(
  parseMeshmuxConfig(
    'sources: [{name: cluster, type: kubernetes, kubeconfig: ./cluster.kubeconfig, kinds: [VirtualService]}]\n',
    'bench config',
    dir,
  ),
  { xds: '127.0.0.1:0', http: '127.0.0.1:0', admin: '127.0.0.1:0' },
);
const client = new IstiodClient({ address: `127.0.0.1:${meshmux.xdsPort}` }).start();
try {
  await client.waitFor(
    (c) => c.configs(VS).size === OBJECTS,
    300_000,
    () => `${OBJECTS} VirtualServices at the istiod`,
  );
  const initialMs = performance.now() - started;
  const memory = process.memoryUsage();

  const latencies: number[] = [];
  const merged: number[] = [];
  for (let round = 1; round <= CHANGES; round++) {
    const i = (round * 7919) % OBJECTS;
    const ns = `ns-${i % 100}/svc-${i}`;
    const acksBefore = client.acks.length;
    const at = performance.now();
    const name = `svc-${i}`;
    const before = meshmux.engine
      .current()
      .kinds.get('networking.istio.io/VirtualService')
      ?.resources.find((r) => r.name === name)?.version;
    const inMerge = firstValueFrom(
      meshmux.engine.snapshots$.pipe(
        filter(
          (s) =>
            s.kinds.get('networking.istio.io/VirtualService')?.resources.find((r) => r.name === name)
              ?.version !== before,
        ),
      ),
    ).then(() => merged.push(performance.now() - at));
    api.put(virtualService(i, round));
    await client.waitFor(
      (c) => {
        const http = c.configs(VS).get(ns)?.body['http'] as Array<{ timeout?: { seconds?: number } }>;
        return http?.[0]?.timeout?.seconds === round + 1 && c.acks.length > acksBefore;
      },
      60_000,
      () => `change ${round} at the istiod`,
    );
    latencies.push(performance.now() - at);
    await inMerge;
  }
  latencies.sort((a, b) => a - b);
  merged.sort((a, b) => a - b);

  console.log(`kubernetes source, ${OBJECTS} VirtualServices in 100 namespaces, one process on loopback`);
  console.log(
    `  initial list to an istiod holding them all: ${initialMs.toFixed(0)} ms (heap ${(memory.heapUsed / 2 ** 20).toFixed(0)} MiB, RSS ${(memory.rss / 2 ** 20).toFixed(0)} MiB)`,
  );
  console.log(
    `  watch event to istiod ACK, ${CHANGES} one-object changes: median ${percentile(latencies, 0.5).toFixed(1)} ms, p90 ${percentile(latencies, 0.9).toFixed(1)} ms, max ${(latencies.at(-1) ?? 0).toFixed(1)} ms`,
  );
  console.log(
    `  of which watch event to the merged snapshot: median ${percentile(merged, 0.5).toFixed(1)} ms, p90 ${percentile(merged, 0.9).toFixed(1)} ms (the rest: encoding, and the istiod decoding all ${OBJECTS} objects of the type, as state of the world resends them)`,
  );
  console.log(
    JSON.stringify({
      kubernetes: {
        objects: OBJECTS,
        initialListToIstiodMs: Math.round(initialMs),
        watchEventToAckMedianMs: Number(percentile(latencies, 0.5).toFixed(1)),
        watchEventToAckP90Ms: Number(percentile(latencies, 0.9).toFixed(1)),
      },
    }),
  );
} finally {
  client.close();
  await meshmux.stop();
  await api.stop();
  await rm(dir, { recursive: true, force: true });
}
