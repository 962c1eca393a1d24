import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { makeResource } from '../../src/core/resource.js';
import { KINDS } from '../../src/schema/kinds.js';
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
  it('decodes without fault, has nothing unknown and gives the semantic keys decoding gives, for every kind, however spoiled', () => {
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
    const withAny = ef
      .encode(
        ef.fromObject({ configPatches: [{ patch: { value: { fields: { a: { stringValue: 'b' } } } } }] }),
      )
      .finish();
    assert.equal(isPlainBody(ef, withAny), true, 'a Struct is plain');
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
