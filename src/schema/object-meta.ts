/**
 * The part of Kubernetes' ObjectMeta that reaches istiod: name, namespace, labels, annotations and
 * creation time, validated as the Kubernetes API server would validate them.
 */
import { MeshmuxError } from '../core/errors.js';
import type { Timestamp } from '../core/resource.js';
import { childPath } from './field-path.js';
import { describeJsonType, isPlainObject, ownValue, setJsonKey } from './json-value.js';
import {
  MAX_ANNOTATIONS_BYTES,
  checkDns1123Label,
  checkDns1123Subdomain,
  checkLabelValue,
  checkQualifiedName,
} from './kubernetes-names.js';
import { parseRfc3339 } from './rfc3339.js';

/** Validated metadata. Maps are fresh objects owned by the caller. */
export interface ObjectMeta {
  readonly name: string;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  /** From `creationTimestamp`; undefined when the document has none (or has `null`, as kubectl prints). */
  readonly creationTimestamp: Timestamp | undefined;
}

function metaError(field: string, reason: string): MeshmuxError {
  return new MeshmuxError('METADATA', reason, { field });
}

function stringMap(
  value: unknown,
  path: string,
  errors: MeshmuxError[],
  check: (key: string, value: string) => string | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === undefined || value === null) return out;
  if (!isPlainObject(value)) {
    errors.push(metaError(path, `expected a map of strings, got ${describeJsonType(value)}`));
    return out;
  }
  for (const key of Object.keys(value)) {
    const v = value[key];
    const at = childPath(path, key);
    if (typeof v !== 'string') {
      // The API server rejects numbers and booleans here; YAML needs quotes for "1.0", "true", "on".
      errors.push(metaError(at, `expected a string, got ${describeJsonType(v)}; quote the value`));
      continue;
    }
    const bad = check(key, v);
    if (bad !== undefined) errors.push(metaError(at, bad));
    else setJsonKey(out, key, v);
  }
  return out;
}

function checkName(name: string, errors: MeshmuxError[], warnings: MeshmuxError[]): void {
  const bad = checkDns1123Subdomain(name);
  if (bad !== undefined && checkDns1123Subdomain(name.toLowerCase()) === undefined) {
    // Istio reads upper-case names from files (its own test data has them) and istiod serves
    // them, but the Kubernetes API server would refuse them: accept, and say so.
    warnings.push(metaError('metadata.name', `${bad}; accepted because Istio tolerates upper case in names`));
  } else if (bad !== undefined) {
    errors.push(metaError('metadata.name', bad));
  }
}

function checkNamespace(namespace: string, errors: MeshmuxError[]): void {
  const bad = checkDns1123Label(namespace);
  if (bad !== undefined) errors.push(metaError('metadata.namespace', bad));
}

/** Label keys found good, at most {@link MAX_GOOD_LABEL_KEYS}: a few keys label nearly every object. */
const goodLabelKeys = new Set<string>();
const MAX_GOOD_LABEL_KEYS = 1024;

function labelProblem(key: string, value: string): string | undefined {
  if (!goodLabelKeys.has(key)) {
    const bad = checkQualifiedName(key);
    if (bad !== undefined) return bad;
    if (goodLabelKeys.size < MAX_GOOD_LABEL_KEYS) goodLabelKeys.add(key);
  }
  return checkLabelValue(value);
}

function annotationKeyProblem(key: string): string | undefined {
  return checkQualifiedName(key.toLowerCase());
}

/** The bytes an annotation counts toward the API server's bound: its key and its value. */
function annotationBytes(key: string, value: string): number {
  return Buffer.byteLength(key) + Buffer.byteLength(value);
}

/** `bytes` of annotations within the API server's bound. */
function checkAnnotationsSize(bytes: number, errors: MeshmuxError[]): void {
  if (bytes > MAX_ANNOTATIONS_BYTES) {
    errors.push(
      metaError('metadata.annotations', `annotations total ${bytes} bytes, more than the 256 KiB allowed`),
    );
  }
}

