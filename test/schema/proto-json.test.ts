import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MeshmuxError } from '../../src/core/errors.js';
import {
  encodeProtoJson,
  fromProtoJson,
  toProtoJson,
  type ProtoJsonContext,
} from '../../src/schema/proto-json.js';
import { messageType } from '../../src/schema/proto-root.js';

const NET = 'istio.networking.v1alpha3';
const VirtualService = messageType(`${NET}.VirtualService`);
const DestinationRule = messageType(`${NET}.DestinationRule`);
const Gateway = messageType(`${NET}.Gateway`);
const HTTPRoute = messageType(`${NET}.HTTPRoute`);
const Abort = messageType(`${NET}.HTTPFaultInjection.Abort`);
const StringMatch = messageType(`${NET}.StringMatch`);
const Port = messageType(`${NET}.Port`);
const HTTPBody = messageType(`${NET}.HTTPBody`);
const ConsistentHash = messageType(`${NET}.LoadBalancerSettings.ConsistentHashLB`);
const ClientTLS = messageType(`${NET}.ClientTLSSettings`);
const Patch = messageType(`${NET}.EnvoyFilter.Patch`);
const Percent = messageType(`${NET}.Percent`);
const PeerAuthentication = messageType('istio.security.v1beta1.PeerAuthentication');
const TrafficExtension = messageType('istio.extensions.v1alpha1.TrafficExtension');
const McpResource = messageType('istio.mcp.v1alpha1.Resource');

/** Reads JSON, encodes it, decodes the bytes and prints canonical JSON: the full round trip. */
function roundTrip(type: typeof VirtualService, json: unknown): unknown {
  return toProtoJson(type, type.decode(encodeProtoJson(type, json)));
}

function schemaError(fn: () => unknown, field: string, reason: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof MeshmuxError, String(err));
    assert.equal(err.code, 'SCHEMA');
    assert.equal(err.location.field, field);
    assert.match(err.reason, reason);
    return true;
  });
}

const inSpec: ProtoJsonContext = { path: 'spec' };

