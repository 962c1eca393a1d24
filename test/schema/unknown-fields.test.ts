import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import protobuf from 'protobufjs';
import { MeshmuxError } from '../../src/core/errors.js';
import { encodeProtoJson, toProtoJson } from '../../src/schema/proto-json.js';
import { allProtos, messageType } from '../../src/schema/proto-root.js';
import { findUnknownFields } from '../../src/schema/unknown-fields.js';

const GATEWAY = 'istio.networking.v1alpha3.Gateway';
const gatewayJson = {
  servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
  selector: { istio: 'ingressgateway' },
};

interface JsonNamespace {
  nested?: Record<string, JsonNamespace>;
  fields?: Record<string, { id: number; type: string }>;
}

/** A copy of our schema with one field renumbered or retyped: what a wrong proto/ would look like. */
function mutatedSchema(
  message: string,
  field: string,
  change: { id?: number; type?: string },
): protobuf.Root {
  const json = allProtos().toJSON() as JsonNamespace;
  let node: JsonNamespace | undefined = json;
  for (const part of message.split('.')) node = node?.nested?.[part];
  const target = node?.fields?.[field];
  assert.ok(target, `${message}.${field} exists`);
  Object.assign(target, change);
  const root = protobuf.Root.fromJSON(json);
  root.resolveAll();
  return root;
}

describe('findUnknownFields', () => {
  test('finds nothing in a body written with the same schema', () => {
    const type = messageType(GATEWAY);
    assert.deepEqual(findUnknownFields(type, encodeProtoJson(type, gatewayJson)), []);
  });

  test('finds a field whose number the reading schema does not declare, with its path', () => {
    const body = encodeProtoJson(messageType(GATEWAY), gatewayJson);
    const wrong = mutatedSchema('istio.networking.v1alpha3.Port', 'number', { id: 9 });
    const wrongGateway = wrong.lookupType(GATEWAY);
    assert.deepEqual(findUnknownFields(wrongGateway, body), ['servers[0].port.#1']);
    // protobufjs alone would decode it without complaint, only losing the port number.
    assert.deepEqual(toProtoJson(wrongGateway, wrongGateway.decode(body)), {
      servers: [{ port: { name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
      selector: { istio: 'ingressgateway' },
    });
  });

  test('finds a field read with another wire type than it was written with', () => {
    const body = encodeProtoJson(messageType(GATEWAY), gatewayJson);
    const wrong = mutatedSchema('istio.networking.v1alpha3.Port', 'name', { type: 'uint32' });
    assert.deepEqual(findUnknownFields(wrong.lookupType(GATEWAY), body), [
      'servers[0].port.name (wire type 2, expected 0)',
    ]);
  });

  test('looks inside map values and Any payloads', () => {
    const pa = messageType('istio.security.v1beta1.PeerAuthentication');
    const body = encodeProtoJson(pa, { portLevelMtls: { '8080': { mode: 'STRICT' } } });
    const wrong = mutatedSchema('istio.security.v1beta1.PeerAuthentication.MutualTLS', 'mode', { id: 2 });
    assert.deepEqual(findUnknownFields(wrong.lookupType('istio.security.v1beta1.PeerAuthentication'), body), [
      'portLevelMtls["8080"].#1',
    ]);
    const resource = messageType('istio.mcp.v1alpha1.Resource');
    const wrapped = encodeProtoJson(resource, {
      body: { '@type': `type.googleapis.com/${GATEWAY}`, ...gatewayJson },
    });
    assert.deepEqual(findUnknownFields(resource, wrapped), []);
  });

  test('refuses bytes that are not protobuf with a DECODE error', () => {
    assert.throws(
      () => findUnknownFields(messageType(GATEWAY), Uint8Array.from([0x0a, 0x7f, 0x01])),
      (err: unknown) => err instanceof MeshmuxError && err.code === 'DECODE',
    );
  });
});
