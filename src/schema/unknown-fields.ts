/**
 * Finds what protobufjs would silently skip when decoding: fields the schema does not declare, and
 * declared fields arriving with another wire type. A body that decodes "fine" but carries either
 * was written with a different schema (a wrong field number, a changed type), so tests and
 * debug tools use this to tell a faithful schema from a merely compatible one.
 */
import protobuf from 'protobufjs';
import { MeshmuxError } from '../core/errors.js';
import { childPath, indexPath } from './field-path.js';
import { decodedJsonFormOf, jsonNameOf } from './proto-json.js';
import { fullNameOf, lookupProto } from './proto-root.js';
import { isUtf8Range } from '../wire/strict-reader.js';
import { WireCursor } from '../wire/wire-cursor.js';
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
    const t = lookupProto(name);
    return t instanceof protobuf.Type ? t : undefined;
  } catch {
    return undefined;
  }
}

/** One step of the path to the message being scanned: a field (an element of it), or a map key. */
type PathStep =
  { readonly field: protobuf.Field; readonly index: number | undefined } | { readonly key: string };

/**
 * Walks a message's bytes with one reader, nested messages in place (no copy, no reader of their
 * own). The path to where it is stays a list of steps: its text is built only for what is found.
 */
class Scanner {
  readonly found: string[] = [];
  private readonly path: PathStep[] = [];

  constructor(private readonly reader: protobuf.Reader) {}

  /** The text of the current path, with `last` (a child of it) appended when given. */
  private pathText(last?: string): string {
    let text = '';
    for (const step of this.path) {
      if ('key' in step) text = childPath(text, step.key);
      else {
        text = childPath(text, jsonNameOf(step.field));
        if (step.index !== undefined) text = indexPath(text, step.index);
      }
    }
    return last === undefined ? text : childPath(text, last);
  }

  /** The end of the length-delimited value at the reader, which must lie within the current one. */
  private delimited(): number {
    const length = this.reader.uint32();
    const end = this.reader.pos + length;
    if (end > this.reader.len) {
      throw new RangeError(`index out of range: ${this.reader.pos} + ${length} > ${this.reader.len}`);
    }
    return end;
  }

  /** Scans the message of `type` from the reader's position to `end` (its extent, checked). */
  message(type: protobuf.Type, end: number): void {
    const reader = this.reader;
    const outer = reader.len;
    reader.len = end;
    const isAny = fullNameOf(type) === '.google.protobuf.Any';
    /** Occurrences so far of repeated fields, by number, for the index of message elements. */
    let counts: Map<number, number> | undefined;
    let anyUrl: string | undefined;
    let anyValue: { start: number; end: number } | undefined;
    while (reader.pos < end) {
      const tag = reader.uint32();
      const id = tag >>> 3;
      const wire = tag & 7;
      const field = type.fieldsById[id];
      if (field === undefined) {
        const at = this.pathText();
        this.found.push(`${at === '' ? '' : `${at}.`}#${id}`);
        reader.skipType(wire);
        continue;
      }
      let index: number | undefined;
      if (field.repeated) {
        counts ??= new Map();
        index = counts.get(id) ?? 0;
        counts.set(id, index + 1);
      }
      const expected = field.map ? WIRE_LENGTH_DELIMITED : wireTypeOf(field.type, field.resolvedType);
      const packed =
        field.repeated && !field.map && wire === WIRE_LENGTH_DELIMITED && expected !== WIRE_LENGTH_DELIMITED;
      if (wire !== expected && !packed) {
        this.found.push(`${this.pathText(jsonNameOf(field))} (wire type ${wire}, expected ${expected})`);
        reader.skipType(wire);
        continue;
      }
      if (field instanceof protobuf.MapField) {
        const entryEnd = this.delimited();
        this.path.push({ field, index: undefined });
        this.mapEntry(field, entryEnd);
        this.path.pop();
      } else if (field.resolvedType instanceof protobuf.Type) {
        const subEnd = this.delimited();
        this.path.push({ field, index });
        this.message(field.resolvedType, subEnd);
        this.path.pop();
      } else if (isAny && id === 1) {
        anyUrl = reader.string();
      } else if (isAny && id === 2) {
        const valueEnd = this.delimited();
        anyValue = { start: reader.pos, end: valueEnd };
        reader.pos = valueEnd;
      } else {
        reader.skipType(wire);
      }
    }
    if (anyUrl !== undefined && anyValue !== undefined) {
      const inner = resolveAnyType(anyUrl);
      if (inner === undefined) this.found.push(`${this.pathText('value')} (unknown type ${anyUrl})`);
      else {
        reader.pos = anyValue.start;
        this.message(inner, anyValue.end);
        reader.pos = end;
      }
    }
    reader.len = outer;
  }

