import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type protobuf from 'protobufjs';
import type { MeshmuxError } from '../../src/core/errors.js';
import { decodeBodyParts } from '../../src/schema/body-parts.js';
import { KINDS } from '../../src/schema/kinds.js';
import {
  checkDecodedAsJson,
  fromProtoJson,
  jsonRoundTripCanFail,
  toProtoJson,
} from '../../src/schema/proto-json.js';
import { messageType } from '../../src/schema/proto-root.js';
import { arbitraryMessage } from '../support/arbitrary-messages.js';

/** What the JSON checks say of a message of `type` as it arrives in bytes. */
function jsonChecks(type: protobuf.Type, fields: Record<string, unknown>): MeshmuxError[] {
  const decoded = type.decode(type.encode(type.fromObject(fields)).finish());
  const errors: MeshmuxError[] = [];
  fromProtoJson(type, toProtoJson(type, decoded), { path: 'spec', errors });
  return errors;
}

describe('the JSON checks of upstream objects', () => {
  it('are known not to matter for ServiceEntry and WorkloadEntry, and to matter for VirtualService', () => {
    const canFail = (kind: string): boolean =>
      jsonRoundTripCanFail(messageType(KINDS.get(`networking.istio.io/${kind}`)?.bodyType ?? ''));
    assert.equal(canFail('ServiceEntry'), false);
    assert.equal(canFail('WorkloadEntry'), false);
    assert.equal(canFail('VirtualService'), true);
    assert.equal(canFail('DestinationRule'), true);
  });

  for (const kind of KINDS.kinds) {
    const type = messageType(kind.bodyType);
    if (jsonRoundTripCanFail(type)) continue;
    it(`never refuse a ${kind.kind} decoded from bytes, whatever it holds (so they are skipped)`, () => {
      fc.assert(
        fc.property(arbitraryMessage(type, 3), (fields) => {
          assert.deepEqual(
            jsonChecks(type, fields).map((e) => e.message),
            [],
          );
        }),
        { numRuns: 300 },
      );
    });
  }

  it('say the same on a decoded message as through its JSON form, for every kind, errors and failures alike', () => {
    const outcome = (run: (errors: MeshmuxError[]) => void): string[] => {
      const errors: MeshmuxError[] = [];
      try {
        run(errors);
      } catch (err) {
        return [`thrown: ${(err as Error).message}`];
      }
      return errors.map((e) => `${e.location.field ?? ''}: ${e.message}`);
    };
    let refused = 0;
    let split = 0;
    for (const kind of KINDS.kinds) {
      const type = messageType(kind.bodyType);
      fc.assert(
        fc.property(arbitraryMessage(type, 3), (fields) => {
          const decoded = type.decode(type.encode(type.fromObject(fields)).finish());
          const json = outcome((errors) =>
            fromProtoJson(type, toProtoJson(type, decoded), { path: 'spec', errors }),
          );
          assert.deepEqual(
            outcome((errors) => checkDecodedAsJson(type, decoded, { path: 'spec', errors })),
            json,
            kind.kind,
          );
          // The same with its top-level lists of messages held apart, as a large body is read.
          const parts = decodeBodyParts(type, type.encode(decoded).finish(), 0);
          if (parts !== undefined) {
            split++;
            assert.deepEqual(
              outcome((errors) =>
                checkDecodedAsJson(type, parts.message, { path: 'spec', errors }, parts.lists),
              ),
              json,
              `${kind.kind} in parts`,
            );
          }
          if (json.length > 0) refused++;
        }),
        { numRuns: 150, seed: 11 },
      );
    }
    // The comparison is not vacuous: the generator reaches what the checks refuse.
    assert.ok(refused > 300, `only ${refused} generated messages were refused`);
    assert.ok(split > 1000, `only ${split} generated messages had lists to hold apart`);
  });

  it('do refuse some VirtualServices decoded from bytes: the generator reaches what they check', () => {
    const type = messageType('istio.networking.v1alpha3.VirtualService');
    const run = fc.check(
      fc.property(arbitraryMessage(type, 4), (fields) => jsonChecks(type, fields).length === 0),
      { numRuns: 2000, seed: 7 },
    );
    assert.equal(run.failed, true);
  });
});
