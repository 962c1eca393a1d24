/**
 * An object from the Kubernetes API server is read from the object itself, no text parsed, and
 * yields what reading its JSON text through the file reader yields: the same resources byte for
 * byte, the same errors and warnings. Checked on every document of the corpus served as an API
 * object, on hostile objects and on random specs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { MeshmuxError } from '../../src/core/errors.js';
import {
  configDocument,
  LAST_APPLIED_ANNOTATION,
  MAX_OBJECT_DEPTH,
  type KubernetesObject,
} from '../../src/upstream/kubernetes/kubernetes-object.js';
import {
  MAX_OBJECT_BYTES,
  MAX_OBJECT_BYTES_READ_HERE,
  readKubernetesObject,
  type KubernetesObjectReading,
} from '../../src/upstream/kubernetes/kubernetes-object-reader.js';
import { readYamlBytes } from '../../src/upstream/runtime/yaml-file-reader.js';
import type { YamlFileRead } from '../../src/upstream/runtime/yaml-file-set.js';
import { corpusObjects } from '../support/corpus-objects.js';

const READING: KubernetesObjectReading = {
  file: 'https://cluster/VirtualService/shop/cart',
  defaultNamespace: 'default',
  createTimeFor: (kind, namespace, name) => ({
    seconds: kind.length + namespace.length + name.length,
    nanos: 7,
  }),
};

/** The object read through the text of its config document, as every object was before. */
function throughText(object: KubernetesObject): Promise<YamlFileRead> {
  const bytes = new TextEncoder().encode(JSON.stringify(configDocument(object)));
  return readYamlBytes({ ...READING, size: bytes.length, bytes, maxFileBytes: MAX_OBJECT_BYTES });
}

/** A read as comparable data: every field of every resource (bodies in hex), every problem. */
function comparable(read: YamlFileRead): unknown {
  const problem = (e: MeshmuxError) => ({ code: e.code, message: e.message, location: e.location });
  return {
    resources: read.resources.map((r) => ({ ...r, body: Buffer.from(r.body).toString('hex') })),
    errors: read.errors.map(problem),
    warnings: read.warnings.map(problem),
  };
}

/** Asserts that `object` reads as its text does, and returns the read. */
async function readsAsItsText(object: KubernetesObject, what = ''): Promise<YamlFileRead> {
  const read = await readKubernetesObject(object, READING);
  assert.deepEqual(comparable(read), comparable(await throughText(object)), what);
  return read;
}

function vs(spec: unknown, metadata: Record<string, unknown> = {}): KubernetesObject {
  return {
    apiVersion: 'networking.istio.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'cart', namespace: 'shop', resourceVersion: '1', ...metadata },
    spec,
  };
}

function envoyFilter(value: unknown): KubernetesObject {
  return {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name: 'patch', namespace: 'shop' },
    spec: { configPatches: [{ applyTo: 'CLUSTER', patch: { operation: 'MERGE', value } }] },
  };
}

/** A value nested `depth` levels deep (itself level 1): `{a: {a: ... {}}}`. */
function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < depth; i++) value = { a: value };
  return value;
}

