import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { makeResource, restoreResource, type ConfigResource } from '../../src/core/resource.js';
import { ResourceEncoder } from '../../src/downstream/resource-encoder.js';
import { MCP_RESOURCE_TYPE_URL } from '../../src/wire/type-urls.js';
import { KINDS } from '../../src/schema/kinds.js';
import { anyTypeUrl, messageType } from '../../src/schema/proto-root.js';

const RESPONSE = messageType('envoy.service.discovery.v3.DiscoveryResponse');
const MCP_RESOURCE = messageType('istio.mcp.v1alpha1.Resource');
const KIND = 'networking.istio.io/VirtualService';

interface Fields {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  createTime?: { seconds: number; nanos: number };
  body?: Uint8Array;
  kind?: string;
}

function resource(f: Fields = {}): ConfigResource {
  return makeResource({
    kind: f.kind ?? KIND,
    namespace: f.namespace ?? 'shop',
    name: f.name ?? 'cart',
    labels: f.labels ?? {},
    annotations: f.annotations ?? {},
    createTime: f.createTime ?? { seconds: 1_700_000_000, nanos: 5 },
    body: f.body ?? new Uint8Array(0),
    origin: {},
  });
}

interface Decoded {
  typeUrl: string;
  name: string;
  version: string;
  createTime?: { seconds?: number; nanos?: number };
  labels: Record<string, string>;
  annotations: Record<string, string>;
  bodyTypeUrl: string;
  body: Uint8Array;
}

/** Reads one framed entry back the way istiod does: as the `resources` field of a DiscoveryResponse. */
function decode(framed: Uint8Array): Decoded {
  const response = RESPONSE.toObject(RESPONSE.decode(framed), { longs: Number }) as {
    resources?: Array<{ type_url: string; value: Uint8Array }>;
  };
  assert.equal(response.resources?.length, 1, 'one resources entry');
  const any = response.resources[0] as { type_url: string; value: Uint8Array };
  const mcp = MCP_RESOURCE.toObject(MCP_RESOURCE.decode(any.value), { longs: Number, defaults: false }) as {
    metadata: {
      name: string;
      version: string;
      create_time?: { seconds?: number; nanos?: number };
      labels?: Record<string, string>;
      annotations?: Record<string, string>;
    };
    body: { type_url: string; value: Uint8Array };
  };
  return {
    typeUrl: any.type_url,
    name: mcp.metadata.name,
    version: mcp.metadata.version,
    ...(mcp.metadata.create_time === undefined ? {} : { createTime: mcp.metadata.create_time }),
    labels: mcp.metadata.labels ?? {},
    annotations: mcp.metadata.annotations ?? {},
    bodyTypeUrl: mcp.body.type_url,
    body: mcp.body.value,
  };
}

/** Whether the create_time field is on the wire, whatever its value (proto3 readers hide an empty one). */
function hasCreateTimeField(framed: Uint8Array): boolean {
  const response = RESPONSE.decode(framed) as unknown as { resources: Array<{ value: Uint8Array }> };
  const mcp = MCP_RESOURCE.decode((response.resources[0] as { value: Uint8Array }).value) as unknown as {
    metadata: { create_time?: unknown };
  };
  return mcp.metadata.create_time !== undefined && mcp.metadata.create_time !== null;
}

