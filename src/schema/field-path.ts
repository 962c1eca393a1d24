/**
 * Field paths as printed in errors and warnings: `spec.http[0].route[1].destination.host`,
 * `metadata.labels["app.kubernetes.io/name"]`.
 */

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `base.key`, or `base["key"]` when the key is not a plain identifier; `key` alone when base is empty. */
export function childPath(base: string, key: string): string {
  if (IDENTIFIER.test(key)) return base === '' ? key : `${base}.${key}`;
  return `${base}[${JSON.stringify(key)}]`;
}

/** `base[index]`. */
export function indexPath(base: string, index: number): string {
  return `${base}[${index}]`;
}

/** `path` without the leading `prefix.` (or `prefix[`), for paths relative to a document part. */
export function relativePath(path: string, prefix: string): string {
  if (prefix === '') return path;
  if (path === prefix) return '';
  if (path.startsWith(`${prefix}.`)) return path.slice(prefix.length + 1);
  if (path.startsWith(`${prefix}[`)) return path.slice(prefix.length);
  return path;
}
