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
export function configDocument(object: KubernetesObject): Record<string, unknown> {
  const meta = object.metadata ?? {};
  const annotations = { ...meta.annotations };
  delete annotations[LAST_APPLIED_ANNOTATION];
  const metadata: Record<string, unknown> = { name: meta.name };
  if (meta.namespace !== undefined) metadata['namespace'] = meta.namespace;
  if (meta.labels !== undefined && Object.keys(meta.labels).length > 0) metadata['labels'] = meta.labels;
  if (Object.keys(annotations).length > 0) metadata['annotations'] = annotations;
  if (meta.creationTimestamp !== undefined) metadata['creationTimestamp'] = meta.creationTimestamp;
  const document: Record<string, unknown> = { apiVersion: object.apiVersion, kind: object.kind, metadata };
  if (object.spec !== undefined) document['spec'] = object.spec;
  return document;
}

/**
 * The deepest nesting of objects and arrays an API object may have. Istio's kinds nest about 15
 * levels at most (an EnvoyFilter patch's `Struct` a few more); the API server itself accepts up to
 * 10,000, which is deep enough for `JSON.stringify` and the readers after it, each recursing once
 * per level, to exhaust the stack.
 */
export const MAX_OBJECT_DEPTH = 128;

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