describe('resource encoder', () => {
  it('frames an object as an MCP Resource inside the resources field of a DiscoveryResponse', () => {
    const encoder = new ResourceEncoder(KINDS);
    const body = new Uint8Array([0x0a, 0x03, 0x61, 0x62, 0x63]);
    const r = resource({
      labels: { app: 'cart', 'istio.io/rev': 'canary' },
      annotations: { owner: 'team-a' },
      createTime: { seconds: 1_700_000_123, nanos: 456 },
      body,
    });
    const got = decode(encoder.framed(r));
    assert.equal(got.typeUrl, 'type.googleapis.com/istio.mcp.v1alpha1.Resource');
    assert.equal(MCP_RESOURCE_TYPE_URL, got.typeUrl);
    assert.equal(got.name, 'shop/cart');
    assert.equal(got.version, r.version);
    assert.deepEqual(got.createTime, { seconds: 1_700_000_123, nanos: 456 });
    assert.deepEqual(got.labels, { app: 'cart', 'istio.io/rev': 'canary' });
    assert.deepEqual(got.annotations, { owner: 'team-a' });
    assert.equal(got.bodyTypeUrl, anyTypeUrl(KINDS.get(KIND)?.bodyType ?? '?'));
    assert.deepEqual([...got.body], [...body]);
  });

  it('writes the bytes protobufjs writes for the same response entry, whatever the size of the body', () => {
    const encoder = new ResourceEncoder(KINDS);
    // Bodies whose lengths take one to four bytes as varints, at every level of nesting.
    for (const size of [0, 5, 127, 128, 16_383, 16_384, 300_000, 2_097_152]) {
      const body = Uint8Array.from({ length: size }, (_, i) => (i * 31) & 0xff);
      const r = resource({
        name: `sized-${size}`,
        labels: { app: 'cart', zone: 'z1' },
        annotations: { 'owner.example/team': 'a' },
        createTime: { seconds: 1_700_000_123, nanos: 456 },
        body,
      });
      const mcp = MCP_RESOURCE.encode({
        metadata: {
          name: `shop/sized-${size}`,
          create_time: { seconds: 1_700_000_123, nanos: 456 },
          version: r.version,
          labels: { app: 'cart', zone: 'z1' },
          annotations: { 'owner.example/team': 'a' },
        },
        body: { type_url: anyTypeUrl(KINDS.get(KIND)?.bodyType ?? '?'), value: body },
      }).finish();
      const expected = RESPONSE.encode({
        resources: [{ type_url: MCP_RESOURCE_TYPE_URL, value: mcp }],
      }).finish();
      assert.ok(Buffer.from(encoder.framed(r)).equals(expected), `a body of ${size} bytes`);
    }
  });

  it('writes the bytes protobufjs writes for any metadata: any text, sizes and creation time', () => {
    const text = fc.oneof(
      fc.string({ maxLength: 8 }),
      fc.string({ unit: 'grapheme', maxLength: 8 }),
      fc.string({ minLength: 60, maxLength: 140 }),
      fc.string({ unit: 'binary', minLength: 60, maxLength: 90 }),
    );
    const map = fc.dictionary(text, text, { maxKeys: 4 });
    fc.assert(
      fc.property(
        fc.record({
          namespace: text,
          name: text,
          labels: map,
          annotations: map,
          // Negative times take ten bytes as protobuf varints, as every int64 below zero does.
          seconds: fc.oneof(fc.constant(0), fc.integer({ min: -62_135_596_800, max: 253_402_300_799 })),
          nanos: fc.oneof(fc.constant(0), fc.integer({ min: -999_999_999, max: 999_999_999 })),
          body: fc.uint8Array({ maxLength: 300 }),
        }),
        (f) => {
          const r = resource({ ...f, createTime: { seconds: f.seconds, nanos: f.nanos } });
          const mcp = MCP_RESOURCE.encode({
            metadata: {
              name: `${f.namespace}/${f.name}`,
              // Only the parts that are not zero, as meshmux writes them (protobufjs writes a
              // zero it is given).
              create_time: {
                ...(f.seconds === 0 ? {} : { seconds: f.seconds }),
                ...(f.nanos === 0 ? {} : { nanos: f.nanos }),
              },
              version: r.version,
              labels: f.labels,
              annotations: f.annotations,
            },
            body: { type_url: anyTypeUrl(KINDS.get(KIND)?.bodyType ?? '?'), value: f.body },
          }).finish();
          const expected = RESPONSE.encode({
            resources: [{ type_url: MCP_RESOURCE_TYPE_URL, value: mcp }],
          }).finish();
          const decoded = decode(expected);
          // protobufjs writes map entries in insertion order and their empty parts too (meshmux
          // leaves those out, as the test above says): compare the bytes where neither differs,
          // and read ours back in every case.
          const plain = (m: Record<string, string>): boolean =>
            Object.keys(m).every(
              (k, i, keys) => k !== '' && m[k] !== '' && (i === 0 || (keys[i - 1] as string) < k),
            );
          const got = new ResourceEncoder(KINDS).framed(r);
          if (plain(f.labels) && plain(f.annotations)) assert.ok(Buffer.from(got).equals(expected));
          assert.deepEqual(decode(got), decoded);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('sends create_time even at the epoch, with only the non-zero parts set', () => {
    const encoder = new ResourceEncoder(KINDS);
    const epoch = encoder.framed(resource({ name: 'epoch', createTime: { seconds: 0, nanos: 0 } }));
    assert.ok(hasCreateTimeField(epoch), 'create_time present at the epoch');
    assert.equal(decode(epoch).createTime?.seconds ?? 0, 0);
    const nanosOnly = decode(encoder.framed(resource({ name: 'n', createTime: { seconds: 0, nanos: 7 } })));
    assert.deepEqual(nanosOnly.createTime, { nanos: 7 });
    const secondsOnly = decode(encoder.framed(resource({ name: 's', createTime: { seconds: 9, nanos: 0 } })));
    assert.deepEqual(secondsOnly.createTime, { seconds: 9 });
  });

  it('emits the same bytes for the same labels and annotations whatever order they were written in', () => {
    const encoder = new ResourceEncoder(KINDS);
    const a = encoder.framed(
      resource({ labels: { b: '2', a: '1', c: '3' }, annotations: { y: 'y', x: 'x' } }),
    );
    const b = new ResourceEncoder(KINDS).framed(
      resource({ labels: { c: '3', a: '1', b: '2' }, annotations: { x: 'x', y: 'y' } }),
    );
    assert.deepEqual(Buffer.from(a), Buffer.from(b));
    // And sorted on the wire: the map entries appear in key order.
    const text = Buffer.from(a).toString('latin1');
    assert.ok(text.indexOf('\u0001a') < text.indexOf('\u0001b'), 'label a before b');
    assert.ok(text.indexOf('\u0001b') < text.indexOf('\u0001c'), 'label b before c');
    assert.ok(text.indexOf('\u0001x') < text.indexOf('\u0001y'), 'annotation x before y');
  });

  it('keeps a label with an empty value and omits the empty parts of its map entry', () => {
    const encoder = new ResourceEncoder(KINDS);
    const framed = encoder.framed(resource({ labels: { flag: '' }, annotations: { '': 'anonymous' } }));
    const got = decode(framed);
    assert.deepEqual(got.labels, { flag: '' });
    assert.deepEqual(got.annotations, { '': 'anonymous' });
    // An entry with an empty value is the key alone: tag, length, key; no empty value field.
    const withEmpty = Buffer.from(framed);
    const flagEntry = Buffer.from([0x22, 0x06, 0x0a, 0x04, ...Buffer.from('flag')]);
    assert.ok(withEmpty.includes(flagEntry), 'label entry is exactly the key field');
    const anonEntry = Buffer.from([0x2a, 0x0b, 0x12, 0x09, ...Buffer.from('anonymous')]);
    assert.ok(withEmpty.includes(anonEntry), 'annotation entry is exactly the value field');
  });

  it('encodes an object once however often it is framed, by instance or by equal content', () => {
    const encoder = new ResourceEncoder(KINDS);
    const r = resource({ name: 'once' });
    const first = encoder.framed(r);
    assert.equal(encoder.framed(r), first, 'same instance, same bytes');
    assert.equal(encoder.encodes, 1);
    const twin = resource({ name: 'once' });
    assert.equal(encoder.framed(twin), first, 'an equal object built again shares the bytes');
    assert.equal(encoder.encodes, 1);
    // Times with a part at zero, which the Timestamp leaves out, are found by content too.
    for (const createTime of [
      { seconds: 0, nanos: 0 },
      { seconds: 7, nanos: 0 },
      { seconds: 0, nanos: 7 },
    ]) {
      const name = `at-${createTime.seconds}-${createTime.nanos}`;
      const bytes = encoder.framed(resource({ name, createTime }));
      assert.equal(encoder.framed(resource({ name, createTime })), bytes, name);
    }
    assert.equal(encoder.encodes, 4);
  });

  it('encodes again when the version, the creation time or the identity differs', () => {
    const encoder = new ResourceEncoder(KINDS);
    const base = resource({ name: 'x', createTime: { seconds: 10, nanos: 1 } });
    encoder.framed(base);
    const changes: Array<[string, ConfigResource]> = [
      [
        'body (version)',
        resource({ name: 'x', createTime: { seconds: 10, nanos: 1 }, body: new Uint8Array([1]) }),
      ],
      ['seconds', resource({ name: 'x', createTime: { seconds: 11, nanos: 1 } })],
      ['nanos', resource({ name: 'x', createTime: { seconds: 10, nanos: 2 } })],
      ['name', resource({ name: 'y', createTime: { seconds: 10, nanos: 1 } })],
      ['namespace', resource({ name: 'x', namespace: 'pay', createTime: { seconds: 10, nanos: 1 } })],
      [
        'kind',
        resource({ name: 'x', kind: 'networking.istio.io/Gateway', createTime: { seconds: 10, nanos: 1 } }),
      ],
    ];
    for (const [what, r] of changes) {
      const before = encoder.encodes;
      const got = decode(encoder.framed(r));
      assert.equal(encoder.encodes, before + 1, `a different ${what} is encoded anew`);
      assert.equal(got.version, r.version, what);
      assert.equal(got.name, `${r.namespace}/${r.name}`, what);
      assert.deepEqual(got.createTime, r.createTime, what);
    }
    // Back to the first creation time: the bytes kept under the version carry another one.
    const again = resource({ name: 'x', createTime: { seconds: 10, nanos: 1 } });
    assert.deepEqual(decode(encoder.framed(again)).createTime, { seconds: 10, nanos: 1 });
    // An epoch creation time (an empty Timestamp) is told apart from any other.
    const epoch = resource({ name: 'x', createTime: { seconds: 0, nanos: 0 } });
    assert.equal(decode(encoder.framed(epoch)).createTime?.seconds ?? 0, 0);
    assert.deepEqual(decode(encoder.framed(again)).createTime, { seconds: 10, nanos: 1 });
    // Times whose Timestamps begin alike (nanos added to the same seconds, or taken away).
    const whole = resource({ name: 'z', createTime: { seconds: 10, nanos: 0 } });
    const withNanos = resource({ name: 'z', createTime: { seconds: 10, nanos: 1 } });
    assert.deepEqual(decode(encoder.framed(whole)).createTime, { seconds: 10 });
    assert.deepEqual(decode(encoder.framed(withNanos)).createTime, { seconds: 10, nanos: 1 });
    assert.deepEqual(decode(encoder.framed(whole)).createTime, { seconds: 10 });
  });

  it('keeps hand-made versions apart: a version not derived from content names nothing', () => {
    const encoder = new ResourceEncoder(KINDS);
    const a = restoreResource({ ...resource({ name: 'a' }) }, 'v1');
    const b = restoreResource({ ...resource({ name: 'b', body: new Uint8Array([7]) }) }, 'v1');
    assert.equal(decode(encoder.framed(a)).name, 'shop/a');
    const got = decode(encoder.framed(b));
    assert.equal(got.name, 'shop/b');
    assert.deepEqual([...got.body], [7]);
    assert.equal(encoder.encodes, 2);
  });

  it('encodes again once the byte cap has pushed an object out, and keeps serving the same bytes', () => {
    const encoder = new ResourceEncoder(KINDS, { maxCacheBytes: 1 });
    const a = encoder.framed(resource({ name: 'a' }));
    encoder.framed(resource({ name: 'a' }));
    assert.equal(encoder.encodes, 2, 'nothing fits a one-byte cache, so each new instance is encoded');
    const roomy = new ResourceEncoder(KINDS);
    roomy.framed(resource({ name: 'a' }));
    roomy.framed(resource({ name: 'a' }));
    assert.equal(roomy.encodes, 1, 'the default cap keeps it');
    assert.deepEqual(Buffer.from(roomy.framed(resource({ name: 'a' }))), Buffer.from(a));
  });

  it('frames the same object instance once even when the byte cap keeps nothing', () => {
    const encoder = new ResourceEncoder(KINDS, { maxCacheBytes: 1 });
    const r = resource({ name: 'kept-by-instance' });
    const first = encoder.framed(r);
    assert.equal(encoder.framed(r), first);
    assert.equal(encoder.encodes, 1, 'a live instance is never encoded twice');
  });

  it('keeps thousands of objects under the default cap', () => {
    const encoder = new ResourceEncoder(KINDS);
    const names = Array.from({ length: 2000 }, (_, i) => `obj-${i}`);
    for (const name of names) encoder.framed(resource({ name }));
    for (const name of names) encoder.framed(resource({ name }));
    assert.equal(encoder.encodes, names.length, 'equal objects built again are all served from the cache');
  });

  it('keeps no more encoded bytes than its cap', () => {
    const size = new ResourceEncoder(KINDS).framed(resource({ name: 'a' })).byteLength;
    const cap = Math.floor(2.5 * size);
    const encoder = new ResourceEncoder(KINDS, { maxCacheBytes: cap });
    for (const name of ['a', 'b', 'c']) encoder.framed(resource({ name }));
    assert.equal(encoder.encodes, 3);
    // Most recent first, so a miss (which adds an entry) cannot push out one not yet asked for.
    for (const name of ['c', 'b', 'a']) encoder.framed(resource({ name }));
    const held = 3 - (encoder.encodes - 3);
    assert.ok(held * size <= cap, `${held} objects of ${size} bytes held under a cap of ${cap} bytes`);
    assert.ok(held >= 1, 'the most recent object is held');
  });

  it('refuses an object of a kind the registry does not know, naming the kind', () => {
    const encoder = new ResourceEncoder(KINDS);
    assert.throws(() => encoder.framed(resource({ kind: 'example.com/Nope' })), {
      message: 'no kind example.com/Nope in the registry',
    });
  });

  it('returns bytes of their own, not a view into a shared buffer', () => {
    const encoder = new ResourceEncoder(KINDS);
    const framed = encoder.framed(resource({ name: 'own' }));
    assert.equal(framed.byteOffset, 0);
    assert.equal(framed.buffer.byteLength, framed.byteLength);
  });

  it("keeps an object's bytes where a block took them, for its instance and for equal content", () => {
    const encoder = new ResourceEncoder(KINDS);
    const r = resource({ name: 'moved' });
    const own = encoder.framed(r);
    const block = Buffer.alloc(own.byteLength + 10);
    block.set(own, 4);
    encoder.rehome(r, block, 4, own.byteLength);
    const inBlock = (bytes: Uint8Array): boolean =>
      bytes.buffer === block.buffer && bytes.byteOffset === block.byteOffset + 4;
    assert.ok(inBlock(encoder.framed(r)), 'the instance now answers with the bytes in the block');
    assert.ok(inBlock(encoder.framed(resource({ name: 'moved' }))), 'and so does equal content');
    assert.deepEqual(Buffer.from(encoder.framed(r)), Buffer.from(own));
    assert.equal(encoder.encodes, 1);
    // Bytes of another length are not the object's; an instance never framed is not known.
    encoder.rehome(r, block, 0, own.byteLength + 1);
    assert.ok(inBlock(encoder.framed(r)));
    const stranger = resource({ name: 'stranger' });
    encoder.rehome(stranger, block, 4, own.byteLength);
    assert.ok(!inBlock(encoder.framed(stranger)));
    assert.deepEqual(Buffer.from(encoder.framed(r)), Buffer.from(own));
  });

  it('plans an object not encoded yet and frames it into a block, where it is kept from then on', () => {
    const encoder = new ResourceEncoder(KINDS);
    const r = resource({ name: 'planned', labels: { app: 'planned' } });
    const expected = Buffer.from(new ResourceEncoder(KINDS).framed(r));
    const plan = encoder.plan(r);
    assert.ok(!(plan instanceof Uint8Array), 'not encoded yet: a plan');
    assert.equal(plan.length, expected.byteLength);
    assert.equal(encoder.encodes, 0);
    const block = Buffer.alloc(plan.length + 7, 0xee);
    encoder.frameInto(r, plan, block, 3);
    assert.ok(block.subarray(3, 3 + plan.length).equals(expected), 'the bytes framed() gives');
    assert.equal(block[2], 0xee);
    assert.equal(block[3 + plan.length], 0xee, 'nothing written past them');
    const inBlock = (bytes: Uint8Array): boolean =>
      bytes.buffer === block.buffer && bytes.byteOffset === block.byteOffset + 3;
    assert.ok(inBlock(encoder.framed(r)), 'the instance answers with the bytes in the block');
    const twin = resource({ name: 'planned', labels: { app: 'planned' } });
    const again = encoder.plan(twin);
    assert.ok(again instanceof Uint8Array && inBlock(again), 'equal content is planned as those bytes');
    assert.ok(inBlock(encoder.framed(twin)));
    assert.equal(encoder.encodes, 1);
    // Once framed the usual way, an object is planned as its bytes, not encoded again.
    const other = resource({ name: 'other' });
    const own = encoder.framed(other);
    assert.equal(encoder.plan(other), own);
    assert.equal(encoder.encodes, 2);
  });

  it('forgets the bytes of objects no longer served, unless an object now served has the same content', () => {
    const encoder = new ResourceEncoder(KINDS);
    const gone = resource({ name: 'gone' });
    const stays = resource({ name: 'stays' });
    encoder.framed(gone);
    encoder.framed(stays);
    assert.equal(encoder.encodes, 2);
    // `stays` comes back as another instance with the same content (a re-read): its bytes are kept.
    encoder.forget([gone, stays], [resource({ name: 'stays' })]);
    encoder.framed(resource({ name: 'stays' }));
    assert.equal(encoder.encodes, 2, 'the same content is not encoded again');
    encoder.framed(resource({ name: 'gone' }));
    assert.equal(encoder.encodes, 3, 'the removed object was forgotten, so its return is encoded again');
    // The instance itself keeps its bytes however the cache changes.
    encoder.forget([gone], []);
    const before = encoder.encodes;
    encoder.framed(gone);
    assert.equal(encoder.encodes, before);
  });

  it('forgets the same when more objects come than go (a first sync), whichever of them share content', () => {
    const encoder = new ResourceEncoder(KINDS);
    const names = ['gone', 'stays', 'other'];
    for (const name of names) encoder.framed(resource({ name }));
    assert.equal(encoder.encodes, 3);
    // Two go; one of them comes back among four new instances.
    encoder.forget(
      [resource({ name: 'gone' }), resource({ name: 'stays' })],
      ['stays', 'new-1', 'new-2', 'new-3'].map((name) => resource({ name })),
    );
    encoder.framed(resource({ name: 'stays' }));
    encoder.framed(resource({ name: 'other' }));
    assert.equal(encoder.encodes, 3, 'kept: the object re-added, and the one not removed');
    encoder.framed(resource({ name: 'gone' }));
    assert.equal(encoder.encodes, 4, 'the removed object was forgotten');
    // Every removed object re-added: nothing is forgotten.
    encoder.forget([resource({ name: 'stays' })], [resource({ name: 'stays' }), resource({ name: 'new-1' })]);
    encoder.framed(resource({ name: 'stays' }));
    assert.equal(encoder.encodes, 4);
  });
});
