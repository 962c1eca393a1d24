import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { messageType } from '../../src/schema/proto-root.js';
import { scanDiscoveryResponse } from '../../src/upstream/xds/discovery-response.js';

const RESPONSE = messageType('envoy.service.discovery.v3.DiscoveryResponse');
const MCP = 'type.googleapis.com/istio.mcp.v1alpha1.Resource';

function encoded(fields: Record<string, unknown>): Buffer {
  return Buffer.from(RESPONSE.encode(RESPONSE.fromObject(fields)).finish());
}

describe('scanDiscoveryResponse', () => {
  it('reads what the schema decoder reads, with values as views of the message', () => {
    const bytes = encoded({
      version_info: 'v7',
      resources: [
        { type_url: MCP, value: Buffer.from([1, 2, 3]) },
        { type_url: 'type.googleapis.com/other', value: Buffer.from([]) },
      ],
      canary: true,
      type_url: 'networking.istio.io/v1/ServiceEntry',
      nonce: 'n-1',
      control_plane: { identifier: 'istiod-1' },
    });
    const scanned = scanDiscoveryResponse(bytes);
    assert.equal(scanned.versionInfo, 'v7');
    assert.equal(scanned.typeUrl, 'networking.istio.io/v1/ServiceEntry');
    assert.equal(scanned.nonce, 'n-1');
    assert.deepEqual(
      scanned.resources.map((r) => [r.typeUrl, [...r.value]]),
      [
        [MCP, [1, 2, 3]],
        ['type.googleapis.com/other', []],
      ],
    );
    const first = scanned.resources[0]?.value;
    assert.equal(first?.buffer, bytes.buffer, 'no copy of the value');
  });

  it('takes the last occurrence of a string field, as proto3 does', () => {
    const bytes = Buffer.concat([encoded({ nonce: 'a' }), encoded({ nonce: 'b', version_info: 'x' })]);
    const scanned = scanDiscoveryResponse(bytes);
    assert.equal(scanned.nonce, 'b');
    assert.equal(scanned.versionInfo, 'x');
  });

  it('throws on truncated messages and on wrong wire types', () => {
    const bytes = encoded({ version_info: 'v1', resources: [{ type_url: MCP, value: Buffer.alloc(40) }] });
    assert.throws(() => scanDiscoveryResponse(bytes.subarray(0, bytes.length - 5)));
    // Field 2 (resources) as a varint.
    assert.throws(() => scanDiscoveryResponse(Buffer.from([0x10, 0x01])), /field 2 has wire type 0/);
    // Field 0 is never valid.
    assert.throws(() => scanDiscoveryResponse(Buffer.from([0x02, 0x00])), /field number 0/);
  });
});