describe('fromProtoJson / encodeProtoJson', () => {
  test('accepts lowerCamel JSON names and proto names alike, producing the same bytes', () => {
    const camel = encodeProtoJson(VirtualService, { hosts: ['a'], exportTo: ['.'] });
    const snake = encodeProtoJson(VirtualService, { hosts: ['a'], export_to: ['.'] });
    assert.deepEqual(camel, snake);
    assert.deepEqual(toProtoJson(VirtualService, VirtualService.decode(camel)), {
      hosts: ['a'],
      exportTo: ['.'],
    });
  });

  test('when both spellings of one field are given, the JSON name wins and the other is pruned', () => {
    const pruned: string[] = [];
    const bytes = encodeProtoJson(
      VirtualService,
      { export_to: ['x'], exportTo: ['y'] },
      { onPruned: (p) => pruned.push(p) },
    );
    assert.deepEqual(toProtoJson(VirtualService, VirtualService.decode(bytes)), { exportTo: ['y'] });
    assert.deepEqual(pruned, ['export_to']);
  });

  test('writes nothing for fields at their default, as Go does', () => {
    assert.equal(encodeProtoJson(DestinationRule, { host: '', exportTo: [] }).length, 0);
    assert.equal(encodeProtoJson(Port, { number: 0, protocol: '', name: '' }).length, 0);
  });

  test('keeps oneof members and wrapper values even at their default, because they have presence', () => {
    assert.deepEqual(roundTrip(Abort, { httpStatus: 0 }), { httpStatus: 0 });
    assert.deepEqual(roundTrip(HTTPBody, { string: '' }), { string: '' });
    assert.deepEqual(roundTrip(ClientTLS, { insecureSkipVerify: false }), { insecureSkipVerify: false });
    assert.deepEqual(roundTrip(TrafficExtension, { priority: 0 }), { priority: 0 });
  });

  test('rejects two members of one oneof, naming both', () => {
    schemaError(
      () => fromProtoJson(StringMatch, { exact: 'a', prefix: 'b' }, { path: 'spec.uri' }),
      'spec.uri',
      /only one of exact, prefix may be set/,
    );
    // null does not count as set.
    assert.deepEqual(roundTrip(StringMatch, { exact: 'a', prefix: null }), { exact: 'a' });
  });

  test('rejects a scalar where a list is expected', () => {
    schemaError(
      () => fromProtoJson(VirtualService, { hosts: 'one.example.com' }, inSpec),
      'spec.hosts',
      /expected a list, got a string \("one.example.com"\)/,
    );
  });

  test('rejects values of the wrong type instead of coercing them', () => {
    schemaError(
      () => fromProtoJson(VirtualService, { hosts: [80] }, inSpec),
      'spec.hosts[0]',
      /expected a string/,
    );
    schemaError(
      () => fromProtoJson(VirtualService, { hosts: [{ name: 'x' }] }, inSpec),
      'spec.hosts[0]',
      /expected a string, got an object/,
    );
    schemaError(() => fromProtoJson(Port, { number: '80' }, inSpec), 'spec.number', /expected an integer/);
    schemaError(() => fromProtoJson(Port, { number: 80.5 }, inSpec), 'spec.number', /expected an integer/);
    schemaError(() => fromProtoJson(Port, { number: -1 }, inSpec), 'spec.number', /out of range for uint32/);
    schemaError(
      () => fromProtoJson(HTTPRoute, { timeout: 5 }, inSpec),
      'spec.timeout',
      /expected a duration/,
    );
    schemaError(
      () => fromProtoJson(ClientTLS, { insecureSkipVerify: 'true' }, inSpec),
      'spec.insecureSkipVerify',
      /boolean/,
    );
    schemaError(() => fromProtoJson(VirtualService, { http: {} }, inSpec), 'spec.http', /expected a list/);
    schemaError(
      () => fromProtoJson(Gateway, { selector: ['a'] }, inSpec),
      'spec.selector',
      /expected an object/,
    );
  });

  test('reads 64-bit integers from numbers or digit strings and prints them as strings', () => {
    assert.deepEqual(roundTrip(ConsistentHash, { minimumRingSize: 1024 }), { minimumRingSize: '1024' });
    assert.deepEqual(roundTrip(ConsistentHash, { minimumRingSize: '18446744073709551615' }), {
      minimumRingSize: '18446744073709551615',
    });
    schemaError(
      () => fromProtoJson(ConsistentHash, { minimumRingSize: '18446744073709551616' }),
      'minimumRingSize',
      /out of range/,
    );
    schemaError(
      () => fromProtoJson(ConsistentHash, { minimumRingSize: '12abc' }),
      'minimumRingSize',
      /integer/,
    );
  });

  test('reads enums by name or number and prints them by name; unknown names name the field', () => {
    assert.deepEqual(roundTrip(PeerAuthentication, { mtls: { mode: 'STRICT' } }), {
      mtls: { mode: 'STRICT' },
    });
    assert.deepEqual(roundTrip(PeerAuthentication, { mtls: { mode: 2 } }), { mtls: { mode: 'PERMISSIVE' } });
    schemaError(
      () => fromProtoJson(PeerAuthentication, { mtls: { mode: 'UNKNOWN_MODE' } }, inSpec),
      'spec.mtls.mode',
      /unknown value "UNKNOWN_MODE" for Mode; expected one of UNSET, DISABLE, PERMISSIVE, STRICT/,
    );
  });

  test('reads Go durations and prints canonical proto3 durations', () => {
    assert.deepEqual(roundTrip(HTTPRoute, { timeout: '1h30m' }), { timeout: '5400s' });
    assert.deepEqual(roundTrip(HTTPRoute, { timeout: '0.5s' }), { timeout: '0.500s' });
    assert.deepEqual(roundTrip(HTTPRoute, { timeout: '0s' }), { timeout: '0s' });
    schemaError(
      () => fromProtoJson(HTTPRoute, { timeout: 'soon' }, inSpec),
      'spec.timeout',
      /"soon" is not a valid/,
    );
  });

  test('carries arbitrary JSON through Struct, including null, nesting and empty containers', () => {
    const value = { a: null, b: [1, 'x', true, { c: {} }, []], d: 0, e: '', f: false, g: { h: [null] } };
    assert.deepEqual(roundTrip(Patch, { operation: 'MERGE', value }), { operation: 'MERGE', value });
  });

  test('keeps data keys such as __proto__ as data in Struct and maps', () => {
    const value = JSON.parse('{"__proto__": {"polluted": true}}') as unknown;
    const json = roundTrip(Patch, { value }) as { value: Record<string, unknown> };
    assert.deepEqual(Object.keys(json.value), ['__proto__']);
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });

  test('reads wrappers from plain JSON scalars', () => {
    assert.deepEqual(roundTrip(HTTPRoute, { mirrorPercent: 50 }), { mirrorPercent: 50 });
    schemaError(() => fromProtoJson(HTTPRoute, { mirrorPercent: { value: 50 } }), 'mirrorPercent', /integer/);
  });

  test('reads doubles as numbers and writes them back unchanged', () => {
    assert.deepEqual(roundTrip(Percent, { value: 0.1 }), { value: 0.1 });
    assert.deepEqual(roundTrip(Percent, { value: 'Infinity' }), { value: 'Infinity' });
  });

  test('reads bytes from base64 (standard or URL-safe) and rejects anything else', () => {
    assert.deepEqual(roundTrip(HTTPBody, { bytes: 'aGVsbG8=' }), { bytes: 'aGVsbG8=' });
    assert.deepEqual(roundTrip(HTTPBody, { bytes: '-_8' }), { bytes: '+/8=' });
    schemaError(() => fromProtoJson(HTTPBody, { bytes: 'not base64!' }), 'bytes', /base64/);
  });

  test('reads maps with non-string keys and sorts entries so equal maps give equal bytes', () => {
    assert.deepEqual(roundTrip(PeerAuthentication, { portLevelMtls: { '8080': { mode: 'DISABLE' } } }), {
      portLevelMtls: { '8080': { mode: 'DISABLE' } },
    });
    schemaError(
      () => fromProtoJson(PeerAuthentication, { portLevelMtls: { http: { mode: 'DISABLE' } } }, inSpec),
      'spec.portLevelMtls.http',
      /not a valid uint32/,
    );
    assert.deepEqual(
      encodeProtoJson(Gateway, { selector: { b: '2', a: '1' } }),
      encodeProtoJson(Gateway, { selector: { a: '1', b: '2' } }),
    );
  });

  test('refuses a null element in a list of messages, naming it, as Istio does', () => {
    const RequestAuthentication = messageType('istio.security.v1beta1.RequestAuthentication');
    schemaError(
      () => encodeProtoJson(RequestAuthentication, { jwtRules: [{ issuer: 'a' }, null] }),
      'jwtRules[1]',
      /expected an object \(JWTRule\), got null/,
    );
    schemaError(
      () => encodeProtoJson(VirtualService, { http: [null] }, { path: 'spec' }),
      'spec.http[0]',
      /got null/,
    );
    // A list of google.protobuf.Value still carries the JSON null.
    assert.deepEqual(roundTrip(messageType('google.protobuf.ListValue'), [null, 1]), [null, 1]);
  });

  test('treats null as "not set" for ordinary fields', () => {
    assert.equal(encodeProtoJson(HTTPRoute, { timeout: null, match: null, name: null }).length, 0);
  });

  test('prunes unknown fields with their full path instead of failing', () => {
    const pruned: string[] = [];
    const bytes = encodeProtoJson(
      VirtualService,
      { hosts: ['a'], http: [{ websocketUpgrade: true, timeout: '1s' }], somethingNew: 1 },
      { path: 'spec', onPruned: (p) => pruned.push(p) },
    );
    assert.deepEqual(pruned.sort(), ['spec.http[0].websocketUpgrade', 'spec.somethingNew']);
    assert.deepEqual(toProtoJson(VirtualService, VirtualService.decode(bytes)), {
      hosts: ['a'],
      http: [{ timeout: '1s' }],
    });
  });

  test('collects every error of a message when asked to, instead of stopping at the first', () => {
    const errors: MeshmuxError[] = [];
    fromProtoJson(
      VirtualService,
      { hosts: 'a', gateways: [1], http: [{ timeout: 'x' }] },
      { path: 'spec', errors },
    );
    assert.deepEqual(
      errors.map((e) => e.location.field),
      ['spec.hosts', 'spec.gateways[0]', 'spec.http[0].timeout'],
    );
  });

  test('reads an Any by its @type, with well-known payloads under "value", and prints it back', () => {
    const gatewayAny = {
      '@type': `type.googleapis.com/${NET}.Gateway`,
      servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
    };
    assert.deepEqual(roundTrip(McpResource, { body: gatewayAny }), { body: gatewayAny });
    const durationAny = { '@type': 'type.googleapis.com/google.protobuf.Duration', value: '1.500s' };
    assert.deepEqual(roundTrip(McpResource, { body: durationAny }), { body: durationAny });
    schemaError(
      () => fromProtoJson(McpResource, { body: { '@type': 'type.googleapis.com/no.such.Type' } }),
      'body["@type"]',
      /unknown message type/,
    );
  });

  test('reads RFC 3339 timestamps in any zone and prints them in UTC with 0, 3, 6 or 9 digits', () => {
    assert.deepEqual(roundTrip(McpResource, { metadata: { createTime: '2024-05-01T14:00:00.5+02:00' } }), {
      metadata: { createTime: '2024-05-01T12:00:00.500Z' },
    });
    assert.deepEqual(roundTrip(McpResource, { metadata: { createTime: '0001-01-01T00:00:00Z' } }), {
      metadata: { createTime: '0001-01-01T00:00:00Z' },
    });
    schemaError(
      () => fromProtoJson(McpResource, { metadata: { createTime: '2024-02-30T00:00:00Z' } }),
      'metadata.createTime',
      /day out of range/,
    );
  });
});

describe('toProtoJson', () => {
  test('prints what Go’s protojson prints for a decoded VirtualService', () => {
    const json = {
      hosts: ['reviews'],
      http: [
        {
          match: [{ headers: { end_user: { exact: 'jason' } } }],
          route: [{ destination: { host: 'reviews', subset: 'v2', port: { number: 9080 } }, weight: 100 }],
          timeout: '10s',
          retries: { attempts: 3, perTryTimeout: '2s', retryRemoteLocalities: false },
        },
      ],
    };
    assert.deepEqual(roundTrip(VirtualService, json), json);
  });

  test('accepts messages built by fromProtoJson as well as decoded ones', () => {
    const built = fromProtoJson(ConsistentHash, { minimumRingSize: '5', httpHeaderName: 'x-user' });
    assert.deepEqual(toProtoJson(ConsistentHash, built), { minimumRingSize: '5', httpHeaderName: 'x-user' });
  });
});
