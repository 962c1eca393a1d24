/**
 * Arbitrary protobufjs messages of any type, for property tests of code that reads bodies: every
 * field set or not, unknown enum numbers, full-range 64-bit values, NaN, lone surrogates, and
 * `Any` with known, unknown or no type URL.
 */
import fc from 'fast-check';
import protobuf from 'protobufjs';

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
  if (resolved instanceof protobuf.Type)
    return depth > 0 ? arbitraryMessage(resolved, depth - 1) : fc.constant({});
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
export function arbitraryMessage(type: protobuf.Type, depth: number): fc.Arbitrary<Record<string, unknown>> {
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
