import type { JsonObject, JsonValue } from '../../schema/json-value.js';

/** An object as the Kubernetes API serves it (the parts meshmux reads). */
export interface KubernetesObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly resourceVersion?: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
    readonly creationTimestamp?: string;
    readonly [key: string]: unknown;
  };
  readonly spec?: unknown;
}

/** Bookkeeping of `kubectl apply`, not config. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * The config document an API object stands for: apiVersion, kind, spec and the metadata istiod
 * reads (name, namespace, labels, annotations without `kubectl apply`'s copy, creationTimestamp
 * which becomes `create_time`). managedFields, uid, resourceVersion and the rest are dropped.
 */
export function configDocument(object: KubernetesObject): JsonObject {
  const meta = object.metadata ?? {};
  const annotations = { ...meta.annotations };
  delete annotations[LAST_APPLIED_ANNOTATION];
  // Only the fields the object has: a field set to `undefined` is no JSON data (its text omits it).
  const metadata: JsonObject = {};
  if (meta.name !== undefined) metadata['name'] = meta.name;
  if (meta.namespace !== undefined) metadata['namespace'] = meta.namespace;
  if (meta.labels !== undefined && Object.keys(meta.labels).length > 0) metadata['labels'] = meta.labels;
  if (Object.keys(annotations).length > 0) metadata['annotations'] = annotations;
  if (meta.creationTimestamp !== undefined) metadata['creationTimestamp'] = meta.creationTimestamp;
  const document: JsonObject = {};
  if (object.apiVersion !== undefined) document['apiVersion'] = object.apiVersion;
  if (object.kind !== undefined) document['kind'] = object.kind;
  document['metadata'] = metadata;
  if (object.spec !== undefined) document['spec'] = object.spec as JsonValue;
  return document;
}

/**
 * The deepest nesting of objects and arrays an API object may have. Istio's kinds nest about 15
 * levels at most (an EnvoyFilter patch's `Struct` a few more); the API server itself accepts up to
 * 10,000, which is deep enough for `JSON.stringify` and the readers after it, each recursing once
 * per level, to exhaust the stack.
 */
export const MAX_OBJECT_DEPTH = 128;

/** What {@link inspectObject} found. */
export interface ObjectInspection {
  /** Where the object nests too deep (see {@link tooDeepAt}); undefined when it stays within. */
  readonly tooDeepAt: string | undefined;
  /**
   * Whether every number in it reads back the same from its JSON text. `JSON.parse` gives `-0`
   * for `-0` and an infinity for `1e400`, which that text writes as `0` and `null`.
   */
  readonly numbersAsWritten: boolean;
}

/**
 * Checks an object from the API server before it is read, in one walk without recursion and
 * without building anything: whether it nests more than `maxDepth` levels (the path is then found
 * by {@link tooDeepAt}), and whether it holds numbers that its JSON text writes otherwise.
 */
export function inspectObject(value: unknown, maxDepth: number): ObjectInspection {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  let numbersAsWritten = true;
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop() ?? 1;
    if (typeof v === 'number') {
      if (v === 0 ? Object.is(v, -0) : !Number.isFinite(v)) numbersAsWritten = false;
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth > maxDepth) return { tooDeepAt: tooDeepAt(value, maxDepth), numbersAsWritten };
    if (Array.isArray(v)) {
      for (const child of v as unknown[]) {
        values.push(child);
        depths.push(depth + 1);
      }
    } else {
      const object = v as Record<string, unknown>;
      for (const key in object) {
        values.push(object[key]);
        depths.push(depth + 1);
      }
    }
  }
  return { tooDeepAt: undefined, numbersAsWritten };
}

/** How many leading segments of a too-deep path an error shows, and how much of each. */
const SHOWN_PATH_SEGMENTS = 8;
const SHOWN_KEY_CHARS = 64;

/**
 * Where `value` nests more than `maxDepth` levels of objects and arrays (the value itself is level
 * 1): the path of the first value past the limit, its first segments then `…` (`spec.x.a.a…`), or
 * undefined when it stays within. Walks with a stack of its own, never recursion, so it measures
 * any depth without exhausting the call stack, and it stops at the first value too deep.
 */
export function tooDeepAt(value: unknown, maxDepth: number): string | undefined {
  interface Step {
    readonly value: unknown;
    readonly depth: number;
    readonly key: string;
    readonly parent: Step | undefined;
  }
  const stack: Step[] = [{ value, depth: 1, key: '', parent: undefined }];
  for (let step = stack.pop(); step !== undefined; step = stack.pop()) {
    if (typeof step.value !== 'object' || step.value === null) continue;
    if (step.depth > maxDepth) return shownPath(step);
    const entries: [string, unknown][] = Array.isArray(step.value)
      ? step.value.map((v, i) => [`[${i}]`, v])
      : Object.entries(step.value).map(([k, v]) => [k, v]);
    for (const [key, child] of entries)
      stack.push({ value: child, depth: step.depth + 1, key, parent: step });
  }
  return undefined;

  function shownPath(last: Step): string {
    const keys: string[] = [];
    for (let s: Step | undefined = last; s?.parent !== undefined; s = s.parent) {
      keys.push(s.key.length > SHOWN_KEY_CHARS ? `${s.key.slice(0, SHOWN_KEY_CHARS)}…` : s.key);
    }
    keys.reverse();
    const shown = keys
      .slice(0, SHOWN_PATH_SEGMENTS)
      .map((k, i) => (i === 0 || k.startsWith('[') ? k : `.${k}`))
      .join('');
    return keys.length > SHOWN_PATH_SEGMENTS ? `${shown}…` : shown;
  }
}
