import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import protobuf from 'protobufjs';
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

const INT32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
const UINT32 = fc.integer({ min: 0, max: 2 ** 32 - 1 });

/** Any value of a scalar field, in the form `Type.fromObject` takes. */
function scalar(type: string): fc.Arbitrary<unknown> {
  switch (type) {
    case 'string':
      return fc.string({ unit: 'binary', maxLength: 6 });
    case 'bool':
      return fc.boolean();
    case 'bytes':
      return fc.uint8Array({ maxLength: 6 });
    case 'double':
      return fc.double();
    case 'float':
      return fc.float();
    case 'uint32':
    case 'fixed32':
      return UINT32;
    case 'int64':
    case 'sint64':
    case 'sfixed64':
      return fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String);
    case 'uint64':
    case 'fixed64':
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String);
    default:
      return INT32;
  }
}

/** One value of `field` (an element, for lists and maps): enums known or not, messages to `depth`. */
function element(field: protobuf.Field, depth: number): fc.Arbitrary<unknown> {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return depth > 0 ? message(resolved, depth - 1) : fc.constant({});
  if (resolved instanceof protobuf.Enum)
    return fc.oneof(fc.constantFrom(...Object.values(resolved.values)), INT32);
  return scalar(field.type);
}

/** Type URLs an `Any` may carry: known messages (well-known or not), and unknown ones. */
const ANY_URLS = [
  'type.googleapis.com/google.protobuf.Duration',
  'type.googleapis.com/google.protobuf.Struct',
  'type.googleapis.com/google.protobuf.StringValue',
  'type.googleapis.com/istio.networking.v1alpha3.Percent',
  'type.googleapis.com/no.such.Type',
  '',
];

/** Any message of `type`: each field set or not, lists and maps of up to three entries. */
function message(type: protobuf.Type, depth: number): fc.Arbitrary<Record<string, unknown>> {
  if (type.fullName === '.google.protobuf.Any') {
    return fc.record(
      { type_url: fc.constantFrom(...ANY_URLS), value: fc.uint8Array({ maxLength: 8 }) },
      { requiredKeys: [] },
    );
  }
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const field of type.fieldsArray) {
    const value = element(field, depth);
    if (field instanceof protobuf.MapField) {
      const key = field.keyType === 'string' ? fc.string({ maxLength: 4 }) : INT32.map(String);
      model[field.name] = fc.dictionary(key, value, { maxKeys: 3 });
    } else if (field.repeated) model[field.name] = fc.array(value, { maxLength: 3 });
    else model[field.name] = value;
  }
  return fc.record(model, { requiredKeys: [] });
}

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
        fc.property(message(type, 3), (fields) => {
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
        fc.property(message(type, 3), (fields) => {
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
      fc.property(message(type, 4), (fields) => jsonChecks(type, fields).length === 0),
      { numRuns: 2000, seed: 7 },
    );
    assert.equal(run.failed, true);
  });
});