/**
 * The checks of {@link readObjectMeta} on metadata that is typed already (an upstream envelope's
 * name, namespace and string maps): the same rules and the same errors, with nothing built on the
 * way (no maps copied, no field paths) unless something fails.
 */
export function checkTypedMeta(
  meta: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
  },
  errors: MeshmuxError[],
  warnings: MeshmuxError[],
): void {
  if (meta.name === '') errors.push(metaError('metadata.name', 'metadata.name is required'));
  else checkName(meta.name, errors, warnings);
  checkNamespace(meta.namespace, errors);
  // for-in, not a list of keys: the maps are plain records, and this runs for every object read.
  for (const key in meta.labels) {
    const bad = labelProblem(key, meta.labels[key] as string);
    if (bad !== undefined) errors.push(metaError(childPath('metadata.labels', key), bad));
  }
  // Counted over the annotations that pass, as readObjectMeta counts the map it keeps.
  let bytes = 0;
  for (const key in meta.annotations) {
    const value = meta.annotations[key] as string;
    const bad = annotationKeyProblem(key);
    if (bad === undefined) bytes += annotationBytes(key, value);
    else errors.push(metaError(childPath('metadata.annotations', key), bad));
  }
  checkAnnotationsSize(bytes, errors);
}

/**
 * Reads and validates `metadata`. `name` is required and must be a DNS-1123 subdomain (upper-case
 * letters only earn a warning, as Istio itself accepts them from files); `namespace`
 * defaults to `defaultNamespace` (an empty string counts as absent) and must be a DNS-1123 label;
 * label keys and values and annotation keys follow Kubernetes' rules. Other fields are ignored.
 * Problems are appended to `errors` (and tolerated oddities to `warnings`) as `METADATA` errors
 * with the field path; the result is undefined when any error was added.
 */
export function readObjectMeta(
  metadata: unknown,
  defaultNamespace: string,
  errors: MeshmuxError[],
  warnings: MeshmuxError[],
): ObjectMeta | undefined {
  const before = errors.length;
  if (metadata !== undefined && metadata !== null && !isPlainObject(metadata)) {
    errors.push(metaError('metadata', `expected an object, got ${describeJsonType(metadata)}`));
    return undefined;
  }
  const meta = metadata ?? {};

  const name = ownValue(meta, 'name');
  if (name === undefined || name === null || name === '') {
    errors.push(metaError('metadata.name', 'metadata.name is required'));
  } else if (typeof name !== 'string') {
    errors.push(metaError('metadata.name', `expected a string, got ${describeJsonType(name)}`));
  } else {
    checkName(name, errors, warnings);
  }

  let namespace = ownValue(meta, 'namespace');
  if (namespace === undefined || namespace === null || namespace === '') namespace = defaultNamespace;
  if (typeof namespace !== 'string') {
    errors.push(metaError('metadata.namespace', `expected a string, got ${describeJsonType(namespace)}`));
  } else {
    checkNamespace(namespace, errors);
  }

  const labels = stringMap(ownValue(meta, 'labels'), 'metadata.labels', errors, labelProblem);
  const annotations = stringMap(ownValue(meta, 'annotations'), 'metadata.annotations', errors, (k) =>
    annotationKeyProblem(k),
  );
  let bytes = 0;
  for (const key of Object.keys(annotations)) bytes += annotationBytes(key, annotations[key] as string);
  checkAnnotationsSize(bytes, errors);

  let creationTimestamp: Timestamp | undefined;
  const created = ownValue(meta, 'creationTimestamp');
  if (typeof created === 'string') {
    const parsed = parseRfc3339(created);
    if (parsed.ok) creationTimestamp = parsed.timestamp;
    else errors.push(metaError('metadata.creationTimestamp', parsed.reason));
  } else if (created !== undefined && created !== null) {
    errors.push(
      metaError(
        'metadata.creationTimestamp',
        `expected an RFC 3339 timestamp, got ${describeJsonType(created)}`,
      ),
    );
  }

  if (errors.length > before || typeof name !== 'string' || typeof namespace !== 'string') return undefined;
  return { name, namespace, labels, annotations, creationTimestamp };
}
