import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { messageType } from '../../src/schema/proto-root.js';
import { readResourcesMessage } from '../../src/upstream/mcp/resources-message.js';

const RESOURCES = messageType('istio.mcp.v1alpha1.Resources');
const RESOURCE = messageType('istio.mcp.v1alpha1.Resource');

describe('a Resources message read at its top level', () => {
  it('reads what protobufjs decodes, and each entry as the bytes of its Resource', () => {
    const resourceArb = fc.record({
      metadata: fc.record({ name: fc.string({ maxLength: 12 }), version: fc.string({ maxLength: 4 }) }),
    });
    fc.assert(
      fc.property(
        fc.record({
          system_version_info: fc.string({ maxLength: 10 }),
          collection: fc.string({ maxLength: 30 }),
          resources: fc.array(resourceArb, { maxLength: 6 }),
          removed_resources: fc.array(fc.string({ maxLength: 10 }), { maxLength: 4 }),
          nonce: fc.string({ maxLength: 6 }),
          incremental: fc.boolean(),
        }),
        (fields) => {
          const bytes = RESOURCES.encode(RESOURCES.fromObject(fields)).finish();
          const read = readResourcesMessage(bytes);
          assert.equal(read.systemVersionInfo, fields.system_version_info);
          assert.equal(read.collection, fields.collection);
          assert.deepEqual(read.removedResources, fields.removed_resources);
          assert.equal(read.nonce, fields.nonce);
          assert.equal(read.incremental, fields.incremental);
          const entries: Uint8Array[] = [];
          for (let i = 0; i < read.resources.length; i += 2) {
            entries.push(bytes.subarray(read.resources[i], read.resources[i + 1]));
          }
          assert.deepEqual(
            entries.map((e) => Buffer.from(e).toString('hex')),
            fields.resources.map((r) =>
              Buffer.from(RESOURCE.encode(RESOURCE.fromObject(r)).finish()).toString('hex'),
            ),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('takes the last of a field sent twice, and skips fields it does not define', () => {
    const w = protobuf.Writer.create();
    w.uint32((2 << 3) | 2).string('first');
    w.uint32((5 << 3) | 2).string('n1');
    w.uint32((99 << 3) | 0).uint32(7);
    w.uint32((100 << 3) | 2).string('extra');
    w.uint32((2 << 3) | 2).string('second');
    w.uint32((6 << 3) | 0).uint64(2 ** 40);
    const read = readResourcesMessage(w.finish());
    assert.equal(read.collection, 'second');
    assert.equal(read.nonce, 'n1');
    assert.equal(read.incremental, true, 'any bit set is true');
    assert.deepEqual(read.resources, []);
  });

  it('refuses a message whose top level is not well formed, naming what is wrong', () => {
    assert.throws(() => readResourcesMessage(Uint8Array.of(0x12, 0x7f, 0x01)), /runs past the end/);
    assert.throws(() => readResourcesMessage(Uint8Array.of(0x10, 0x01)), /field 2 has wire type 0/);
    assert.throws(() => readResourcesMessage(Uint8Array.of(0x32, 0x00)), /field 6 has wire type 2/);
    assert.throws(() => readResourcesMessage(Uint8Array.of(0x00)), /field number 0/);
  });
});
