/**
 * A proto3 JSON codec over protobufjs reflection, reading JSON the way Istio does and writing it
 * the way Go's protojson does.
 *
 * Reading accepts what both gates in front of istiod accept: Istio's decoder (golang/protobuf
 * jsonpb, which reads Durations with Go's `time.ParseDuration` and ignores unknown fields) and the
 * Kubernetes CRD schema (which rejects, for example, a number where a string belongs or a string
 * where a list belongs). Unknown fields are pruned and reported, never fatal; every other mismatch
 * is a `SCHEMA` error naming the field path. `null` means "not set" for every field except a
 * `google.protobuf.Value`, where it is the JSON null; as an element of a list of messages it is an
 * error, as in Istio.
 *
 * Encoding follows Go: fields without presence are left out when they hold their default, so the
 * bytes equal what istio/api's Go types produce (map entries aside, whose order Go does not fix;
 * here they are sorted by key so equal input always gives equal bytes).
 */
import protobuf from 'protobufjs';
import { MeshmuxError } from '../core/errors.js';
import { childPath, indexPath } from './field-path.js';
import { formatDuration, parseGoDuration } from '../core/go-duration.js';
import {
  describeJsonType,
  isPlainObject,
  ownValue,
  setJsonKey,
  type JsonObject,
  type JsonValue,
} from './json-value.js';
import { fullNameOf, lookupProto } from './proto-root.js';
import { formatRfc3339, parseRfc3339 } from './rfc3339.js';

/** Options and collectors for `fromProtoJson` / `encodeProtoJson`. */
export interface ProtoJsonContext {
  /** Path of the value inside its document (e.g. `spec`); prefixes every reported field path. */
  readonly path?: string;
  /** Called once per unknown field that was dropped, with its full path (e.g. `spec.http[0].foo`). */
  readonly onPruned?: (field: string) => void;
  /**
   * When given, every error is appended here and reading goes on past the bad field, so one pass
   * reports all of a document's problems; the returned message must then be discarded if any
   * error was added. Without it, the first error is thrown.
   */
  readonly errors?: MeshmuxError[];
  /** Resolves an `Any`'s `@type` URL; by default its last segment is looked up in proto/. */
  readonly resolveAny?: (typeUrl: string) => protobuf.Type | undefined;
}

/** A message as protobufjs decodes it, or as `fromProtoJson` builds it: fields by proto name. */
export type MessageLike = protobuf.Message | Readonly<Record<string, unknown>>;

type Fields = Record<string, unknown>;

const WKT = '.google.protobuf.';
const WRAPPERS = new Set(
  ['DoubleValue', 'FloatValue', 'Int64Value', 'UInt64Value', 'Int32Value', 'UInt32Value', 'BoolValue']
    .concat(['StringValue', 'BytesValue'])
    .map((n) => WKT + n),
);

const INT32: readonly [bigint, bigint] = [-(1n << 31n), (1n << 31n) - 1n];
const UINT32: readonly [bigint, bigint] = [0n, (1n << 32n) - 1n];
const INT64: readonly [bigint, bigint] = [-(1n << 63n), (1n << 63n) - 1n];
const UINT64: readonly [bigint, bigint] = [0n, (1n << 64n) - 1n];

const INT_RANGES: Readonly<Record<string, readonly [bigint, bigint]>> = {
  int32: INT32,
  sint32: INT32,
  sfixed32: INT32,
  uint32: UINT32,
  fixed32: UINT32,
  int64: INT64,
  sint64: INT64,
  sfixed64: INT64,
  uint64: UINT64,
  fixed64: UINT64,
};
const LONG_TYPES = new Set(['int64', 'sint64', 'sfixed64', 'uint64', 'fixed64']);
const MAX_FLOAT32 = 3.4028234663852886e38;

// ---------------------------------------------------------------------------------------------
// Reflection helpers

/** protoc's default JSON name: `connect_timeout` → `connectTimeout`, `http2_max_requests` → `http2MaxRequests`. */
export function jsonNameOf(field: protobuf.Field): string {
  const explicit: unknown = field.options?.['json_name'];
  if (typeof explicit === 'string') return explicit;
  let out = '';
  let upper = false;
  for (const c of field.name) {
    if (c === '_') upper = true;
    else {
      out += upper ? c.toUpperCase() : c;
      upper = false;
    }
  }
  return out;
}

const fieldIndex = new WeakMap<protobuf.Type, ReadonlyMap<string, protobuf.Field>>();

/** Fields by JSON name and by proto name. */
function fieldsByName(type: protobuf.Type): ReadonlyMap<string, protobuf.Field> {
  let index = fieldIndex.get(type);
  if (index === undefined) {
    const m = new Map<string, protobuf.Field>();
    for (const f of type.fieldsArray) {
      m.set(f.name, f);
      m.set(jsonNameOf(f), f);
    }
    fieldIndex.set(type, (index = m));
  }
  return index;
}

const sortedFields = new WeakMap<protobuf.Type, readonly protobuf.Field[]>();

function fieldsInOrder(type: protobuf.Type): readonly protobuf.Field[] {
  let fields = sortedFields.get(type);
  if (fields === undefined)
    sortedFields.set(type, (fields = [...type.fieldsArray].sort((a, b) => a.id - b.id)));
  return fields;
}

const enumNames = new WeakMap<protobuf.Enum, ReadonlyMap<number, string>>();

/** The first name declared for each number, as Go prints aliased enum values. */
function enumNameOf(e: protobuf.Enum, n: number): string | undefined {
  let names = enumNames.get(e);
  if (names === undefined) {
    const m = new Map<number, string>();
    for (const [name, num] of Object.entries(e.values)) if (!m.has(num)) m.set(num, name);
    enumNames.set(e, (names = m));
  }
  return names.get(n);
}

