import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Provenance, SOURCE_ANNOTATION, SOURCE_VERSION_ANNOTATION } from '../../src/merge/provenance.js';
import { anyTypeUrl, messageType } from '../../src/schema/proto-root.js';
import { McpResourceReader } from '../../src/upstream/mcp-resource-reader.js';
import { encodeBody, encodeMcpResource, kindNamed } from '../support/fake-objects.js';

const SE = kindNamed('ServiceEntry');

function envelope(host: string): Uint8Array {
  return encodeMcpResource(
    SE,
    { namespace: 'shop', name: 'payments', spec: { hosts: [host], location: 'MESH_EXTERNAL' } },
    { createTime: { seconds: 1_700_000_000, nanos: 0 } },
  );
}

function reader(): McpResourceReader {
  return new McpResourceReader({ defaultNamespace: 'default', origin: 'xds://upstream:15010' });
}

describe('McpResourceReader', () => {
  it('keeps a plain read in three fields of its own, named by its object’s key, and a read with anything unusual whole', () => {
    const r = reader();
    const plain = r.read(SE, envelope('a.example.com'), 'test');
    assert.ok(plain.ok);
    assert.deepEqual(Object.getOwnPropertyNames(plain).sort(), ['envelopeAt', 'envelopeEnd', 'resource']);
    assert.equal(plain.name, plain.resource.key, 'the object’s key is the read’s name');
    assert.deepEqual([plain.unknownEnvelopeFields, plain.unknownBodyFields, plain.warnings], [[], [], []]);
    assert.ok(r.readsAs(plain, envelope('a.example.com')), 'its bytes recognised when sent again');
    assert.equal(r.read(SE, envelope('a.example.com'), 'test'), plain);
    r.forget(plain);
    assert.notEqual(r.read(SE, envelope('a.example.com'), 'test'), plain, 'forgotten');
    // An upper-case name is read with a warning: kept with the warning, as every field of its own.
    const odd = r.read(
      SE,
      encodeMcpResource(SE, {
        namespace: 'shop',
        name: 'Payments',
        spec: { hosts: ['b.example.com'], location: 'MESH_EXTERNAL' },
      }),
      'test',
    );
    assert.ok(odd.ok);
    assert.equal(odd.warnings?.length, 1);
    assert.ok(Object.getOwnPropertyNames(odd).includes('warnings'));
  });

  it('reads objects with its source’s provenance, as the merge serves them, and passes relayed ones as sent', () => {
    const plain = reader().read(SE, envelope('a.example.com'), 'test');
    const meshReader = new McpResourceReader({
      defaultNamespace: 'default',
      origin: 'xds://upstream:15010',
      source: 'mesh',
    });
    const annotated = meshReader.read(SE, envelope('a.example.com'), 'test');
    assert.ok(plain.ok && annotated.ok);
    assert.equal(plain.resource.annotations[SOURCE_ANNOTATION], undefined);
    const served = new Provenance('mesh').annotate(plain.resource, plain.name, undefined);
    assert.deepEqual(annotated.resource, served);
    assert.equal(annotated.resource.annotations[SOURCE_ANNOTATION], 'mesh');
    assert.equal(annotated.resource.annotations[SOURCE_VERSION_ANNOTATION], plain.resource.version);
    // Read again, unchanged: the same object, so the merge keeps serving the same instance.
    const again = meshReader.read(SE, envelope('a.example.com'), 'test');
    assert.ok(again.ok);
    assert.equal(again.resource, annotated.resource);
    const relayedSpec = { hosts: ['b.example.com'], location: 'MESH_EXTERNAL' };
    const relay = encodeMcpResource(
      SE,
      {
        namespace: 'shop',
        name: 'relayed',
        annotations: { [SOURCE_ANNOTATION]: 'far-away', [SOURCE_VERSION_ANNOTATION]: 'v7' },
        spec: relayedSpec,
      },
      { createTime: { seconds: 1_700_000_000, nanos: 0 } },
    );
    const relayed = meshReader.read(SE, relay, 'test');
    const asSent = reader().read(SE, relay, 'test');
    assert.ok(relayed.ok && asSent.ok);
    assert.deepEqual(relayed.resource, asSent.resource, 'an object naming a source is not annotated again');
    assert.equal(relayed.resource.annotations[SOURCE_ANNOTATION], 'far-away');
  });

  it('refuses an object carrying an annotation istiod refuses, naming it, and dry runs outside AuthorizationPolicies', () => {
    const r = reader();
    const AP = kindNamed('AuthorizationPolicy');
    const read = (
      kind: typeof SE,
      name: string,
      annotations: Record<string, string>,
      spec: Record<string, unknown>,
    ) => r.read(kind, encodeMcpResource(kind, { namespace: 'shop', name, annotations, spec }), 'test');
    const se = (name: string, annotations: Record<string, string>) =>
      read(SE, name, annotations, { hosts: [`${name}.example.com`], location: 'MESH_EXTERNAL' });
    const refused = (result: ReturnType<typeof se>): string => {
      assert.ok(!result.ok, 'refused');
      return result.error.message;
    };
    assert.ok(se('plain', {}).ok);
    assert.ok(se('noted', { note: 'x', 'example.com/owner': 'team' }).ok);
    for (const annotation of [
      'internal.istio.io/webhook-always-reject',
      'internal.istio.io/parents',
      'internal.istio.io/parent-namespace',
    ])
      assert.match(
        refused(se('internal', { note: 'x', [annotation]: 'y' })),
        new RegExp(`refuses the annotation ${annotation}`),
      );
    // Both kinds at once: the one refused on every kind is named.
    assert.match(
      refused(se('both', { 'istio.io/dry-run': 'true', 'internal.istio.io/parents': 'x' })),
      /refuses the annotation internal\.istio\.io\/parents/,
    );
    assert.match(
      refused(se('dry', { 'istio.io/dry-run': 'true' })),
      /refuses the annotation istio\.io\/dry-run/,
    );
    assert.ok(
      read(AP, 'dry', { 'istio.io/dry-run': 'true' }, {}).ok,
      'dry run is an AuthorizationPolicy feature',
    );
  });

  it('hands out the same result for the same bytes, wherever they arrive', () => {
    const r = reader();
    const first = r.read(SE, envelope('pay.example.com'), 'test');
    assert.ok(first.ok);
    // The same bytes in another buffer, as the next response of a stream brings them.
    const again = r.read(SE, Buffer.from(envelope('pay.example.com')), 'test');
    assert.equal(again, first);
    const changed = r.read(SE, envelope('pay2.example.com'), 'test');
    assert.notEqual(changed, first);
    assert.ok(changed.ok && changed.resource.version !== first.resource.version);
  });

  it('shares one creation time between objects created in the same second, and none finer', () => {
    const r = reader();
    const read = (name: string, seconds: number, nanos: number) => {
      const result = r.read(
        SE,
        encodeMcpResource(
          SE,
          { namespace: 'shop', name, spec: { hosts: [`${name}.example.com`], location: 'MESH_EXTERNAL' } },
          { createTime: { seconds, nanos } },
        ),
        'test',
      );
      assert.ok(result.ok, result.ok ? '' : result.error.message);
      return result.resource.createTime;
    };
    const a = read('a', 1_700_000_000, 0);
    const b = read('b', 1_700_000_000, 0);
    assert.equal(a, b, 'one object for one second');
    assert.deepEqual(a, { seconds: 1_700_000_000, nanos: 0 });
    const c = read('c', 1_700_000_001, 0);
    assert.deepEqual(c, { seconds: 1_700_000_001, nanos: 0 });
    const d = read('d', 1_700_000_000, 5);
    const e = read('e', 1_700_000_000, 5);
    assert.deepEqual(
      [d, e],
      [
        { seconds: 1_700_000_000, nanos: 5 },
        { seconds: 1_700_000_000, nanos: 5 },
      ],
    );
    assert.notEqual(d, a, 'a finer time is its own');
    // A second's object is never another second's, however many seconds were met in between.
    for (let i = 0; i < 5000; i++) read(`n${i}`, 1_600_000_000 + i, 0);
    const f = read('f', 1_700_000_000, 0);
    assert.deepEqual(f, { seconds: 1_700_000_000, nanos: 0 });
    assert.deepEqual(a, { seconds: 1_700_000_000, nanos: 0 }, 'what was handed out stays as it was');
  });

  it('keeps one buffer per object: the envelope read, its body a view of it', () => {
    const r = reader();
    const bytes = envelope('pay.example.com');
    const first = r.read(SE, bytes, 'test');
    assert.ok(first.ok);
    const { body } = first.resource;
    assert.deepEqual(Buffer.from(body.buffer), Buffer.from(bytes), "the body's buffer is the envelope");
    assert.equal(Object.keys(first).includes('raw'), false, 'no second view of it');
    // An envelope whose body is not a view of it (an empty body read through the full decoder,
    // for an unknown field) keeps its bytes beside the result, and is recognised again as well.
    const empty = encodeMcpResource(
      SE,
      { namespace: 'shop', name: 'empty', spec: {} },
      { createTime: { seconds: 1_700_000_000, nanos: 0 }, extra100: true },
    );
    const kept = r.read(SE, empty, 'test');
    assert.ok(kept.ok, kept.ok ? '' : kept.error.message);
    assert.equal(r.read(SE, Buffer.from(empty), 'test'), kept);
  });

  it('copies the objects of a first state side by side, and recognises each again by its own bytes', () => {
    // A bound that holds the 300 objects by their own size, not by the slabs they lie in.
    const r = new McpResourceReader({ defaultNamespace: 'default', origin: 'test', cacheBytes: 1024 * 1024 });
    const hosts = Array.from({ length: 300 }, (_, i) => `pay-${i}.example.com`);
    const first = hosts.map((h, i) => {
      const spec = { hosts: [h], location: 'MESH_EXTERNAL' };
      const bytes = encodeMcpResource(
        SE,
        { namespace: 'shop', name: `payments-${i}`, spec },
        { createTime: { seconds: 1_700_000_000, nanos: 0 } },
      );
      // Read as a first state is: nothing of the kind remembered when its response began.
      const result = r.read(SE, bytes, 'test', false);
      assert.ok(result.ok);
      return { bytes, spec, result };
    });
    const buffers = new Set(first.map(({ result }) => (result.ok ? result.resource.body.buffer : undefined)));
    assert.ok(buffers.size * 20 <= first.length, `${buffers.size} buffers for ${first.length} objects`);
    for (const { bytes, result } of first) {
      assert.equal(r.read(SE, Buffer.from(bytes), 'test'), result, 'the same bytes, the same result');
    }
    // Another first state (another source's, a kind subscribed later) goes into slabs after them,
    // never over them.
    for (let i = 0; i < 300; i++) {
      const other = encodeMcpResource(
        SE,
        {
          namespace: 'other',
          name: `svc-${i}`,
          spec: { hosts: [`svc-${i}.other`], location: 'MESH_INTERNAL' },
        },
        { createTime: { seconds: 1_700_000_000, nanos: 0 } },
      );
      assert.ok(r.read(SE, other, 'test', false).ok);
    }
    for (const { spec, result } of first) {
      const body = encodeBody(SE, spec);
      assert.ok(result.ok && Buffer.from(result.resource.body).equals(body), 'a body kept as read');
    }
    // A changed object is read anew, into a buffer of its own.
    const changed = encodeMcpResource(
      SE,
      {
        namespace: 'shop',
        name: 'payments-7',
        spec: { hosts: ['moved.example.com'], location: 'MESH_EXTERNAL' },
      },
      { createTime: { seconds: 1_700_000_000, nanos: 0 } },
    );
    const next = r.read(SE, changed, 'test');
    assert.ok(next.ok);
    assert.notEqual(next, first[7]?.result);
    assert.deepEqual(Buffer.from(next.resource.body.buffer), Buffer.from(changed));
  });

  it('reads an object again once it was forgotten, and only then', () => {
    const r = reader();
    const first = r.read(SE, envelope('pay.example.com'), 'test');
    r.forget(first);
    const fresh = r.read(SE, envelope('pay.example.com'), 'test');
    assert.notEqual(fresh, first, 'decoded again');
    assert.ok(fresh.ok && first.ok);
    assert.equal(fresh.resource.version, first.resource.version, 'to the same content');
    // Forgetting an older result of the name leaves the newer one kept.
    const newer = r.read(SE, envelope('pay2.example.com'), 'test');
    r.forget(fresh);
    assert.equal(r.read(SE, envelope('pay2.example.com'), 'test'), newer);
  });
  it('names an object by the namespace and name it is sent under, or the default namespace, and refuses any other name', () => {
    const RESOURCE = messageType('istio.mcp.v1alpha1.Resource');
    const body = encodeBody(SE, { hosts: ['a.example.com'], location: 'MESH_EXTERNAL' });
    const named = (name: string): Uint8Array =>
      RESOURCE.encode(
        RESOURCE.fromObject({
          metadata: { name, create_time: { seconds: 1_700_000_000 } },
          body: { type_url: anyTypeUrl(SE.bodyType), value: body },
        }),
      ).finish();
    const r = reader();
    const read = (name: string): string => {
      const result = r.read(SE, named(name), 'test');
      if (!result.ok) return `refused: ${result.error.location.field ?? ''}`;
      return `${result.resource.namespace} ${result.resource.name}`;
    };
    assert.deepEqual(
      ['shop/cart', 'cart', '/cart', 'a-very-long-namespace/a-very-long-name', '', 'shop/', 'a/b/c', '/'].map(
        read,
      ),
      [
        'shop cart',
        'default cart',
        'default cart',
        'a-very-long-namespace a-very-long-name',
        'refused: metadata.name',
        'refused: metadata.name',
        'refused: metadata.name',
        'refused: metadata.name',
      ],
    );
  });
});
