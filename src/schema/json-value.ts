/**
 * The JSON data model shared by the YAML reader and the proto3 JSON codec, and the helpers that
 * keep user-chosen keys (`__proto__`, `constructor`) from touching object prototypes.
 */

/** A JSON value as JSON.parse returns it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;

/** A JSON object. Build it with `setJsonKey`, never by plain assignment of user keys. */
export interface JsonObject {
  [key: string]: JsonValue;
}

/** True for plain objects (not arrays, not class instances such as Uint8Array or Date). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Sets an own, enumerable property even when the key is `__proto__`, so data keys can never change
 * an object's prototype. Returns the object for chaining.
 */
export function setJsonKey<T extends object>(target: T, key: string, value: unknown): T {
  // Only `__proto__` is an accessor on Object.prototype; every other key assigns an own property,
  // and plain assignment keeps the object fast (a defined property per key turns it into a dictionary).
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else (target as Record<string, unknown>)[key] = value;
  return target;
}

/** The value's own property `key`, or undefined; never reads through the prototype chain. */
export function ownValue(obj: Readonly<Record<string, unknown>>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}

/** How a value reads in an error message: `a string`, `a list`, `an object`, `null`, ... */
export function describeJsonType(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') {
    return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`;
  }
  if (typeof value === 'number' || typeof value === 'bigint') return `a number (${value.toString()})`;
  if (typeof value === 'boolean') return `a boolean (${String(value)})`;
  return typeof value === 'object' ? 'an object' : typeof value;
}
