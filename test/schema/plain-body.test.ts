import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { makeResource } from '../../src/core/resource.js';
import { KINDS } from '../../src/schema/kinds.js';
import { checkUpstreamObject } from '../../src/schema/object-checks.js';
import { messageType } from '../../src/schema/proto-root.js';
import { semanticSubjectsOf, semanticSubjectsOfMessage } from '../../src/schema/semantic-keys.js';
import { findUnknownFields, isPlainBody } from '../../src/schema/unknown-fields.js';
import { StrictReader } from '../../src/wire/strict-reader.js';
import { arbitraryMessage } from '../support/arbitrary-messages.js';

type Mutation =
  | { readonly at: number; readonly byte: number }
  | { readonly cut: number }
  | { readonly append: Uint8Array }
  | { readonly spoil: number };

/** Ways to spoil a body: a byte changed, bytes cut off, bytes added, text that is not UTF-8. */
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ cut: fc.nat() }),
  fc.record({ append: fc.uint8Array({ minLength: 1, maxLength: 6 }) }),
  fc.record({ spoil: fc.nat() }),
);

function mutate(body: Uint8Array, m: Mutation): Uint8Array {
  const out = Uint8Array.from(body);
  if ('byte' in m) {
    if (out.length > 0) out[m.at % out.length] = m.byte;
    return out;
  }
  if ('cut' in m) return out.subarray(0, m.cut % (out.length + 1));
  if ('append' in m) return Uint8Array.from([...out, ...m.append]);
  // A lower-case letter becomes 0xff: a string field, if it was in one, is no longer UTF-8.
  const letters = [...out.keys()].filter((i) => (out[i] ?? 0) >= 0x61 && (out[i] ?? 0) <= 0x7a);
  const at = letters[m.spoil % Math.max(letters.length, 1)];
  if (at !== undefined) out[at] = 0xff;
  return out;
}

/** Metadata that passes its checks: what an object's checks find is its body's. */
const META = { namespace: 'shop', name: 'x', labels: {}, annotations: {} };

/**
 * Whether a full decode and the checks an upstream object passes find anything in `body`: a fault
 * decoding it, a field the schema does not declare, or what the checks of its JSON form refuse.
 */
function refusedInFull(type: protobuf.Type, body: Uint8Array): boolean {
  try {
    const decoded = type.decode(new StrictReader(body));
    return (
      findUnknownFields(type, body).length > 0 || checkUpstreamObject(META, type, decoded).errors.length > 0
    );
  } catch {
    return true;
  }
}

/**
 * The semantic keys of `body`, read from its bytes as the merge reads them: from a copy of its own,
 * or (`inPlace`) where it lies.
 */
function keys(kind: string, body: Uint8Array, inPlace = false): readonly string[] {
  return semanticSubjectsOf(
    makeResource({
      kind,
      namespace: 'shop',
      name: 'x',
      labels: {},
      annotations: {},
      createTime: { seconds: 1, nanos: 0 },
      body: inPlace ? body : Uint8Array.from(body),
      origin: {},
    }),
  );
}