function messageTypeOf(field: protobuf.Field): protobuf.Type | undefined {
  return field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined;
}

function enumTypeOf(field: protobuf.Field): protobuf.Enum | undefined {
  return field.resolvedType instanceof protobuf.Enum ? field.resolvedType : undefined;
}

/** Fields that carry presence: messages, oneof members and proto3 `optional` (a synthetic oneof). */
function hasPresence(field: protobuf.Field): boolean {
  return !field.repeated && !field.map && (messageTypeOf(field) !== undefined || field.partOf !== null);
}

function defaultAnyResolver(typeUrl: string): protobuf.Type | undefined {
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  if (name === '') return undefined;
  try {
    const found = lookupProto(name);
    return found instanceof protobuf.Type ? found : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A field by number. The well-known types come from protobufjs' bundled definitions, whose field
 * names are not all snake_case (`Value.nullValue`), so they are always addressed by number.
 */
function fieldById(type: protobuf.Type, id: number): protobuf.Field {
  const f = type.fieldsById[id];
  if (f === undefined) throw new MeshmuxError('INTERNAL', `${type.fullName} has no field ${id}`);
  return f;
}

function nameById(type: protobuf.Type, id: number): string {
  return fieldById(type, id).name;
}

function typeById(type: protobuf.Type, id: number): protobuf.Type {
  const t = messageTypeOf(fieldById(type, id));
  if (t === undefined) throw new MeshmuxError('INTERNAL', `${type.fullName} field ${id} is not a message`);
  return t;
}

/** Value's kinds, by field number. */
const VALUE_NULL = 1;
const VALUE_NUMBER = 2;
const VALUE_STRING = 3;
const VALUE_BOOL = 4;
const VALUE_STRUCT = 5;
const VALUE_LIST = 6;

/** Well-known types with a JSON form of their own (which an Any nests under "value"). */
const SPECIAL_JSON = new Set([
  ...WRAPPERS,
  ...['Duration', 'Timestamp', 'Struct', 'ListValue', 'Value', 'Empty', 'FieldMask', 'Any'].map(
    (n) => WKT + n,
  ),
]);

function hasSpecialJson(type: protobuf.Type): boolean {
  return SPECIAL_JSON.has(fullNameOf(type));
}

/**
 * What decides whether a message of `type` decoded from bytes passes `checkDecodedAsJson`, as a
 * reader of its bytes that decodes nothing must judge it: `fields`, its fields alone (an ordinary
 * message, or a wrapper, whose one value prints and reads back whatever it holds but a float);
 * `duration`, its two numbers (refused beyond Go's range of about ±292 years); `printed`, only
 * printing it (every other well-known type with a JSON form of its own, `Any` among them).
 */
export function decodedJsonFormOf(type: protobuf.Type): 'fields' | 'duration' | 'printed' {
  const name = fullNameOf(type);
  if (!SPECIAL_JSON.has(name) || WRAPPERS.has(name)) return 'fields';
  return name === `${WKT}Duration` ? 'duration' : 'printed';
}

// ---------------------------------------------------------------------------------------------
// JSON → message

/** Marks a value that failed to read; the error has already been reported. */
const INVALID = Symbol('invalid');
type Read<T> = T | typeof INVALID;

class JsonReader {
  constructor(private readonly ctx: ProtoJsonContext) {}

  private fail(path: string, reason: string): typeof INVALID {
    const err = new MeshmuxError('SCHEMA', reason, { field: path });
    if (this.ctx.errors === undefined) throw err;
    this.ctx.errors.push(err);
    return INVALID;
  }

  private expected(path: string, what: string, value: unknown): typeof INVALID {
    return this.fail(path, `expected ${what}, got ${describeJsonType(value)}`);
  }

  message(type: protobuf.Type, value: unknown, path: string): Read<Fields> {
    if (hasSpecialJson(type)) {
      const special = this.wellKnown(type, value, path);
      if (special !== undefined) return special;
    }
    if (value === null) return {};
    if (!isPlainObject(value)) return this.expected(path, `an object (${type.name})`, value);

    const byName = fieldsByName(type);
    const chosen = new Map<protobuf.Field, string>();
    for (const key of Object.keys(value)) {
      const field = byName.get(key);
      if (field === undefined) {
        this.ctx.onPruned?.(childPath(path, key));
        continue;
      }
      const earlier = chosen.get(field);
      if (earlier === undefined) {
        chosen.set(field, key);
        continue;
      }
      // Both spellings of one field: the JSON name wins and the proto name is ignored, as in Istio.
      const [kept, dropped] = key === jsonNameOf(field) ? [key, earlier] : [earlier, key];
      chosen.set(field, kept);
      this.ctx.onPruned?.(childPath(path, dropped));
    }

    const out: Fields = {};
    let ok = true;
    const skipped = new Set<protobuf.Field>();
    for (const oneof of type.oneofsArray) {
      const set = oneof.fieldsArray.filter((f) => {
        const key = chosen.get(f);
        return key !== undefined && ownValue(value, key) !== null;
      });
      if (set.length > 1) {
        const names = set.map((f) => chosen.get(f) ?? f.name);
        this.fail(path, `only one of ${names.join(', ')} may be set (they are alternatives)`);
        ok = false;
        for (const f of set) skipped.add(f);
      }
    }

    for (const field of fieldsInOrder(type)) {
      const key = chosen.get(field);
      if (key === undefined || skipped.has(field)) continue;
      const raw = ownValue(value, key);
      const fieldPath = childPath(path, key);
      const elementType = messageTypeOf(field);
      if (
        raw === null &&
        !(
          elementType !== undefined &&
          fullNameOf(elementType) === `${WKT}Value` &&
          !field.repeated &&
          !field.map
        )
      )
        continue;

      let v: Read<unknown>;
      if (field.map) v = this.map(field, raw, fieldPath);
      else if (field.repeated) v = this.list(field, raw, fieldPath);
      else v = this.singular(field, raw, fieldPath);
      if (v === INVALID) {
        ok = false;
        continue;
      }
      if (!hasPresence(field) && isDefaultValue(field, v)) continue;
      setJsonKey(out, field.name, v);
    }
    return ok ? out : INVALID;
  }

  private list(field: protobuf.Field, value: unknown, path: string): Read<unknown[]> {
    if (!Array.isArray(value)) return this.expected(path, 'a list', value);
    const out: unknown[] = [];
    let ok = true;
    const messages = messageTypeOf(field);
    value.forEach((item: unknown, i) => {
      if (item === null && messages !== undefined && fullNameOf(messages) !== `${WKT}Value`) {
        // Istio's reader refuses it too: an empty entry is a typo (`- ` alone), not a message.
        this.fail(indexPath(path, i), `expected an object (${messages.name}), got null`);
        ok = false;
        return;
      }
      const v = this.element(field, item, indexPath(path, i));
      if (v === INVALID) ok = false;
      else out.push(v);
    });
    return ok ? out : INVALID;
  }

  private map(field: protobuf.Field, value: unknown, path: string): Read<Fields> {
    if (!isPlainObject(value)) return this.expected(path, 'an object (a map)', value);
    const keyType = field instanceof protobuf.MapField ? field.keyType : 'string';
    const out: Fields = {};
    let ok = true;
    // Sorted so that equal maps always encode to equal bytes.
    for (const key of Object.keys(value).sort()) {
      const entryPath = childPath(path, key);
      const k = this.mapKey(keyType, key, entryPath);
      const v = this.element(field, value[key], entryPath);
      if (k === INVALID || v === INVALID) ok = false;
      else setJsonKey(out, k, v);
    }
    return ok ? out : INVALID;
  }

  private mapKey(keyType: string, key: string, path: string): Read<string> {
    if (keyType === 'string') return key;
    // protobufjs writes bool keys from their string form, turning "false" into true; Istio has no
    // bool-keyed maps, so refusing them is safer than encoding them wrongly.
    if (keyType === 'bool') return this.fail(path, 'maps with bool keys are not supported');
    const range = INT_RANGES[keyType];
    if (range !== undefined && /^-?(0|[1-9][0-9]*)$/.test(key)) {
      const n = BigInt(key);
      if (n >= range[0] && n <= range[1]) return n.toString();
    }
    return this.fail(path, `map key ${JSON.stringify(key)} is not a valid ${keyType}`);
  }

  /**
   * A list item or map value; null there stands for the type's default, as in Istio's decoder,
   * except in a list of messages (refused by `list`).
   */
  private element(field: protobuf.Field, value: unknown, path: string): Read<unknown> {
    if (value === null) {
      const t = messageTypeOf(field);
      if (t !== undefined) return fullNameOf(t) === `${WKT}Value` ? { [nameById(t, VALUE_NULL)]: 0 } : {};
      return defaultValueOf(field);
    }
    return this.singular(field, value, path);
  }

  private singular(field: protobuf.Field, value: unknown, path: string): Read<unknown> {
    const msgType = messageTypeOf(field);
    if (msgType !== undefined) return this.message(msgType, value, path);
    const enumType = enumTypeOf(field);
    if (enumType !== undefined) return this.enumValue(enumType, value, path);
    return this.scalar(field.type, value, path);
  }

  private enumValue(e: protobuf.Enum, value: unknown, path: string): Read<number> {
    if (typeof value === 'string') {
      const n = ownValue(e.values, value);
      if (typeof n === 'number') return n;
      const names = Object.keys(e.values).join(', ');
      return this.fail(
        path,
        `unknown value ${JSON.stringify(value)} for ${e.name}; expected one of ${names}`,
      );
    }
    if (typeof value === 'number' && Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31) {
      return value;
    }
    return this.expected(path, `one of ${Object.keys(e.values).join(', ')}`, value);
  }

  private scalar(type: string, value: unknown, path: string): Read<unknown> {
    switch (type) {
      case 'string':
        return typeof value === 'string' ? value : this.expected(path, 'a string', value);
      case 'bool':
        return typeof value === 'boolean' ? value : this.expected(path, 'a boolean (true or false)', value);
      case 'double':
      case 'float':
        return this.floating(type, value, path);
      case 'bytes':
        return this.bytes(value, path);
      default:
        return this.integer(type, value, path);
    }
  }

  private floating(type: string, value: unknown, path: string): Read<number> {
    let n: number;
    if (typeof value === 'number') n = value;
    else if (value === 'NaN') n = Number.NaN;
    else if (value === 'Infinity') n = Number.POSITIVE_INFINITY;
    else if (value === '-Infinity') n = Number.NEGATIVE_INFINITY;
    else return this.expected(path, 'a number', value);
    if (type === 'float') {
      if (Number.isFinite(n) && Math.abs(n) > MAX_FLOAT32)
        return this.fail(path, `${n} is out of range for float`);
      return Math.fround(n);
    }
    return n;
  }

  private integer(type: string, value: unknown, path: string): Read<number | string> {
    const range = INT_RANGES[type];
    if (range === undefined) return this.fail(path, `unsupported field type ${type}`);
    const long = LONG_TYPES.has(type);
    let n: bigint;
    if (typeof value === 'number' && Number.isInteger(value)) n = BigInt(value);
    // 64-bit integers may be strings (their canonical JSON form); 32-bit ones may not, since the
    // CRD schema declares them as integers.
    else if (long && typeof value === 'string' && /^-?(0|[1-9][0-9]*)$/.test(value)) n = BigInt(value);
    else return this.expected(path, long ? 'an integer (or a string of digits)' : 'an integer', value);
    if (n < range[0] || n > range[1]) return this.fail(path, `${n} is out of range for ${type}`);
    // protobufjs writes 64-bit values from decimal strings without loss.
    return long ? n.toString() : Number(n);
  }

  private bytes(value: unknown, path: string): Read<Uint8Array> {
    if (typeof value !== 'string') return this.expected(path, 'base64 text', value);
    const body = value.replace(/={1,2}$/, '');
    if (!/^[A-Za-z0-9+/]*$/.test(body) && !/^[A-Za-z0-9\-_]*$/.test(body)) {
      return this.fail(path, 'not valid base64');
    }
    if (body.length % 4 === 1) return this.fail(path, 'not valid base64 (wrong length)');
    return new Uint8Array(
      Buffer.from(body, body.includes('-') || body.includes('_') ? 'base64url' : 'base64'),
    );
  }

  /** The JSON forms of the well-known types; undefined for a type read as an ordinary message. */
  private wellKnown(type: protobuf.Type, value: unknown, path: string): Read<Fields> | undefined {
    const name = fullNameOf(type);
    if (WRAPPERS.has(name)) {
      const inner = fieldById(type, 1);
      const v = this.scalar(inner.type, value, path);
      if (v === INVALID) return INVALID;
      return isDefaultValue(inner, v) ? {} : { [inner.name]: v };
    }
    switch (name) {
      case `${WKT}Duration`: {
        if (typeof value !== 'string')
          return this.expected(path, 'a duration such as "5s" or "1m30s"', value);
        const d = parseGoDuration(value);
        if (!d.ok) return this.fail(path, d.reason);
        return withoutZeros({
          [nameById(type, 1)]: d.duration.seconds,
          [nameById(type, 2)]: d.duration.nanos,
        });
      }
      case `${WKT}Timestamp`: {
        if (typeof value !== 'string') return this.expected(path, 'an RFC 3339 timestamp', value);
        const t = parseRfc3339(value);
        if (!t.ok) return this.fail(path, t.reason);
        return withoutZeros({
          [nameById(type, 1)]: t.timestamp.seconds,
          [nameById(type, 2)]: t.timestamp.nanos,
        });
      }
      case `${WKT}Struct`:
        return this.struct(type, value, path);
      case `${WKT}ListValue`:
        return this.listValue(type, value, path);
      case `${WKT}Value`:
        return this.jsonValue(type, value, path);
      case `${WKT}Empty`:
        if (value === null) return {};
        if (!isPlainObject(value)) return this.expected(path, 'an empty object', value);
        for (const key of Object.keys(value)) this.ctx.onPruned?.(childPath(path, key));
        return {};
      case `${WKT}FieldMask`:
        return this.fieldMask(type, value, path);
      case `${WKT}Any`:
        return this.any(type, value, path);
      default:
        return undefined;
    }
  }

  private struct(structType: protobuf.Type, value: unknown, path: string): Read<Fields> {
    if (!isPlainObject(value)) return this.expected(path, 'an object', value);
    const valueType = typeById(structType, 1);
    const fields: Fields = {};
    let ok = true;
    for (const key of Object.keys(value).sort()) {
      const v = this.jsonValue(valueType, value[key], childPath(path, key));
      if (v === INVALID) ok = false;
      else setJsonKey(fields, key, v);
    }
    if (!ok) return INVALID;
    return Object.keys(fields).length === 0 ? {} : { [nameById(structType, 1)]: fields };
  }

  private listValue(listType: protobuf.Type, value: unknown, path: string): Read<Fields> {
    if (!Array.isArray(value)) return this.expected(path, 'a list', value);
    const valueType = typeById(listType, 1);
    const values: Fields[] = [];
    let ok = true;
    value.forEach((item: unknown, i) => {
      const v = this.jsonValue(valueType, item, indexPath(path, i));
      if (v === INVALID) ok = false;
      else values.push(v);
    });
    if (!ok) return INVALID;
    return values.length === 0 ? {} : { [nameById(listType, 1)]: values };
  }

  /** Any JSON as a google.protobuf.Value; the kind is a oneof, so even null/0/""/false are kept. */
  private jsonValue(valueType: protobuf.Type, value: unknown, path: string): Read<Fields> {
    const kind = (id: number, v: unknown): Fields => ({ [nameById(valueType, id)]: v });
    if (value === null) return kind(VALUE_NULL, 0);
    if (typeof value === 'boolean') return kind(VALUE_BOOL, value);
    if (typeof value === 'string') return kind(VALUE_STRING, value);
    if (typeof value === 'number') {
      return Number.isFinite(value)
        ? kind(VALUE_NUMBER, value)
        : this.fail(path, `${value} cannot be represented in JSON`);
    }
    if (Array.isArray(value)) {
      const list = this.listValue(typeById(valueType, VALUE_LIST), value, path);
      return list === INVALID ? INVALID : kind(VALUE_LIST, list);
    }
    if (isPlainObject(value)) {
      const struct = this.struct(typeById(valueType, VALUE_STRUCT), value, path);
      return struct === INVALID ? INVALID : kind(VALUE_STRUCT, struct);
    }
    return this.expected(path, 'a JSON value', value);
  }

  private fieldMask(type: protobuf.Type, value: unknown, path: string): Read<Fields> {
    if (typeof value !== 'string') return this.expected(path, 'a comma-separated list of field paths', value);
    if (value === '') return {};
    const paths: string[] = [];
    for (const p of value.split(',')) {
      if (p.includes('_'))
        return this.fail(path, `field mask path ${JSON.stringify(p)} must be lowerCamelCase`);
      paths.push(p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
    }
    return { [nameById(type, 1)]: paths };
  }

  private any(anyType: protobuf.Type, value: unknown, path: string): Read<Fields> {
    if (!isPlainObject(value)) return this.expected(path, 'an object with "@type"', value);
    const typeUrl = ownValue(value, '@type');
    if (typeof typeUrl !== 'string' || typeUrl === '') {
      return this.fail(path, 'an Any needs a "@type" string naming its message type');
    }
    const resolved = (this.ctx.resolveAny ?? defaultAnyResolver)(typeUrl);
    if (resolved === undefined) return this.fail(childPath(path, '@type'), `unknown message type ${typeUrl}`);
    let inner: Read<Fields>;
    if (hasSpecialJson(resolved)) {
      // Well-known types keep their JSON form under "value".
      for (const key of Object.keys(value)) {
        if (key !== '@type' && key !== 'value') this.ctx.onPruned?.(childPath(path, key));
      }
      inner = this.message(resolved, ownValue(value, 'value') ?? null, childPath(path, 'value'));
    } else {
      const rest: Record<string, unknown> = {};
      for (const key of Object.keys(value)) if (key !== '@type') setJsonKey(rest, key, value[key]);
      inner = this.message(resolved, rest, path);
    }
    if (inner === INVALID) return INVALID;
    return { [nameById(anyType, 1)]: typeUrl, [nameById(anyType, 2)]: resolved.encode(inner).finish() };
  }
}

function withoutZeros(fields: Record<string, number>): Fields {
  const out: Fields = {};
  for (const [k, v] of Object.entries(fields)) if (v !== 0) out[k] = v;
  return out;
}

function defaultValueOf(field: protobuf.Field): unknown {
  if (enumTypeOf(field) !== undefined) return 0;
  switch (field.type) {
    case 'string':
      return '';
    case 'bool':
      return false;
    case 'bytes':
      return new Uint8Array(0);
    default:
      return LONG_TYPES.has(field.type) ? '0' : 0;
  }
}

/** True when a field without presence holds its default, which proto3 never writes. */
function isDefaultValue(field: protobuf.Field, v: unknown): boolean {
  if (typeof v === 'number') return Object.is(v, 0); // -0 is not the default: Go writes it
  if (typeof v === 'string') return LONG_TYPES.has(field.type) ? longToBigInt(v) === 0n : v === '';
  if (typeof v === 'boolean') return !v;
  if (v instanceof Uint8Array) return v.length === 0;
  const big = longToBigInt(v);
  if (big !== undefined) return big === 0n;
  return v === null || v === undefined;
}

/**
 * Reads proto3 JSON (as produced from YAML) into a message of `type`. Field names may be lowerCamel
 * JSON names or proto names. Unknown fields are dropped and reported through `ctx.onPruned`; other
 * problems are `SCHEMA` MeshmuxErrors whose `location.field` is the full field path (thrown, or
 * collected in `ctx.errors`). The result is a protobufjs message ready for `type.encode`; it holds
 * only fields that Go would encode, so defaults of fields without presence are absent.
 */
export function fromProtoJson(
  type: protobuf.Type,
  value: unknown,
  ctx: ProtoJsonContext = {},
): protobuf.Message {
  const fields = new JsonReader(ctx).message(type, value, ctx.path ?? '');
  return type.create(fields === INVALID ? {} : fields);
}

/** Per message type, whether the JSON form of a message decoded from bytes can fail the checks. */
const roundTripRefusals = new Map<protobuf.Type, boolean>();

/**
 * Whether the proto3 JSON form of a message of `type` decoded from bytes (`toProtoJson`) can fail
 * to print, or fail the checks of `fromProtoJson`. False when `type` and every message type it
 * holds have no oneof of two or more fields, no well-known type with a JSON form of its own, no
 * map keyed by bool and no float field: the JSON printed for such a message holds only declared
 * fields, each with a value of its type in range (enums by name or as 32-bit numbers, 64-bit
 * integers as strings of digits), which is what the checks accept. (A float is printed in its
 * shortest form, which may lie just beyond the float range that reading checks.)
 */
export function jsonRoundTripCanFail(type: protobuf.Type): boolean {
  let answer = roundTripRefusals.get(type);
  if (answer === undefined) {
    answer = typeCanFail(type, new Set());
    roundTripRefusals.set(type, answer);
  }
  return answer;
}

function typeCanFail(type: protobuf.Type, seen: Set<protobuf.Type>): boolean {
  if (seen.has(type)) return false; // already being looked at higher up
  seen.add(type);
  if (hasSpecialJson(type)) return true;
  if (type.oneofsArray.some((o) => o.fieldsArray.length > 1)) return true;
  for (const field of type.fieldsArray) {
    if (field instanceof protobuf.MapField && field.keyType === 'bool') return true;
    if (field.type === 'float') return true;
    const nested = messageTypeOf(field);
    if (nested !== undefined && typeCanFail(nested, seen)) return true;
  }
  return false;
}

/** `fromProtoJson`, then encoded: the body bytes Istio's Go types would produce for the same JSON. */
export function encodeProtoJson(type: protobuf.Type, value: unknown, ctx: ProtoJsonContext = {}): Uint8Array {
  return type.encode(fromProtoJson(type, value, ctx)).finish();
}

// ---------------------------------------------------------------------------------------------
// message → JSON

interface LongLike {
  readonly low: number;
  readonly high: number;
  readonly unsigned: boolean;
}

function isLongLike(v: unknown): v is LongLike {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as Partial<LongLike>).low === 'number' &&
    typeof (v as Partial<LongLike>).high === 'number'
  );
}

/** A 64-bit value as protobufjs may hold it (Long, number or decimal string) as a bigint. */
function longToBigInt(v: unknown, unsigned = false): bigint | undefined {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : undefined;
  if (typeof v === 'string') return /^-?[0-9]+$/.test(v) ? BigInt(v) : undefined;
  if (!isLongLike(v)) return undefined;
  const bits = (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
  return v.unsigned || unsigned ? bits : BigInt.asIntN(64, bits);
}

/** Shortest decimal that reads back as the same float32, as Go prints float fields. */
function float32Number(v: number): number {
  if (!Number.isFinite(v) || v === 0) return v;
  const f = Math.fround(v);
  for (let p = 1; p <= 9; p++) {
    const candidate = Number(f.toPrecision(p));
    if (Math.fround(candidate) === f) return candidate;
  }
  return f;
}

function fail(reason: string): never {
  throw new MeshmuxError('DECODE', reason);
}

function asRecord(message: unknown): Readonly<Record<string, unknown>> {
  return typeof message === 'object' && message !== null ? (message as Record<string, unknown>) : {};
}

function numberOf(v: unknown): number {
  const big = longToBigInt(v);
  return big === undefined ? 0 : Number(big);
}

/** A map key as the JSON form prints it: protobufjs keys 64-bit maps by an 8-character hash of the bits. */
function jsonMapKey(field: protobuf.Field, key: string): string {
  const keyType = field instanceof protobuf.MapField ? field.keyType : 'string';
  if (LONG_TYPES.has(keyType) && key.length === 8 && !/^-?[0-9]+$/.test(key)) {
    const bits = protobuf.util.LongBits.fromHash(key);
    const big = (BigInt(bits.hi >>> 0) << 32n) | BigInt(bits.lo >>> 0);
    return (keyType === 'uint64' || keyType === 'fixed64' ? big : BigInt.asIntN(64, big)).toString();
  }
  return key;
}

class JsonWriter {
  message(type: protobuf.Type, message: unknown): JsonValue {
    const m = asRecord(message);
    if (hasSpecialJson(type)) {
      const special = this.wellKnown(type, m);
      if (special !== undefined) return special;
    }
    const out: JsonObject = {};
    for (const field of fieldsInOrder(type)) {
      const v = ownValue(m, field.name);
      if (v === undefined || v === null) continue;
      const name = jsonNameOf(field);
      if (field.map) {
        const entries = Object.keys(asRecord(v));
        if (entries.length === 0) continue;
        const obj: JsonObject = {};
        for (const key of entries.sort()) {
          setJsonKey(obj, jsonMapKey(field, key), this.singular(field, asRecord(v)[key]));
        }
        setJsonKey(out, name, obj);
      } else if (field.repeated) {
        if (!Array.isArray(v) || v.length === 0) continue;
        setJsonKey(
          out,
          name,
          v.map((item: unknown) => this.singular(field, item)),
        );
      } else if (hasPresence(field) || !isDefaultValue(field, v)) {
        setJsonKey(out, name, this.singular(field, v));
      }
    }
    return out;
  }

  private singular(field: protobuf.Field, v: unknown): JsonValue {
    const t = messageTypeOf(field);
    if (t !== undefined) return this.message(t, v);
    const e = enumTypeOf(field);
    if (e !== undefined) {
      const n = numberOf(v);
      if (fullNameOf(e) === `${WKT}NullValue`) return null;
      return enumNameOf(e, n) ?? n;
    }
    return this.scalar(field.type, v);
  }

  private scalar(type: string, v: unknown): JsonValue {
    switch (type) {
      case 'string':
        return typeof v === 'string' ? v : '';
      case 'bool':
        return v === true;
      case 'bytes':
        return v instanceof Uint8Array
          ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64')
          : '';
      case 'double':
      case 'float': {
        const n = typeof v === 'number' ? v : 0;
        if (Number.isNaN(n)) return 'NaN';
        if (n === Number.POSITIVE_INFINITY) return 'Infinity';
        if (n === Number.NEGATIVE_INFINITY) return '-Infinity';
        return type === 'float' ? float32Number(n) : n;
      }
      default: {
        const unsigned = type === 'uint64' || type === 'fixed64';
        const big = longToBigInt(v, unsigned) ?? 0n;
        return LONG_TYPES.has(type) ? big.toString() : Number(big);
      }
    }
  }

  private wellKnown(type: protobuf.Type, m: Readonly<Record<string, unknown>>): JsonValue | undefined {
    const name = fullNameOf(type);
    const field = (id: number): unknown => ownValue(m, nameById(type, id));
    if (WRAPPERS.has(name)) return this.scalar(fieldById(type, 1).type, field(1));
    switch (name) {
      case `${WKT}Duration`:
        return formatDuration({ seconds: numberOf(field(1)), nanos: numberOf(field(2)) });
      case `${WKT}Timestamp`:
        return formatRfc3339({ seconds: numberOf(field(1)), nanos: numberOf(field(2)) });
      case `${WKT}Struct`:
        return this.struct(type, m);
      case `${WKT}ListValue`:
        return this.listValue(type, m);
      case `${WKT}Value`:
        return this.value(type, m);
      case `${WKT}Empty`:
        return {};
      case `${WKT}FieldMask`: {
        const paths = field(1);
        return (Array.isArray(paths) ? paths : [])
          .map((p) => String(p).replace(/_([a-z0-9])/g, (_s, c: string) => c.toUpperCase()))
          .join(',');
      }
      case `${WKT}Any`:
        return this.any(type, m);
      default:
        return undefined;
    }
  }

  private struct(structType: protobuf.Type, m: Readonly<Record<string, unknown>>): JsonObject {
    const valueType = typeById(structType, 1);
    const fields = asRecord(ownValue(m, nameById(structType, 1)));
    const out: JsonObject = {};
    for (const key of Object.keys(fields).sort()) {
      setJsonKey(out, key, this.value(valueType, asRecord(fields[key])));
    }
    return out;
  }

  private listValue(listType: protobuf.Type, m: Readonly<Record<string, unknown>>): JsonValue[] {
    const valueType = typeById(listType, 1);
    const values = ownValue(m, nameById(listType, 1));
    return (Array.isArray(values) ? values : []).map((v: unknown) => this.value(valueType, asRecord(v)));
  }

  private value(valueType: protobuf.Type, m: Readonly<Record<string, unknown>>): JsonValue {
    const kind = (id: number): unknown => ownValue(m, nameById(valueType, id));
    const has = (id: number): boolean => kind(id) !== undefined && kind(id) !== null;
    if (has(VALUE_NULL)) return null;
    if (has(VALUE_NUMBER)) {
      const n = kind(VALUE_NUMBER);
      if (typeof n !== 'number' || !Number.isFinite(n))
        fail('google.protobuf.Value holds a non-finite number');
      return n;
    }
    if (has(VALUE_STRING)) return String(kind(VALUE_STRING));
    if (has(VALUE_BOOL)) return kind(VALUE_BOOL) === true;
    if (has(VALUE_STRUCT))
      return this.struct(typeById(valueType, VALUE_STRUCT), asRecord(kind(VALUE_STRUCT)));
    if (has(VALUE_LIST)) return this.listValue(typeById(valueType, VALUE_LIST), asRecord(kind(VALUE_LIST)));
    return fail('google.protobuf.Value has none of its kinds set');
  }

  private any(anyType: protobuf.Type, m: Readonly<Record<string, unknown>>): JsonValue {
    const typeUrl = ownValue(m, nameById(anyType, 1));
    const bytes = ownValue(m, nameById(anyType, 2));
    if (typeof typeUrl !== 'string' || typeUrl === '') {
      if (bytes instanceof Uint8Array && bytes.length > 0)
        fail('google.protobuf.Any has a value but no type URL');
      return {};
    }
    const type = defaultAnyResolver(typeUrl) ?? fail(`google.protobuf.Any holds unknown type ${typeUrl}`);
    const inner = type.decode(bytes instanceof Uint8Array ? bytes : new Uint8Array(0));
    const json = this.message(type, inner);
    if (hasSpecialJson(type)) return { '@type': typeUrl, value: json };
    const out: JsonObject = { '@type': typeUrl };
    if (json !== null && typeof json === 'object' && !Array.isArray(json)) {
      for (const [k, v] of Object.entries(json)) setJsonKey(out, k, v);
    }
    return out;
  }
}

/**
 * The canonical proto3 JSON of a message, as Go's protojson prints it: lowerCamel names, fields
 * without presence left out at their default, enums by name, 64-bit integers as strings, and the
 * well-known types in their special forms. Accepts messages decoded by protobufjs and those built
 * by `fromProtoJson`. Throws a `DECODE` MeshmuxError where protojson would refuse (a Duration out
 * of range, a Value with no kind, an Any of an unknown type).
 */
export function toProtoJson(type: protobuf.Type, message: MessageLike): JsonValue {
  return new JsonWriter().message(type, message);
}

// ---------------------------------------------------------------------------------------------
// The checks of the JSON form, on a decoded message

/**
 * Prints, in the order `toProtoJson` walks a message, the parts whose JSON form is their own (the
 * well-known types): the only ones printing can fail on, and the only ones read back as JSON.
 */
class SpecialPrinter {
  private readonly writer = new JsonWriter();

  constructor(private readonly printed: Map<object, JsonValue>) {}

  message(type: protobuf.Type, m: Readonly<Record<string, unknown>>): void {
    if (hasSpecialJson(type)) {
      this.printed.set(m, this.writer.message(type, m));
      return;
    }
    for (const field of fieldsInOrder(type)) this.field(field, m);
  }

  /** The parts of `field` of `m` whose JSON form is their own. */
  field(field: protobuf.Field, m: Readonly<Record<string, unknown>>): void {
    const t = messageTypeOf(field);
    if (t === undefined) return;
    const v = ownValue(m, field.name);
    if (v === undefined || v === null) return;
    if (field.map) {
      const entries = asRecord(v);
      for (const key of Object.keys(entries).sort()) this.message(t, asRecord(entries[key]));
    } else if (field.repeated) {
      if (Array.isArray(v)) for (const item of v) this.message(t, asRecord(item));
    } else this.message(t, asRecord(v));
  }
}

/**
 * Walks a decoded message the way `JsonReader` walks its JSON form, reporting what it would:
 * alternatives set together, maps keyed by bool and floats printed beyond the float range; the
 * parts printed by {@link SpecialPrinter} are read back as JSON. (Integers decoded from bytes are
 * always in their type's range: protobufjs reads 64-bit ones as exact Longs.)
 */
class DecodedChecker {
  constructor(
    private readonly ctx: ProtoJsonContext,
    private readonly printed: ReadonlyMap<object, JsonValue>,
  ) {}

  private fail(path: string, reason: string): void {
    const err = new MeshmuxError('SCHEMA', reason, { field: path });
    if (this.ctx.errors === undefined) throw err;
    this.ctx.errors.push(err);
  }

  message(
    type: protobuf.Type,
    m: Readonly<Record<string, unknown>>,
    path: string,
    lists?: ReadonlyMap<protobuf.Field, MessageList>,
  ): void {
    if (hasSpecialJson(type)) {
      const json = this.printed.get(m) ?? new JsonWriter().message(type, m);
      new JsonReader(this.ctx).message(type, json, path);
      return;
    }
    let skipped: Set<protobuf.Field> | undefined;
    for (const oneof of type.oneofsArray) {
      if (oneof.fieldsArray.length < 2) continue;
      const set = oneof.fieldsArray.filter((f) => {
        const v = ownValue(m, f.name);
        return this.printedAs(f, v) === 'value';
      });
      if (set.length > 1) {
        this.fail(path, `only one of ${set.map(jsonNameOf).join(', ')} may be set (they are alternatives)`);
        skipped ??= new Set();
        for (const f of set) skipped.add(f);
      }
    }
    for (const field of fieldsInOrder(type)) {
      if (skipped?.has(field) === true) continue;
      const list = lists?.get(field);
      if (list !== undefined) {
        this.list(field, list, childPath(path, jsonNameOf(field)));
        continue;
      }
      const v = ownValue(m, field.name);
      const printed = this.printedAs(field, v);
      if (printed === 'absent') continue;
      const fieldPath = childPath(path, jsonNameOf(field));
      if (field.map) this.map(field, asRecord(v), fieldPath);
      else if (field.repeated) {
        (v as unknown[]).forEach((item, i) => this.singular(field, item, indexPath(fieldPath, i)));
      } else if (printed === 'value' || isValueType(messageTypeOf(field))) {
        this.singular(field, v, fieldPath);
      }
    }
  }

  /** A list held apart from its message: each element printed and checked on its own, then dropped. */
  private list(field: protobuf.Field, list: MessageList, path: string): void {
    const type = messageTypeOf(field) as protobuf.Type;
    for (let i = 0; i < list.length; i++) {
      const item = asRecord(list.at(i));
      const printed = new Map<object, JsonValue>();
      new SpecialPrinter(printed).message(type, item);
      new DecodedChecker(this.ctx, printed).message(type, item, indexPath(path, i));
    }
  }

  /** Whether the JSON form holds `field` (its value `v`), and whether as `null`. */
  private printedAs(field: protobuf.Field, v: unknown): 'absent' | 'null' | 'value' {
    if (v === undefined || v === null) return 'absent';
    if (field.map) return Object.keys(asRecord(v)).length === 0 ? 'absent' : 'value';
    if (field.repeated) return Array.isArray(v) && v.length > 0 ? 'value' : 'absent';
    if (!hasPresence(field) && isDefaultValue(field, v)) return 'absent';
    const e = enumTypeOf(field);
    if (e !== undefined) return fullNameOf(e) === `${WKT}NullValue` ? 'null' : 'value';
    const t = messageTypeOf(field);
    if (isValueType(t)) {
      const json = this.printed.get(asRecord(v));
      return json === null ? 'null' : 'value';
    }
    return 'value';
  }

  private map(field: protobuf.Field, entries: Readonly<Record<string, unknown>>, path: string): void {
    const keyType = field instanceof protobuf.MapField ? field.keyType : 'string';
    const keys = Object.keys(entries).map((key) => ({ key, json: jsonMapKey(field, key) }));
    keys.sort((a, b) => (a.json < b.json ? -1 : a.json > b.json ? 1 : 0));
    for (const { key, json } of keys) {
      const entryPath = childPath(path, json);
      if (keyType === 'bool') this.fail(entryPath, 'maps with bool keys are not supported');
      this.singular(field, entries[key], entryPath);
    }
  }

  /** A singular value, list element or map value; one printed as null is not checked, as in `JsonReader`. */
  private singular(field: protobuf.Field, v: unknown, path: string): void {
    const t = messageTypeOf(field);
    if (t !== undefined) {
      this.message(t, asRecord(v), path);
      return;
    }
    if (enumTypeOf(field) !== undefined) return;
    if (field.type === 'float') {
      const n = typeof v === 'number' ? v : 0;
      const printed = Number.isFinite(n) ? float32Number(n) : n;
      if (Number.isFinite(printed) && Math.abs(printed) > MAX_FLOAT32)
        this.fail(path, `${printed} is out of range for float`);
    }
  }
}

function isValueType(type: protobuf.Type | undefined): boolean {
  return type !== undefined && fullNameOf(type) === `${WKT}Value`;
}

/**
 * The elements of a list of messages, each decoded when it is asked for (a new object each time,
 * the caller's to drop): a large message's list need not be held whole to be checked.
 */
export interface MessageList {
  readonly length: number;
  at(index: number): MessageLike;
}

/**
 * What `fromProtoJson(type, toProtoJson(type, message), ctx)` reports, found on the decoded
 * `message` itself: the same errors, paths and order, and the same exception where printing the
 * JSON form fails, without building that form (only the well-known types, whose JSON is their
 * own, are printed and read back). For messages decoded from bytes.
 *
 * `lists` holds fields of `message` (top-level lists of messages) that it lacks and are checked
 * as if it held them, one element at a time; `type` then must not be a well-known type.
 */
export function checkDecodedAsJson(
  type: protobuf.Type,
  message: MessageLike,
  ctx: ProtoJsonContext = {},
  lists?: ReadonlyMap<protobuf.Field, MessageList>,
): void {
  const m = asRecord(message);
  if (lists === undefined || lists.size === 0) {
    const printed = new Map<object, JsonValue>();
    new SpecialPrinter(printed).message(type, m);
    new DecodedChecker(ctx, printed).message(type, m, ctx.path ?? '');
    return;
  }
  if (hasSpecialJson(type))
    throw new TypeError(`${type.fullName} is printed whole: it cannot hold lists apart`);
  // Printing throws on the first part that has no JSON form, before any check is reported: the
  // whole message is printed first, in order, its lists' elements one by one and then dropped.
  const printed = new Map<object, JsonValue>();
  const printer = new SpecialPrinter(printed);
  for (const field of fieldsInOrder(type)) {
    const list = lists.get(field);
    if (list === undefined) {
      printer.field(field, m);
      continue;
    }
    const t = messageTypeOf(field) as protobuf.Type;
    for (let i = 0; i < list.length; i++) new SpecialPrinter(new Map()).message(t, asRecord(list.at(i)));
  }
  new DecodedChecker(ctx, printed).message(type, m, ctx.path ?? '', lists);
}