describe('reading a Kubernetes object', () => {
  it('reads every document of the corpus served as an API object as its JSON text reads', async () => {
    let objects = 0;
    let resources = 0;
    let problems = 0;
    for (const { file, object } of corpusObjects()) {
      const read = await readsAsItsText(object, file);
      objects++;
      resources += read.resources.length;
      problems += read.errors.length + read.warnings.length;
    }
    // The corpus holds Istio objects and others (Deployments, Services: skipped with a warning).
    assert.ok(objects > 200 && resources > 180 && problems > 10, `${objects} ${resources} ${problems}`);
  });

  it('reads an object of up to 32 KiB at once, and a larger one through the text reader', async () => {
    const small = readKubernetesObject(vs({ hosts: ['cart'] }), READING);
    assert.ok(!(small instanceof Promise));
    assert.equal(small.resources.length, 1);
    const large = vs({ hosts: ['cart'] }, { annotations: { note: 'x'.repeat(MAX_OBJECT_BYTES_READ_HERE) } });
    assert.ok(readKubernetesObject(large, READING) instanceof Promise);
    assert.equal((await readsAsItsText(large)).resources.length, 1);
  });

  it('prunes unknown fields with the same warnings, and refuses wrong types with the same errors', async () => {
    const cases: KubernetesObject[] = [
      vs({
        hosts: ['cart'],
        websocketUpgrade: true,
        http: [{ route: [{ destination: { host: 'a', port2: 1 } }] }],
      }),
      vs({ hosts: 'cart' }),
      vs({ hosts: ['cart'], http: [{ timeout: 5 }] }),
      vs({
        hosts: ['cart'],
        http: [{ timeout: '1h2m3.5s', retries: { perTryTimeout: '1.5µs', attempts: '3' } }],
      }),
      vs({ hosts: ['cart'], http: [{ timeout: '3 seconds' }] }),
      vs({ hosts: ['cart'] }, { labels: { app: 1, 'bad key!': 'v', ok: 'v'.repeat(64) } }),
      vs({ hosts: ['cart'] }, { name: 5 }),
      vs({ hosts: ['cart'] }, { name: 'Upper' }),
      vs({ hosts: ['cart'] }, { namespace: 'Not_A_Namespace' }),
      vs({ hosts: ['cart'] }, { creationTimestamp: '2024-02-30T00:00:00Z' }),
      vs({ hosts: ['cart'] }, { creationTimestamp: '2024-01-02T03:04:05Z' }),
      vs({ hosts: ['cart'] }, { annotations: { [LAST_APPLIED_ANNOTATION]: '{}', team: 'a' } }),
      vs(null),
      vs([]),
      vs('a string'),
      vs({ hosts: ['cart'] }, { name: undefined }),
      { ...vs({}), metadata: 'not a map' } as unknown as KubernetesObject,
      { ...vs({}), apiVersion: 5 } as unknown as KubernetesObject,
      { ...vs({}), kind: undefined } as unknown as KubernetesObject,
      { ...vs({}), apiVersion: 'apps/v1', kind: 'Deployment' },
      { ...vs({}), apiVersion: 'networking.istio.io/v9' },
      { ...vs({}), kind: 'VirtualServiceList' },
      envoyFilter({ a: [1, 'x', true, null, { b: 2.5 }], c: {} }),
    ];
    for (const object of cases) await readsAsItsText(object, JSON.stringify(object));
  });

  it('reads numbers and strings as their text does, -0 and overflowed numbers included', async () => {
    const numbers = [
      -0,
      0,
      0.1,
      1e21,
      2 ** 64,
      -(2 ** 63),
      5e-324,
      JSON.parse('1e400'),
      JSON.parse('-1e400'),
    ];
    for (const n of numbers as number[]) {
      await readsAsItsText(envoyFilter({ n }), String(n));
      await readsAsItsText(
        vs({ hosts: ['a'], http: [{ fault: { abort: { httpStatus: n, percentage: { value: n } } } }] }),
        String(n),
      );
    }
    const strings = [
      '\u2028\u2029',
      '\u0085\ufeff',
      '\u0000\u001f"\\',
      'emoji \u{1f600}',
      'lone \ud800 surrogate',
    ];
    for (const s of strings) {
      await readsAsItsText(envoyFilter({ [s]: s }), JSON.stringify(s));
      await readsAsItsText(vs({ hosts: [s] }, { annotations: { note: s } }), JSON.stringify(s));
    }
    const proto = JSON.parse('{"__proto__": {"x": 1}, "constructor": "c"}') as unknown;
    await readsAsItsText(envoyFilter(proto));
    await readsAsItsText(vs({ hosts: ['a'] }, { labels: proto }));
  });

  it('refuses an object nested deeper than the limit, naming where, before reading it', async () => {
    // The value sits 5 levels down: object, spec, configPatches, its item, patch. One that fits is
    // read, and then refused alone for the messages it nests once encoded, past protobuf's limit.
    const fits = await readKubernetesObject(envoyFilter(nested(MAX_OBJECT_DEPTH - 5)), READING);
    assert.deepEqual(
      fits.errors.map((e) => [e.code, e.location.field]),
      [['LIMIT', 'spec']],
    );
    assert.match(fits.errors[0]?.message ?? '', /nested more than 100 messages deep once encoded/);
    for (const depth of [MAX_OBJECT_DEPTH - 4, 5_000]) {
      const read = await readKubernetesObject(envoyFilter(nested(depth)), READING);
      assert.deepEqual(
        read.errors.map((e) => [e.code, e.message, e.location.field]),
        [['LIMIT', 'nested more than 128 levels deep; not read', 'spec.configPatches[0].patch.value.a.a.a…']],
      );
    }
  });

  it('refuses an object whose JSON text is over the limit as a file that size is refused', async () => {
    const huge = vs({ hosts: ['cart'] }, { annotations: { note: '\u00e9'.repeat(MAX_OBJECT_BYTES / 2) } });
    const read = await readsAsItsText(huge);
    assert.match(read.errors[0]?.message ?? '', /^file too large: 314\d{4} bytes/);
  });

  it('reads random specs as their text does', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), fc.jsonValue({ maxDepth: 3 }), async (value, spec) => {
        await readsAsItsText(envoyFilter(value));
        await readsAsItsText(vs(spec));
        await readsAsItsText(vs({ hosts: ['a'], http: [{ route: [{ destination: spec }] }] }));
      }),
      { numRuns: 150, seed: 7 },
    );
  });
});
