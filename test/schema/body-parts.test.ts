import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import protobuf from 'protobufjs';
import type { MeshmuxError } from '../../src/core/errors.js';
import { type BodyParts, decodeBodyParts, LARGE_BODY_BYTES } from '../../src/schema/body-parts.js';
import { checkDecodedAsJson } from '../../src/schema/proto-json.js';
import { messageType } from '../../src/schema/proto-root.js';
import { StrictReader } from '../../src/wire/strict-reader.js';

const VS = messageType('istio.networking.v1alpha3.VirtualService');
const HTTP = VS.fields.http as protobuf.Field;

function routes(count: number): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, r) => ({
    name: `route-${r}`,
    match: [{ uri: { prefix: `/api/path-${r}` } }],
    route: [{ destination: { host: `svc-${r % 7}.shop.svc.cluster.local`, port: { number: 8080 } } }],
    timeout: { seconds: 1 + (r % 5) },
  }));
}

function encodeVs(spec: Record<string, unknown>): Uint8Array {
  return VS.encode(VS.fromObject(spec)).finish();
}

const LARGE = { hosts: ['shop.example'], gateways: ['shop/gw'], http: routes(2000), exportTo: ['.'] };

describe('a large body decoded in parts', () => {
  it('holds its top-level lists apart, each element decoded afresh, everything else decoded as a whole decode gives it', () => {
    const body = encodeVs(LARGE);
    assert.ok(body.length > LARGE_BODY_BYTES, `${body.length} bytes is a large body`);
    const parts = decodeBodyParts(VS, body);
    assert.ok(parts !== undefined);
    const whole = VS.decode(body);
    const { http: wholeRoutes, ...rest } = whole as unknown as { http: protobuf.Message[] };
    assert.deepEqual(
      (parts.message as unknown as { http: unknown }).http,
      [],
      'the list is not in the message',
    );
    assert.deepEqual(
      { ...parts.message, http: [] },
      { ...rest, http: [] },
      'hosts, gateways, exportTo as decoded',
    );
    assert.deepEqual((parts.message as unknown as { hosts: unknown }).hosts, ['shop.example']);
    assert.deepEqual([...parts.lists.keys()], [HTTP]);
    const list = parts.lists.get(HTTP);
    assert.equal(list?.length, 2000);
    for (const i of [0, 1, 999, 1999]) {
      assert.deepEqual(list.at(i), wholeRoutes[i], `route ${i}`);
    }
    assert.notEqual(list.at(7), list.at(7), 'nothing decoded is kept');
    assert.throws(() => list.at(2000), /no element 2000 in a list of 2000/);
  });

  it('is not used for a small body, one without lists, or one whose top level does not read plainly', () => {
    const large = encodeVs(LARGE);
    const cases: [string, Uint8Array][] = [
      ['a small body', encodeVs({ hosts: ['a'], http: routes(3) })],
      [
        'a body without lists of messages',
        encodeVs({ hosts: Array.from({ length: 5000 }, (_, i) => `host-${i}.example`) }),
      ],
      ['a route sent as a varint', Uint8Array.from([...large, 0x18, 0x01])],
      ['a truncated body', large.subarray(0, large.length - 3)],
      ['a group', Uint8Array.from([...large, 0x7b, 0x7c])],
    ];
    for (const [what, body] of cases) assert.equal(decodeBodyParts(VS, body), undefined, what);
    assert.ok(
      decodeBodyParts(VS, encodeVs({ hosts: ['a'], http: routes(3) }), 0) !== undefined,
      'unless asked to',
    );
  });

  it('is not used for a body whose route holds text that is not UTF-8: a whole decode names the byte', () => {
    const body = encodeVs(LARGE);
    const at = Buffer.from(body).indexOf('route-1500');
    body.set([0xff, 0xfe], at);
    assert.equal(decodeBodyParts(VS, body), undefined);
    assert.throws(
      () => VS.decode(new StrictReader(body)),
      new RegExp(`a string field at byte ${at} is not valid UTF-8`),
    );
  });

  it('is checked as the whole message is, a bad route named by its index', () => {
    const spec = structuredClone(LARGE);
    (spec.http[1500] as Record<string, unknown>).match = [{ uri: { exact: '/a', prefix: '/b' } }];
    const body = encodeVs(spec);
    const parts = decodeBodyParts(VS, body);
    assert.ok(parts !== undefined);
    const errors = (message: protobuf.Message, lists?: BodyParts['lists']): string[] => {
      const found: MeshmuxError[] = [];
      checkDecodedAsJson(VS, message, { path: 'spec', errors: found }, lists);
      return found.map((e) => `${e.location.field ?? ''}: ${e.message}`);
    };
    const apart = errors(parts.message, parts.lists);
    assert.deepEqual(apart, errors(VS.decode(body)));
    assert.deepEqual(apart, [
      'spec.http[1500].match[0].uri: only one of exact, prefix may be set (they are alternatives)',
    ]);
  });

  it('fails to print on the first part that has no JSON form, in field order, whatever follows the list', () => {
    const { nested } = protobuf.common.get('google/protobuf/timestamp.proto') as {
      nested: protobuf.INamespace['nested'];
    };
    const root = protobuf.Root.fromJSON({
      nested: {
        ...nested,
        t: {
          nested: {
            Item: { fields: { at: { type: 'google.protobuf.Timestamp', id: 1 } } },
            Holder: {
              fields: {
                items: { rule: 'repeated', type: 'Item', id: 1 },
                after: { type: 'google.protobuf.Timestamp', id: 2 },
              },
            },
          },
        },
      },
    });
    root.resolveAll();
    const holder = root.lookupType('t.Holder');
    const body = holder
      .encode(
        holder.fromObject({
          items: [{ at: { seconds: 1 } }, { at: { seconds: 99_999_999_999_999 } }],
          after: { seconds: 88_888_888_888_888 },
        }),
      )
      .finish();
    const parts = decodeBodyParts(holder, body, 0);
    assert.ok(parts !== undefined);
    const thrown = (run: () => void): string => {
      try {
        run();
      } catch (err) {
        return (err as Error).message;
      }
      return 'nothing thrown';
    };
    const whole = thrown(() => checkDecodedAsJson(holder, holder.decode(body), { errors: [] }));
    assert.match(whole, /99999999999999/);
    assert.equal(
      thrown(() => checkDecodedAsJson(holder, parts.message, { errors: [] }, parts.lists)),
      whole,
    );
  });
});
