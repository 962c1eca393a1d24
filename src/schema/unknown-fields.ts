/**
 * Finds what protobufjs would silently skip when decoding: fields the schema does not declare, and
 * declared fields arriving with another wire type. A body that decodes "fine" but carries either
 * was written with a different schema (a wrong field number, a changed type), so tests and
 * debug tools use this to tell a faithful schema from a merely compatible one.
 */
import protobuf from 'protobufjs';
import { MeshmuxError } from '../core/errors.js';
import { childPath, indexPath } from './field-path.js';
import { jsonNameOf } from './proto-json.js';
import { fullNameOf, protoRoot } from './proto-root.js';
import { WIRE_FIXED32, WIRE_FIXED64, WIRE_LENGTH_DELIMITED, WIRE_VARINT } from '../wire/wire-types.js';

const SCALAR_WIRE: Readonly<Record<string, number>> = {
  double: WIRE_FIXED64,
  fixed64: WIRE_FIXED64,
  sfixed64: WIRE_FIXED64,
  float: WIRE_FIXED32,
  fixed32: WIRE_FIXED32,
  sfixed32: WIRE_FIXED32,
  int32: WIRE_VARINT,
  int64: WIRE_VARINT,
  uint32: WIRE_VARINT,
  uint64: WIRE_VARINT,
  sint32: WIRE_VARINT,
  sint64: WIRE_VARINT,
  bool: WIRE_VARINT,
  string: WIRE_LENGTH_DELIMITED,
  bytes: WIRE_LENGTH_DELIMITED,
};

function wireTypeOf(typeName: string, resolved: protobuf.ReflectionObject | null): number {
  if (resolved instanceof protobuf.Type) return WIRE_LENGTH_DELIMITED;
  if (resolved instanceof protobuf.Enum) return WIRE_VARINT;
  return SCALAR_WIRE[typeName] ?? WIRE_LENGTH_DELIMITED;
}

function resolveAnyType(typeUrl: string): protobuf.Type | undefined {
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  try {
    const t = protoRoot.lookup(name);
    return t instanceof protobuf.Type ? t : undefined;
  } catch {
    return undefined;
  }
}

class Scanner {
  readonly found: string[] = [];

  message(type: protobuf.Type, bytes: Uint8Array, path: string): void {
    const reader = protobuf.Reader.create(bytes);
    const counts = new Map<number, number>();
    let anyUrl: string | undefined;
    let anyValue: Uint8Array | undefined;
    while (reader.pos < reader.len) {
      const tag = reader.uint32();
      const id = tag >>> 3;
      const wire = tag & 7;
      const field = type.fieldsById[id];
      if (field === undefined) {
        this.found.push(`${path === '' ? '' : `${path}.`}#${id}`);
        reader.skipType(wire);
        continue;
      }
      const name = childPath(path, jsonNameOf(field));
      const seen = counts.get(id) ?? 0;
      counts.set(id, seen + 1);
      const expected = field.map ? WIRE_LENGTH_DELIMITED : wireTypeOf(field.type, field.resolvedType);
      const packed =
        field.repeated && !field.map && wire === WIRE_LENGTH_DELIMITED && expected !== WIRE_LENGTH_DELIMITED;
      if (wire !== expected && !packed) {
        this.found.push(`${name} (wire type ${wire}, expected ${expected})`);
        reader.skipType(wire);
        continue;
      }
      if (field instanceof protobuf.MapField) {
        this.mapEntry(field, reader.bytes(), name);
      } else if (field.resolvedType instanceof protobuf.Type) {
        const sub = reader.bytes();
        this.message(field.resolvedType, sub, field.repeated ? indexPath(name, seen) : name);
      } else if (fullNameOf(type) === '.google.protobuf.Any' && id === 1) {
        anyUrl = reader.string();
      } else if (fullNameOf(type) === '.google.protobuf.Any' && id === 2) {
        anyValue = reader.bytes();
      } else {
        reader.skipType(wire);
      }
    }
    if (anyUrl !== undefined && anyValue !== undefined) {
      const inner = resolveAnyType(anyUrl);
      if (inner === undefined) this.found.push(`${childPath(path, 'value')} (unknown type ${anyUrl})`);
      else this.message(inner, anyValue, path);
    }
  }

  private mapEntry(field: protobuf.MapField, bytes: Uint8Array, path: string): void {
    const reader = protobuf.Reader.create(bytes);
    const keyWire = SCALAR_WIRE[field.keyType] ?? WIRE_LENGTH_DELIMITED;
    const valueWire = wireTypeOf(field.type, field.resolvedType);
    let key = '?';
    let value: Uint8Array | undefined;
    while (reader.pos < reader.len) {
      const tag = reader.uint32();
      const id = tag >>> 3;
      const wire = tag & 7;
      if (id === 1 && wire === keyWire) {
        if (field.keyType === 'string') key = reader.string();
        else if (wire === WIRE_VARINT && !field.keyType.endsWith('64')) key = String(reader.uint32());
        else reader.skipType(wire); // only names the path; '?' will do
      } else if (id === 2 && wire === valueWire) {
        if (field.resolvedType instanceof protobuf.Type) value = reader.bytes();
        else reader.skipType(wire);
      } else {
        this.found.push(`${path}#entry.${id} (wire type ${wire})`);
        reader.skipType(wire);
      }
    }
    if (value !== undefined && field.resolvedType instanceof protobuf.Type) {
      this.message(field.resolvedType, value, childPath(path, key));
    }
  }
}

/**
 * Paths of everything in `bytes` that `type` does not account for: undeclared field numbers as
 * `path.#N`, declared fields with a foreign wire type as `path (wire type W, expected E)`. Nested
 * messages, map values and `Any` payloads (when their type is in `protoRoot`) are scanned too.
 * Empty when the bytes are fully described by the schema. Throws a `DECODE` MeshmuxError for bytes
 * that are not protobuf at all.
 */
export function findUnknownFields(type: protobuf.Type, bytes: Uint8Array): string[] {
  const scanner = new Scanner();
  try {
    scanner.message(type, bytes, '');
  } catch (err) {
    throw new MeshmuxError(
      'DECODE',
      `malformed ${type.fullName.slice(1)}: ${(err as Error).message}`,
      {},
      {
        cause: err,
      },
    );
  }
  return scanner.found;
}