describe('a plain body', () => {
  it('decodes without fault, has nothing unknown or refused by the checks, and gives the semantic keys decoding gives, for every kind, however spoiled', () => {
    let plain = 0;
    let refused = 0;
    for (const kind of KINDS.kinds) {
      const type = messageType(kind.bodyType);
      fc.assert(
        fc.property(arbitraryMessage(type, 3), fc.option(mutation), (fields, m) => {
          const encoded = type.encode(type.fromObject(fields)).finish();
          const body = m === null ? encoded : mutate(encoded, m);
          if (!isPlainBody(type, body)) {
            refused++;
            return;
          }
          plain++;
          const decoded = type.decode(new StrictReader(body));
          assert.deepEqual(findUnknownFields(type, body), []);
          assert.deepEqual(checkUpstreamObject(META, type, decoded).errors, [], kind.kind);
          assert.deepEqual(
            keys(kind.key, body),
            semanticSubjectsOfMessage(kind.key, 'shop', decoded),
            kind.kind,
          );
        }),
        { numRuns: 200, seed: 5 },
      );
    }
    // Both answers are reached: the property is not vacuous either way.
    assert.ok(plain > 500, `${plain} plain bodies`);
    assert.ok(refused > 1000, `${refused} bodies left to a full decode`);
  });

  it('gives the same semantic keys for bodies lying side by side in one buffer, small or large, read in any order', () => {
    const se = messageType('istio.networking.v1alpha3.ServiceEntry');
    const vs = messageType('istio.networking.v1alpha3.VirtualService');
    const bodies: Array<[string, Uint8Array]> = [
      [
        'networking.istio.io/ServiceEntry',
        se.encode(se.fromObject({ hosts: ['a.example', 'ä.example'] })).finish(),
      ],
      [
        'networking.istio.io/VirtualService',
        vs.encode(vs.fromObject({ hosts: ['b.example'], gateways: ['gw'] })).finish(),
      ],
      ['networking.istio.io/ServiceEntry', se.encode(se.fromObject({ hosts: ['c.example'] })).finish()],
    ];
    const own = bodies.map(([kind, body]) => keys(kind, body));
    assert.deepEqual(own[0], ['a.example', 'ä.example']);
    // As a first state's slab holds them (a few KB), and in a buffer larger than any kept wrapper.
    for (const size of [4096, 200_000]) {
      const memory = new Uint8Array(size);
      const views: Uint8Array[] = [];
      let at = 17;
      for (const [, body] of bodies) {
        memory.set(body, at);
        views.push(memory.subarray(at, at + body.length));
        at += body.length + 5;
      }
      for (const i of [2, 0, 1, 0, 2, 1]) {
        const [kind] = bodies[i] as [string, Uint8Array];
        const body = views[i] as Uint8Array;
        const read = keys(kind, body, true);
        assert.deepEqual(read, own[i], `body ${i} in ${size} bytes`);
      }
    }
  });

  it('is not a body with an unknown field, a field of another wire type, text that is not UTF-8, an Any or bytes left over', () => {
    const se = messageType('istio.networking.v1alpha3.ServiceEntry');
    const good = se
      .encode(se.fromObject({ hosts: ['a.example'], ports: [{ number: 80, name: 'http' }] }))
      .finish();
    assert.equal(isPlainBody(se, good), true);
    const spoiled: [string, Uint8Array][] = [
      ['an unknown field 99', Uint8Array.from([...good, 0x98, 0x06, 0x01])],
      ['hosts as a varint', Uint8Array.from([...good, 0x08, 0x01])],
      ['a host that is not UTF-8', Uint8Array.from([...good, 0x0a, 0x02, 0xc3, 0x28])],
      ['a length past the end', Uint8Array.from([...good, 0x0a, 0x09, 0x61])],
      ['a group', Uint8Array.from([...good, 0x0b, 0x0c])],
    ];
    for (const [what, body] of spoiled) assert.equal(isPlainBody(se, body), false, what);
    const ef = messageType('istio.networking.v1alpha3.EnvoyFilter');
    const withStruct = ef
      .encode(
        ef.fromObject({ config_patches: [{ patch: { value: { fields: { a: { stringValue: 'b' } } } } }] }),
      )
      .finish();
    assert.ok(withStruct.length > 10);
    assert.equal(
      isPlainBody(ef, withStruct),
      false,
      'a Struct is left to the checks (only printing it tells)',
    );
    assert.equal(refusedInFull(ef, withStruct), false, 'a Struct the checks accept');
    const resource = messageType('istio.mcp.v1alpha1.Resource');
    const wrapped = resource
      .encode(
        resource.fromObject({
          metadata: { name: 'a/b' },
          body: { type_url: 'type.googleapis.com/x', value: good },
        }),
      )
      .finish();
    assert.equal(isPlainBody(resource, wrapped), false, 'an Any is left to a full decode');
  });
});

/**
 * A message holding every part the checks of a decoded message may refuse, each beside parts of
 * its kind they accept: a Duration, alternatives of a oneof, a float, a map keyed by bool,
 * wrappers (one of a float), a Struct, and all of them again nested, listed and as map values.
 */
const HAZARDS_PROTO = `
syntax = "proto3";
package plain.test;
message Hazards {
  google.protobuf.Duration timeout = 1;
  oneof match {
    string exact = 2;
    string prefix = 3;
    Hazards nested = 4;
  }
  float ratio = 5;
  map<bool, string> flags = 6;
  google.protobuf.FloatValue scale = 7;
  google.protobuf.BoolValue on = 8;
  google.protobuf.Struct extra = 9;
  repeated Hazards children = 10;
  map<string, google.protobuf.Duration> timeouts = 11;
  optional string note = 12;
}
`;

function hazardsType(): protobuf.Type {
  const root = new protobuf.Root();
  for (const file of ['duration', 'wrappers', 'struct']) {
    const json = protobuf.common.get(`google/protobuf/${file}.proto`) as protobuf.INamespace;
    root.addJSON(json.nested ?? {});
  }
  protobuf.parse(HAZARDS_PROTO, root, { keepCase: true });
  root.resolveAll();
  return root.lookupType('plain.test.Hazards');
}

/** `value` one time in five, else nothing: a part the checks may refuse, left out of most bodies. */
function rare<T>(value: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> {
  return fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value });
}

/** Seconds and nanos about the bounds a Duration's JSON form is read back within, and far off. */
const duration = fc.record(
  {
    seconds: fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 100 }) },
      { weight: 2, arbitrary: fc.integer({ min: 8_999_999_990, max: 9_400_000_000 }) },
      { weight: 1, arbitrary: fc.integer({ min: -100, max: -1 }) },
      { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String) },
    ),
    nanos: fc.oneof(
      { weight: 4, arbitrary: fc.integer({ min: 0, max: 999_999_999 }) },
      { weight: 1, arbitrary: fc.integer({ min: 999_999_990, max: 1_000_000_010 }) },
      { weight: 1, arbitrary: fc.integer({ min: -1_000_000_010, max: 0 }) },
    ),
  },
  { requiredKeys: [] },
);

