import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { messageType } from '../../src/schema/proto-root.js';
import { isUtf8Range, StrictReader } from '../../src/wire/strict-reader.js';

const SERVICE_ENTRY = messageType('istio.networking.v1alpha3.ServiceEntry');

/** A ServiceEntry body whose first host is the given bytes, as a peer may send it. */
function hostBytes(bytes: readonly number[]): Uint8Array {
  return Uint8Array.from([0x0a, bytes.length, ...bytes, 0x0a, 0x01, 0x61]);
}

describe('StrictReader', () => {
  it('reads every message as protobufjs does when its strings are UTF-8 (U+FFFD included)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary', maxLength: 12 }), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ unit: 'binary', maxLength: 5 }), {
          maxKeys: 3,
        }),
        (hosts, labels) => {
          const body = SERVICE_ENTRY.encode(
            SERVICE_ENTRY.fromObject({ hosts: [...hosts, '\ufffd'], endpoints: [{ address: 'a', labels }] }),
          ).finish();
          const bytes = new Uint8Array(body);
          assert.deepEqual(
            SERVICE_ENTRY.toObject(SERVICE_ENTRY.decode(new StrictReader(bytes))),
            SERVICE_ENTRY.toObject(SERVICE_ENTRY.decode(protobuf.Reader.create(bytes))),
          );
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuses a string that is not UTF-8, naming where it starts', () => {
    for (const bad of [[0xff], [0x61, 0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
      assert.throws(
        () => SERVICE_ENTRY.decode(new StrictReader(hostBytes(bad))),
        /a string field at byte 2 is not valid UTF-8/,
        JSON.stringify(bad),
      );
    }
    assert.deepEqual(
      SERVICE_ENTRY.decode(new StrictReader(hostBytes([0x63, 0x61, 0x66, 0xc3, 0xa9]))).toJSON(),
      {
        hosts: ['café', 'a'],
      },
    );
  });

  it('refuses a string running past the end instead of cutting it short', () => {
    assert.throws(
      () => SERVICE_ENTRY.decode(new StrictReader(Uint8Array.from([0x0a, 0x05, 0x61, 0x62]))),
      /index out of range/,
    );
  });
});

describe('isUtf8Range', () => {
  it("says what Node's isUtf8 says of the range, for any bytes and any range of them", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 40 }),
          fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => new Uint8Array(Buffer.from(s))),
        ),
        fc.nat(),
        fc.nat(),
        (bytes, a, b) => {
          const start = a % (bytes.length + 1);
          const end = start + (b % (bytes.length - start + 1));
          assert.equal(isUtf8Range(bytes, start, end), isUtf8(bytes.subarray(start, end)));
        },
      ),
      { numRuns: 2000 },
    );
  });
});
