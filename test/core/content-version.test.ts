/**
 * The content version is served to istiod, persisted in state files and shared through etcd, and
 * objects keep it along a chain of meshmux tiers: the same content must give the same version in
 * every release. These versions were derived when the format was set; a change of the algorithm,
 * of the hashed text or of its encoding fails here.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { contentVersion, makeResource } from '../../src/core/resource.js';

const CASES = [
  {
    fields: {
      kind: 'networking.istio.io/VirtualService',
      namespace: 'shop',
      name: 'cart',
      labels: {},
      annotations: {},
      body: new Uint8Array([10, 4, 99, 97, 114, 116]),
    },
    version: 'z7rXI37X1l7Ex-tVYdM-',
  },
  {
    fields: {
      kind: 'networking.istio.io/ServiceEntry',
      namespace: 'ns-1',
      name: 'svc-1',
      labels: { app: 'svc-1', 'z.io/tier': 'b' },
      annotations: { 'meshmux.io/source': 'up', note: 'crème brûlée' },
      body: new Uint8Array(0),
    },
    version: '8GWfVIVNNcA58h-XNe7j',
  },
  {
    // A lone surrogate and an empty key: text is hashed as UTF-8 with U+FFFD for what is not.
    fields: {
      kind: 'security.istio.io/AuthorizationPolicy',
      namespace: 'a',
      name: 'b',
      labels: { odd: 'x\ud800' },
      annotations: { '': '' },
      body: new Uint8Array([0, 255, 1]),
    },
    version: '_Q-8IlDxH_HknI7nZXfK',
  },
];

describe('content versions', () => {
  it('are the versions every release derived for the same content', () => {
    for (const { fields, version } of CASES) assert.equal(contentVersion(fields), version, fields.name);
  });

  it('do not depend on the order labels and annotations were written in', () => {
    const [, second] = CASES;
    assert.ok(second !== undefined);
    const reordered = {
      ...second.fields,
      labels: { 'z.io/tier': 'b', app: 'svc-1' },
      annotations: { note: 'crème brûlée', 'meshmux.io/source': 'up' },
    };
    assert.equal(contentVersion(reordered), second.version);
    const resource = makeResource({ ...reordered, createTime: { seconds: 1, nanos: 0 }, origin: {} });
    assert.equal(resource.version, second.version);
  });

  it('are the same for small and large objects alike (hashed in one call, or streamed)', () => {
    // The hashed text as the format defines it: kind, namespace, name, then each map as its size
    // and its entries in key order, NUL-separated, the maps closed by \x01 and \x02; then the body.
    const mapText = (m: Record<string, string>): string =>
      Object.keys(m)
        .sort()
        .reduce((t, k) => `${t}\0${k}\0${m[k]}`, String(Object.keys(m).length));
    const text = fc.string({ unit: 'binary', maxLength: 40 });
    fc.assert(
      fc.property(
        text,
        text,
        fc.dictionary(text, text, { maxKeys: 3 }),
        fc.integer({ min: 0, max: 70_000 }),
        (namespace, name, labels, size) => {
          const fields = {
            kind: 'networking.istio.io/ServiceEntry',
            namespace,
            name,
            labels,
            annotations: {},
            body: new Uint8Array(size).map((_, i) => (i * 7 + size) & 255),
          };
          const expected = createHash('sha256')
            .update(`${fields.kind}\0${namespace}\0${name}\0${mapText(labels)}\x01${mapText({})}\x02`)
            .update(fields.body)
            .digest()
            .toString('base64url', 0, 15);
          assert.equal(contentVersion(fields), expected);
        },
      ),
      { numRuns: 200 },
    );
  });
});