/** The largest float, whose shortest printed form reads back beyond the float range. */
const MAX_FLOAT = 3.4028234663852886e38;

/** Any float, the largest of either sign often. */
const float = fc.oneof(fc.float(), fc.constantFrom(MAX_FLOAT, -MAX_FLOAT));

/** A Struct's value: one with a kind, or one without (whose JSON form cannot be printed). */
const structValue = fc.oneof(
  fc.record({ stringValue: fc.string({ maxLength: 3 }) }),
  fc.record({ numberValue: fc.double() }),
  fc.constant({}),
);

function hazards(depth: number): fc.Arbitrary<Record<string, unknown>> {
  const inner = depth > 0 ? hazards(depth - 1) : fc.constant({});
  return fc.record({
    timeout: fc.option(duration, { nil: undefined }),
    exact: fc.option(fc.string({ maxLength: 3 }), { nil: undefined }),
    prefix: rare(fc.string({ maxLength: 3 })),
    nested: rare(inner),
    children: fc.option(fc.array(inner, { maxLength: 2 }), { nil: undefined }),
    ratio: rare(float),
    flags: rare(fc.dictionary(fc.constantFrom('true', 'false'), fc.string({ maxLength: 2 }), { maxKeys: 2 })),
    scale: fc.option(fc.record({ value: rare(float) }), { nil: undefined }),
    on: fc.option(fc.record({ value: fc.boolean() }), { nil: undefined }),
    extra: rare(
      fc.record({ fields: fc.dictionary(fc.string({ maxLength: 2 }), structValue, { maxKeys: 2 }) }),
    ),
    timeouts: fc.option(fc.dictionary(fc.string({ maxLength: 2 }), duration, { maxKeys: 2 }), {
      nil: undefined,
    }),
    note: fc.option(fc.string({ maxLength: 2 }), { nil: undefined }),
  });
}

describe('a plain body and the checks of its decoded message', () => {
  it('is never a body the checks refuse, whatever part of it they refuse and wherever it lies', () => {
    const type = hazardsType();
    let plain = 0;
    let refused = 0;
    fc.assert(
      fc.property(hazards(1), (fields) => {
        const body = type.encode(type.fromObject(fields)).finish();
        const inFull = refusedInFull(type, body);
        if (inFull) refused++;
        if (!isPlainBody(type, body)) return;
        plain++;
        assert.equal(inFull, false, 'a plain body the checks refuse');
      }),
      { numRuns: 3000, seed: 11 },
    );
    // Both answers are reached, and the checks refuse many of the bodies generated.
    assert.ok(plain > 100, `${plain} plain bodies`);
    assert.ok(refused > 1000, `${refused} bodies the checks refuse`);
  });

  it('is a body with Durations within Go’s range, one alternative of a oneof and wrappers of anything but a float', () => {
    const type = hazardsType();
    const body = (fields: Record<string, unknown>): Uint8Array =>
      type.encode(type.fromObject(fields)).finish();
    const plainOnes: Record<string, unknown>[] = [
      { timeout: { seconds: 5 }, exact: 'a', on: { value: true } },
      { timeout: { seconds: 9_000_000_000, nanos: 999_999_999 }, nested: { prefix: 'b' } },
      { timeouts: { x: { nanos: 1 } }, children: [{ exact: 'c' }, { prefix: 'd' }], note: '' },
    ];
    for (const fields of plainOnes) {
      assert.equal(isPlainBody(type, body(fields)), true, JSON.stringify(fields));
      assert.equal(refusedInFull(type, body(fields)), false, JSON.stringify(fields));
    }
    // Refused by the checks: each is left to them.
    const refusedOnes: Record<string, unknown>[] = [
      { timeout: { seconds: 9_300_000_000 } },
      { children: [{ timeouts: { y: { seconds: 400_000_000_000 } } }] },
      { exact: 'a', prefix: 'b' },
      { flags: { true: 'x' } },
      { ratio: MAX_FLOAT },
      { nested: { scale: { value: -MAX_FLOAT } } },
      { extra: { fields: { k: {} } } },
    ];
    for (const fields of refusedOnes) {
      assert.equal(isPlainBody(type, body(fields)), false, JSON.stringify(fields));
      assert.equal(refusedInFull(type, body(fields)), true, JSON.stringify(fields));
    }
    // Accepted by the checks, but left to them all the same: nothing tells them apart from bytes
    // the checks refuse without reading as much.
    for (const fields of [{ timeout: { seconds: -1 } }, { ratio: 0.5 }, { scale: { value: 2 } }]) {
      assert.equal(isPlainBody(type, body(fields)), false, JSON.stringify(fields));
    }
  });
});
