import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeDeltaDiscoveryRequest,
  decodeDiscoveryRequest,
  deltaDiscoveryRequestMetadataBytes,
  discoveryRequestMetadataBytes,
} from '../../src/downstream/discovery-request.js';
import { maxEncodedMetadataBytes } from '../../src/downstream/stream-limits.js';
import { messageType } from '../../src/schema/proto-root.js';

const NODE = {
  id: 'sidecar~10.0.0.7~istiod-1.istio-system~istio-system.svc.cluster.local',
  cluster: 'Kubernetes',
  metadata: {
    fields: {
      GENERATOR: { stringValue: 'api' },
      LABELS: { structValue: { fields: { app: { stringValue: 'istiod' } } } },
    },
  },
};

function encoded(typeName: string, fields: Record<string, unknown>): Uint8Array {
  const type = messageType(typeName);
  return type.encode(type.fromObject(fields)).finish();
}

const ACK = encoded('envoy.service.discovery.v3.DiscoveryRequest', {
  version_info: 'v1',
  node: NODE,
  type_url: 'networking.istio.io/v1/VirtualService',
  response_nonce: 'n-1',
});

describe('decoding ADS requests', () => {
  it("reads a request's node only when asked, and the rest alike either way", () => {
    const first = decodeDiscoveryRequest(ACK, true);
    assert.deepEqual(first.node, {
      id: NODE.id,
      cluster: 'Kubernetes',
      metadata: { GENERATOR: 'api', LABELS: { app: 'istiod' } },
    });
    const later = decodeDiscoveryRequest(ACK, false);
    assert.equal(later.node, undefined);
    const { node: _, ...rest } = first;
    assert.deepEqual(later, rest);
    assert.equal(later.versionInfo, 'v1');
    assert.equal(later.responseNonce, 'n-1');
  });

  it('reads a request with resource names as the same request without them, wherever the names lie', () => {
    const names = (n: number): Buffer =>
      Buffer.concat(
        Array.from({ length: n }, (_, i) =>
          Buffer.from(encoded('envoy.service.discovery.v3.DiscoveryRequest', { resource_names: [`r${i}`] })),
        ),
      );
    const mixed = Buffer.concat([names(3), Buffer.from(ACK), names(2)]);
    assert.deepEqual(decodeDiscoveryRequest(mixed, true), decodeDiscoveryRequest(ACK, true));
    assert.ok(!('resourceNames' in decodeDiscoveryRequest(mixed, true)));
    const nack = encoded('envoy.service.discovery.v3.DiscoveryRequest', {
      resource_names: ['a', 'b'],
      type_url: 'networking.istio.io/v1/VirtualService',
      response_nonce: 'n-3',
      error_detail: { code: 3, message: 'bad' },
    });
    assert.deepEqual(decodeDiscoveryRequest(nack, false), {
      typeUrl: 'networking.istio.io/v1/VirtualService',
      responseNonce: 'n-3',
      errorDetail: { code: 3, message: 'bad' },
      versionInfo: '',
    });
  });

  it('refuses a request whose node is malformed, node asked for or not', () => {
    // The node (field 2) claims more bytes than it holds; the type URL follows it in the bytes.
    const nodeBytes = encoded('envoy.config.core.v3.Node', NODE);
    const broken = Buffer.concat([Buffer.from([0x12, nodeBytes.length + 40]), nodeBytes]);
    for (const withNode of [true, false])
      assert.throws(
        () => decodeDiscoveryRequest(broken, withNode),
        /index out of range|invalid/i,
        `${withNode}`,
      );
  });

  it("skips a later request's node unread, whatever it holds", () => {
    // A node whose metadata (field 3) holds bytes that are no Struct: a field of wire type 7.
    const node = Buffer.from([0x0a, 0x01, 0x6e, 0x1a, 0x01, 0x17]);
    const bytes = Buffer.concat([Buffer.from(ACK), Buffer.from([0x12, node.length]), node]);
    assert.throws(() => decodeDiscoveryRequest(bytes, true), /invalid|illegal|index/i);
    assert.deepEqual(decodeDiscoveryRequest(bytes, false), decodeDiscoveryRequest(ACK, false));
  });

  it("measures a request's node metadata as encoded, every node field of it, without decoding it", () => {
    const metadata = encoded('google.protobuf.Struct', NODE.metadata).byteLength;
    assert.equal(discoveryRequestMetadataBytes(ACK), metadata);
    assert.equal(discoveryRequestMetadataBytes(Buffer.concat([ACK, ACK])), 2 * metadata);
    const bare = encoded('envoy.service.discovery.v3.DiscoveryRequest', { type_url: 't', node: { id: 'n' } });
    assert.equal(discoveryRequestMetadataBytes(bare), 0);
    const delta = encoded('envoy.service.discovery.v3.DeltaDiscoveryRequest', { node: NODE, type_url: 't' });
    assert.equal(deltaDiscoveryRequestMetadataBytes(delta), metadata);
    const nodeBytes = encoded('envoy.config.core.v3.Node', NODE);
    const broken = Buffer.concat([Buffer.from([0x12, nodeBytes.length + 40]), nodeBytes]);
    assert.throws(() => discoveryRequestMetadataBytes(broken), /index out of range/);
  });

  it('bounds encoded metadata above what any metadata within maxMetadataBytes as JSON takes', () => {
    // Numbers in a list take the most bytes encoded for their JSON: 11 for `0,`.
    const max = 4_096;
    const values = Array.from({ length: Math.floor((max - 12) / 2) }, () => ({ numberValue: 0 }));
    const struct = { fields: { n: { listValue: { values } } } };
    const json = JSON.stringify({ n: values.map(() => 0) });
    assert.ok(Buffer.byteLength(json) <= max, `${json.length} bytes as JSON`);
    const bytes = messageType('google.protobuf.Struct');
    const size = bytes.encode(bytes.fromObject(struct)).finish().byteLength;
    assert.ok(size > 5 * Buffer.byteLength(json), `${size} bytes encoded`);
    assert.ok(size <= maxEncodedMetadataBytes(max), `${size} bytes encoded`);
  });

  it('does the same for a delta request', () => {
    const bytes = encoded('envoy.service.discovery.v3.DeltaDiscoveryRequest', {
      node: NODE,
      type_url: 'networking.istio.io/v1/VirtualService',
      response_nonce: 'n-2',
      resource_names_subscribe: ['*'],
    });
    assert.equal(decodeDeltaDiscoveryRequest(bytes, true).node?.id, NODE.id);
    const later = decodeDeltaDiscoveryRequest(bytes, false);
    assert.equal(later.node, undefined);
    assert.deepEqual(later.subscribe, ['*']);
    assert.equal(later.responseNonce, 'n-2');
  });
});