  /** Scans one map entry up to `end`; the path ends at the map field. */
  private mapEntry(field: protobuf.MapField, end: number): void {
    const reader = this.reader;
    const outer = reader.len;
    reader.len = end;
    const keyWire = SCALAR_WIRE[field.keyType] ?? WIRE_LENGTH_DELIMITED;
    const valueWire = wireTypeOf(field.type, field.resolvedType);
    let key = '?';
    let value: { start: number; end: number } | undefined;
    while (reader.pos < end) {
      const tag = reader.uint32();
      const id = tag >>> 3;
      const wire = tag & 7;
      if (id === 1 && wire === keyWire) {
        if (field.keyType === 'string') key = reader.string();
        else if (wire === WIRE_VARINT && !field.keyType.endsWith('64')) key = String(reader.uint32());
        else reader.skipType(wire); // only names the path; '?' will do
      } else if (id === 2 && wire === valueWire) {
        if (field.resolvedType instanceof protobuf.Type) {
          const valueEnd = this.delimited();
          value = { start: reader.pos, end: valueEnd };
          reader.pos = valueEnd;
        } else reader.skipType(wire);
      } else {
        this.found.push(`${this.pathText()}#entry.${id} (wire type ${wire})`);
        reader.skipType(wire);
      }
    }
    if (value !== undefined && field.resolvedType instanceof protobuf.Type) {
      reader.pos = value.start;
      this.path.push({ key });
      this.message(field.resolvedType, value.end);
      this.path.pop();
      reader.pos = end;
    }
    reader.len = outer;
  }
}

/**
 * Paths of everything in `bytes` that `type` does not account for: undeclared field numbers as
 * `path.#N`, declared fields with a foreign wire type as `path (wire type W, expected E)`. Nested
 * messages, map values and `Any` payloads (when their type is in proto/) are scanned too.
 * Empty when the bytes are fully described by the schema. Throws a `DECODE` MeshmuxError for bytes
 * that are not protobuf at all.
 */
