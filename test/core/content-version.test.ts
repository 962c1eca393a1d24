/**
 * The content version is served to istiod, persisted in state files and shared through etcd, and
 * objects keep it along a chain of meshmux tiers: the same content must give the same version in
 * every release. These versions were derived when the format was set (the last two when objects
 * carrying both provenance annotations came to be versioned from their content without them); a
 * change of the algorithm, of the hashed text or of its encoding fails here.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  annotatedVersion,
  contentVersion,
  makeResource,
  makeResourceFrom,
  SOURCE_ANNOTATION,
  SOURCE_VERSION_ANNOTATION,
  withProvenance,
} from '../../src/core/resource.js';

/** A ServiceEntry served from source `cluster-a` under `sourceVersion`, and its pinned version. */
function annotatedCase(sourceVersion: string, version: string) {
  return {
    fields: {
      kind: 'networking.istio.io/ServiceEntry',
      namespace: 'ns-1',
      name: 'svc-1',
      labels: { app: 'svc-1' },
      annotations: {
        note: 'x',
        'meshmux.io/source': 'cluster-a',
        'meshmux.io/source-version': sourceVersion,
      },
      body: new Uint8Array([10, 3, 97, 98, 99]),
    },
    version,
  };
}

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
  // Served as meshmux serves it: the source version is the content version without the two.
  annotatedCase('bRjdg5DNrmbzfAVDygwx', '-uQfMXc-As16gTKqMryo'),
  // A source version of the upstream's own (a git commit, say).
  annotatedCase('hjYBW0CmwdJu6ZZwIBBe', 'XGXg1FIW4lQbvNLho5n1'),
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

  it('of an object with provenance follow from its version without it, and differ whenever anything does', () => {
    const text = fc.string({ maxLength: 12 });
    const object = fc.record({
      name: fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/),
      labels: fc.dictionary(text, text, { maxKeys: 2 }),
      annotations: fc.dictionary(text, text, { maxKeys: 2 }),
      body: fc.uint8Array({ maxLength: 40 }),
    });
    // The source version: the object's own content version, or one the upstream gave.
    const provenance = fc.record({ source: text, upstreamVersion: fc.option(text, { nil: undefined }) });
    const annotated = (
      o: {
        name: string;
        labels: Record<string, string>;
        annotations: Record<string, string>;
        body: Uint8Array;
      },
      p: { source: string; upstreamVersion: string | undefined },
    ): {
      plain: string;
      source: string;
      sourceVersion: string;
      fields: Parameters<typeof contentVersion>[0];
    } => {
      const annotations = { ...o.annotations };
      delete annotations[SOURCE_ANNOTATION];
      delete annotations[SOURCE_VERSION_ANNOTATION];
      const plainFields = { kind: 'networking.istio.io/ServiceEntry', namespace: 'ns', ...o, annotations };
      const plain = contentVersion(plainFields);
      const sourceVersion = p.upstreamVersion ?? plain;
      const fields = {
        ...plainFields,
        annotations: {
          ...annotations,
          [SOURCE_ANNOTATION]: p.source,
          [SOURCE_VERSION_ANNOTATION]: sourceVersion,
        },
      };
      return { plain, source: p.source, sourceVersion, fields };
    };
    fc.assert(
      fc.property(
        object,
        object,
        provenance,
        provenance,
        fc.boolean(),
        fc.boolean(),
        (o1, o2, p1, p2, o, p) => {
          const a = annotated(o1, p1);
          // Half the pairs share the object, half the provenance: equal versions are tried too.
          const b = annotated(o ? o1 : o2, p ? p1 : p2);
          const va = contentVersion(a.fields);
          // What the one adding the annotations derives equals what any reader of the result derives.
          assert.equal(annotatedVersion(a.plain, a.source, a.sourceVersion), va);
          const same = a.plain === b.plain && a.source === b.source && a.sourceVersion === b.sourceVersion;
          assert.equal(contentVersion(b.fields) === va, same);
        },
      ),
      {
        numRuns: 500,
        // An annotation keyed `__proto__`, dropped once when the annotations were copied.
        examples: [
          [
            {
              name: 'a',
              labels: {},
              annotations: JSON.parse('{"__proto__":""}') as Record<string, string>,
              body: new Uint8Array(0),
            },
            { name: 'a', labels: {}, annotations: {}, body: new Uint8Array(0) },
            { source: '', upstreamVersion: undefined },
            { source: '', upstreamVersion: undefined },
            false,
            false,
          ],
        ],
      },
    );
  });

  it('of an object read with its source named are those of the object read, then named, as the merge names it', () => {
    const text = fc.string({ maxLength: 12 });
    fc.assert(
      fc.property(
        fc.record({
          name: fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/),
          labels: fc.dictionary(text, text, { maxKeys: 2 }),
          // Sometimes a source version of the object's own, which is versioned whole.
          annotations: fc.dictionary(fc.oneof(text, fc.constant(SOURCE_VERSION_ANNOTATION)), text, {
            maxKeys: 2,
          }),
          body: fc.uint8Array({ maxLength: 40 }),
          upstreamVersion: fc.option(text, { nil: undefined }),
          source: text,
        }),
        ({ upstreamVersion, source, ...o }) => {
          const fields = {
            kind: 'networking.istio.io/ServiceEntry',
            namespace: 'ns',
            ...o,
            createTime: { seconds: 7, nanos: 0 },
            origin: upstreamVersion === undefined ? {} : { upstreamVersion },
          };
          const read = makeResourceFrom(source, fields);
          assert.deepStrictEqual(read, withProvenance(makeResource(fields), source));
          assert.equal(read.annotations[SOURCE_ANNOTATION], source);
          if (Object.keys(o.annotations).length === 0)
            assert.deepEqual(Object.keys(read.annotations), [SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION]);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('are the same for small and large objects alike (written into the scratch buffer, or a buffer of their own), whatever their text', () => {
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
        fc.dictionary(text, text, { maxKeys: 3 }),
        fc.integer({ min: 0, max: 70_000 }),
        (namespace, name, labels, annotations, size) => {
          const fields = {
            kind: 'networking.istio.io/ServiceEntry',
            namespace,
            name,
            labels,
            annotations,
            body: new Uint8Array(size).map((_, i) => (i * 7 + size) & 255),
          };
          const expected = createHash('sha256')
            .update(
              `${fields.kind}\0${namespace}\0${name}\0${mapText(labels)}\x01${mapText(annotations)}\x02`,
            )
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
