/**
 * What reading one Kubernetes object costs, the way the source reads it now and the way it did:
 *
 *   npm run build && MESHMUX_LOG_LEVEL=silent node dist/bench/kubernetes-object-read.js [--objects 1200] [--rounds 9]
 *
 * Two sets of objects as the API server serves them: every map document of the corpus, and N
 * generated objects, DestinationRules and VirtualServices by halves. Each is read one after the
 * other, as the source reads them: from the object itself (`readKubernetesObject`), and through
 * its JSON text parsed as YAML on the reader's worker (what the source did: the depth check, the
 * text, `readYamlBytes`). Prints microseconds per object (p50 and lowest of the rounds, after
 * one warm-up round) and the ratio; asserts nothing, and checks that both ways give the same
 * resources.
 */
import type { ConfigResource } from '../src/core/resource.js';
import {
  configDocument,
  tooDeepAt,
  type KubernetesObject,
} from '../src/upstream/kubernetes/kubernetes-object.js';
import {
  MAX_OBJECT_BYTES,
  readKubernetesObject,
  type KubernetesObjectReading,
} from '../src/upstream/kubernetes/kubernetes-object-reader.js';
import { readYamlBytes } from '../src/upstream/runtime/yaml-file-reader.js';
import type { YamlFileRead } from '../src/upstream/runtime/yaml-file-set.js';
import { corpusObjects } from '../test/support/corpus-objects.js';
import { option } from './in-process.js';

const OBJECTS = Number(option('objects', '1200'));
const ROUNDS = Number(option('rounds', '9'));

const READING: KubernetesObjectReading = {
  file: 'https://cluster/Kind/namespace/name',
  defaultNamespace: 'default',
  createTimeFor: () => ({ seconds: 1_700_000_000, nanos: 0 }),
};

/** The source's read of an object before it read objects themselves. */
async function throughText(object: KubernetesObject): Promise<YamlFileRead> {
  if (tooDeepAt(object, 128) !== undefined) throw new Error('too deep');
  const bytes = new TextEncoder().encode(JSON.stringify(configDocument(object)));
  return readYamlBytes({ ...READING, size: bytes.length, bytes, maxFileBytes: MAX_OBJECT_BYTES });
}

/** An object as the API server serves it, with the metadata it adds. */
function served(i: number, kind: string, spec: unknown): KubernetesObject {
  return JSON.parse(
    JSON.stringify({
      apiVersion: 'networking.istio.io/v1',
      kind,
      metadata: {
        name: `svc-${i}`,
        namespace: `ns-${i % 100}`,
        labels: { app: `svc-${i}`, version: 'v1' },
        uid: `4f1c2d3e-0000-4000-8000-${String(i).padStart(12, '0')}`,
        resourceVersion: String(100_000 + i),
        generation: 1,
        creationTimestamp: '2026-01-02T03:04:05Z',
        managedFields: [
          { manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:spec': { 'f:host': {} } } },
        ],
      },
      spec,
    }),
  ) as KubernetesObject;
}

function generated(count: number): KubernetesObject[] {
  return Array.from({ length: count }, (_, i) => {
    const host = `svc-${i}.ns-${i % 100}.svc.cluster.local`;
    if (i % 2 === 0) {
      return served(i, 'DestinationRule', {
        host,
        trafficPolicy: {
          connectionPool: { tcp: { maxConnections: 100 }, http: { http1MaxPendingRequests: 10 } },
          outlierDetection: { consecutive5xxErrors: 5, interval: '10s', baseEjectionTime: '30s' },
        },
        subsets: [
          { name: 'v1', labels: { version: 'v1' } },
          { name: 'v2', labels: { version: 'v2' } },
        ],
      });
    }
    return served(i, 'VirtualService', {
      hosts: [host],
      http: [
        {
          match: [{ uri: { prefix: '/api' } }],
          timeout: '2.5s',
          retries: { attempts: 3, perTryTimeout: '1s' },
          route: [
            { destination: { host, subset: 'v1' }, weight: 90 },
            { destination: { host, subset: 'v2' }, weight: 10 },
          ],
        },
      ],
    });
  });
}

/** Microseconds per object of each round after the first, sorted; and the last round's resources. */
async function timed(
  objects: readonly KubernetesObject[],
  read: (object: KubernetesObject) => YamlFileRead | Promise<YamlFileRead>,
): Promise<{ us: number[]; resources: ConfigResource[] }> {
  const us: number[] = [];
  let resources: ConfigResource[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const out: ConfigResource[] = [];
    const started = performance.now();
    for (const object of objects) out.push(...(await read(object)).resources);
    if (round > 0) us.push(((performance.now() - started) * 1000) / objects.length);
    resources = out;
  }
  return { us: us.sort((a, b) => a - b), resources };
}

const p50 = (us: number[]): number => us[Math.floor(us.length / 2)] ?? Number.NaN;

async function compare(what: string, objects: readonly KubernetesObject[]): Promise<void> {
  const text = await timed(objects, throughText);
  const direct = await timed(objects, (o) => readKubernetesObject(o, READING));
  const same =
    text.resources.length === direct.resources.length &&
    text.resources.every((r, i) => r.version === direct.resources[i]?.version);
  if (!same) throw new Error(`${what}: the two ways read different resources`);
  const line = (how: string, us: number[]): string =>
    `  ${how}: ${p50(us).toFixed(1)} µs per object p50, ${(us[0] ?? Number.NaN).toFixed(1)} lowest`;
  console.log(`${what}: ${objects.length} objects (${direct.resources.length} resources), ${ROUNDS} rounds`);
  console.log(line('JSON text through the YAML reader on its worker (before)', text.us));
  console.log(line('the object itself (now)', direct.us));
  console.log(`  before / now: ${(p50(text.us) / p50(direct.us)).toFixed(1)}`);
}

await compare(
  'corpus documents',
  corpusObjects().map((c) => c.object),
);
await compare('DestinationRules and VirtualServices', generated(OBJECTS));
// The reader's worker is idle now and unref'd: the process ends.