export function findUnknownFields(type: protobuf.Type, bytes: Uint8Array): string[] {
  const scanner = new Scanner(protobuf.Reader.create(bytes));
  try {
    scanner.message(type, bytes.length);
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

/**
 * Whether `bytes` are a message of `type` exactly as the schema describes it and nothing in them
 * can be refused: decoding them through `StrictReader` cannot fail, {@link findUnknownFields}
 * finds nothing, and the decoded message passes `checkDecodedAsJson` (so `checkUpstreamObject`
 * finds nothing wrong with the body). That is: every field declared and with its wire type (lists
 * packed or not), every length and varint within its message, every string (map keys and values
 * too) valid UTF-8; no two alternatives of a oneof, no map keyed by bool, no float, no `Any` or
 * other well-known type whose JSON form only printing it would judge, and every Duration within
 * Go's range. False says nothing more: such bytes are for a full decode and its checks to judge.
 */
export function isPlainBody(type: protobuf.Type, bytes: Uint8Array): boolean {
  try {
    return plainMessage(planOf(type), new WireCursor(bytes), bytes, bytes.length);
  } catch {
    return false;
  }
}

/** Stands for a body {@link isPlainBody} accepted where its decoded message would be checked. */
export const PLAIN_BODY: unique symbol = Symbol('plain body');

/** How a plain message's field is read past, decided once per field of the schema. */
const enum ValueKind {
  /** A scalar of `wire`; a repeated one may also come packed. */
  Scalar,
  String,
  Bytes,
  Message,
  Map,
  /** A value the checks of the decoded message may refuse (a float, an entry of a bool-keyed map). */
  Refused,
}

interface ValuePlan {
  readonly kind: ValueKind;
  /** The wire type a single value arrives with. */
  readonly wire: number;
  /** A list of scalars, which may arrive packed. */
  readonly packable: boolean;
  /** `Message`: the message's fields. */
  readonly message?: MessagePlan;
  /** `Map`: how an entry's key and value are read past. */
  readonly mapKey?: ValuePlan;
  readonly mapValue?: ValuePlan;
}

/** A message's fields by number: undefined for numbers it does not declare. */
interface MessagePlan {
  readonly fields: (ValuePlan | undefined)[];
  /** What judges a message of this type beyond its fields (see `decodedJsonFormOf`). */
  readonly form: 'fields' | 'duration' | 'printed';
  /**
   * By field number, a bit of its oneof for the members of oneofs of two or more fields: a
   * message holding two values of one such oneof (the same member twice too) is not plain.
   */
  readonly alternatives: number[];
}

/**
 * The plan of every type walked, built on first use: a walk then looks a field up by number in an
 * array, where reading the schema per value asked protobufjs for the field, its resolved type
 * and that type's name, and matched each against the kinds of values.
 */
const plans = new WeakMap<protobuf.Type, MessagePlan>();

/** Oneofs of two or more fields a message may have for its plan to tell them apart. */
const MAX_ALTERNATIVES = 30;

/** A value of no wire type: every one arriving is not plain. */
const REFUSED: ValuePlan = { kind: ValueKind.Refused, wire: -1, packable: false };

function planOf(type: protobuf.Type): MessagePlan {
  let plan = plans.get(type);
  if (plan !== undefined) return plan;
  const fields: (ValuePlan | undefined)[] = [];
  const alternatives: number[] = [];
  const oneofs = type.oneofsArray.filter((o) => o.fieldsArray.length > 1);
  const form = oneofs.length > MAX_ALTERNATIVES ? 'printed' : decodedJsonFormOf(type);
  oneofs.forEach((o, i) => {
    for (const field of o.fieldsArray) alternatives[field.id] = 1 << i;
  });
  plan = { fields, form, alternatives };
  // Set before the fields are planned: a message may contain itself.
  plans.set(type, plan);
  for (const field of type.fieldsArray) {
    field.resolve();
    if (field instanceof protobuf.MapField) {
      fields[field.id] =
        field.keyType === 'bool'
          ? REFUSED
          : {
              kind: ValueKind.Map,
              wire: WIRE_LENGTH_DELIMITED,
              packable: false,
              mapKey: valuePlan(field.keyType, null, false),
              mapValue: valuePlan(field.type, field.resolvedType, false),
            };
    } else fields[field.id] = valuePlan(field.type, field.resolvedType, field.repeated);
  }
  return plan;
}

function valuePlan(
  typeName: string,
  resolved: protobuf.ReflectionObject | null,
  repeated: boolean,
): ValuePlan {
  if (resolved instanceof protobuf.Type)
    return {
      kind: ValueKind.Message,
      wire: WIRE_LENGTH_DELIMITED,
      packable: false,
      message: planOf(resolved),
    };
  // A float may print in a shortest form just beyond the range reading it back allows.
  if (typeName === 'float') return REFUSED;
  const wire = wireTypeOf(typeName, resolved);
  if (typeName === 'string') return { kind: ValueKind.String, wire, packable: false };
  if (wire === WIRE_LENGTH_DELIMITED) return { kind: ValueKind.Bytes, wire, packable: false };
  return { kind: ValueKind.Scalar, wire, packable: repeated };
}

function plainMessage(plan: MessagePlan, cursor: WireCursor, bytes: Uint8Array, limit: number): boolean {
  const { fields, alternatives } = plan;
  let taken = 0;
  while (cursor.pos < limit) {
    const tag = cursor.uint32(limit);
    const id = tag >>> 3;
    const field = fields[id];
    if (field === undefined) return false;
    const oneof = alternatives[id];
    if (oneof !== undefined) {
      if ((taken & oneof) !== 0) return false;
      taken |= oneof;
    }
    if (!plainValue(field, tag & 7, cursor, bytes, limit)) return false;
  }
  return cursor.pos === limit;
}

/** One value of `plan` arriving with wire type `wire` at the cursor, read past when plain. */
function plainValue(
  plan: ValuePlan,
  wire: number,
  cursor: WireCursor,
  bytes: Uint8Array,
  limit: number,
): boolean {
  if (wire === plan.wire) {
    switch (plan.kind) {
      case ValueKind.Scalar:
        cursor.skip(wire, limit, 0);
        return true;
      case ValueKind.String:
        cursor.lengthDelimited(limit);
        return isUtf8Range(bytes, cursor.start, cursor.end);
      case ValueKind.Bytes:
        cursor.lengthDelimited(limit);
        return true;
      case ValueKind.Message: {
        const message = plan.message as MessagePlan;
        if (message.form === 'printed') return false;
        cursor.lengthDelimited(limit);
        const end = cursor.end;
        cursor.pos = cursor.start;
        if (message.form === 'duration') return plainDuration(cursor, bytes, end);
        return plainMessage(message, cursor, bytes, end);
      }
      case ValueKind.Map: {
        cursor.lengthDelimited(limit);
        const end = cursor.end;
        cursor.pos = cursor.start;
        return plainMapEntry(plan, cursor, bytes, end);
      }
      case ValueKind.Refused:
        return false;
    }
  }
  if (!plan.packable || wire !== WIRE_LENGTH_DELIMITED) return false;
  // A packed list: whole values of the element's wire type, nothing left over.
  cursor.lengthDelimited(limit);
  const end = cursor.end;
  if (plan.wire !== WIRE_VARINT) return (end - cursor.start) % (plan.wire === WIRE_FIXED64 ? 8 : 4) === 0;
  cursor.pos = cursor.start;
  while (cursor.pos < end) cursor.skip(WIRE_VARINT, end, 0);
  return true;
}

/**
 * Seconds a plain Duration may hold: its printed form is read back as Go reads durations, an
 * int64 of nanoseconds (some 9.22e9 seconds); this stays below that with any nanos.
 */
const MAX_PLAIN_SECONDS = 9_000_000_000;
const MAX_NANOS = 999_999_999;

/**
 * A Duration's fields (seconds as field 1, nanos as field 2, both varints) up to `end`: plain when
 * each is neither negative nor beyond what prints and reads back, and nothing else is there.
 */
function plainDuration(cursor: WireCursor, bytes: Uint8Array, end: number): boolean {
  while (cursor.pos < end) {
    const tag = cursor.uint32(end);
    if ((tag & 7) !== WIRE_VARINT) return false;
    const id = tag >>> 3;
    const max = id === 1 ? MAX_PLAIN_SECONDS : id === 2 ? MAX_NANOS : -1;
    // At most five bytes (35 bits): a negative number takes ten, and these bounds fit in 34 bits.
    let value = 0;
    let scale = 1;
    for (let n = 0; ; n++) {
      if (n === 5 || cursor.pos >= end) return false;
      const b = bytes[cursor.pos++] as number;
      value += (b & 0x7f) * scale;
      scale *= 128;
      if (b < 0x80) break;
    }
    if (value > max) return false;
  }
  return true;
}

function plainMapEntry(plan: ValuePlan, cursor: WireCursor, bytes: Uint8Array, end: number): boolean {
  while (cursor.pos < end) {
    const tag = cursor.uint32(end);
    const id = tag >>> 3;
    const value = id === 1 ? plan.mapKey : id === 2 ? plan.mapValue : undefined;
    if (value === undefined || !plainValue(value, tag & 7, cursor, bytes, end)) return false;
  }
  return cursor.pos === end;
}
