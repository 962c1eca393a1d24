/** A label name, and a non-empty label value: alphanumeric at both ends, `-`, `_`, `.` inside, ≤63. */
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_PREFIX = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const MAX_NAME = 63;
const MAX_PREFIX = 253;

/**
 * Replaces characters a label name or value cannot hold with `-` and trims non-alphanumeric ends.
 * The ends are found by a scan from each side: a pattern anchored at the end, tried at every
 * character of a long run of `-`, `_` or `.` inside the text, took time in the square of its
 * length (a provider's parameter of 150,000 characters held the process for some 50 s).
 */
function repair(text: string): string {
  const repaired = text.replace(/[^A-Za-z0-9_.-]+/g, '-');
  let from = 0;
  let to = repaired.length;
  while (from < to && !isAlphanumeric(repaired.charCodeAt(from))) from++;
  while (to > from && !isAlphanumeric(repaired.charCodeAt(to - 1))) to--;
  return from === 0 && to === repaired.length ? repaired : repaired.slice(from, to);
}

function isAlphanumeric(code: number): boolean {
  return (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122);
}

/**
 * A valid Kubernetes label key for `raw` (`[prefix/]name`), repairing characters a key cannot
 * hold; undefined when no key can be made without losing meaning (empty, or too long: a
 * shortened key would be a different key).
 */
export function labelKey(raw: string): string | undefined {
  const slash = raw.lastIndexOf('/');
  const prefix = slash < 0 ? undefined : raw.slice(0, slash).toLowerCase();
  const name = repair(slash < 0 ? raw : raw.slice(slash + 1));
  if (name === '' || name.length > MAX_NAME || !LABEL_NAME.test(name)) return undefined;
  if (prefix === undefined) return name;
  if (prefix.length > MAX_PREFIX || !LABEL_PREFIX.test(prefix)) return undefined;
  return `${prefix}/${name}`;
}

/**
 * A valid Kubernetes label value for `raw`, repairing characters a value cannot hold (a method
 * list `a,b` becomes `a-b`); undefined when it would be longer than 63 characters, or when only
 * invalid characters made it up.
 */
export function labelValue(raw: string): string | undefined {
  if (raw === '') return '';
  const value = repair(raw);
  if (value === '' || value.length > MAX_NAME || !LABEL_NAME.test(value)) return undefined;
  return value;
}

/**
 * Labels from URL parameters: each accepted key and its value made valid, or the pair dropped.
 * When two keys repair to the same key, the one already valid wins, then the first in order.
 * The result has sorted keys, so equal inputs give equal bytes.
 */
export function labelsFromParameters(
  params: Readonly<Record<string, string>>,
  accept: (key: string) => boolean,
): Record<string, string> {
  const chosen = new Map<string, { readonly raw: string; readonly value: string }>();
  for (const raw of Object.keys(params).sort()) {
    if (!accept(raw)) continue;
    const key = labelKey(raw);
    const value = labelValue(params[raw] ?? '');
    if (key === undefined || value === undefined) continue;
    const earlier = chosen.get(key);
    if (earlier !== undefined && (earlier.raw === key || raw !== key)) continue;
    chosen.set(key, { raw, value });
  }
  const out: Record<string, string> = {};
  for (const key of [...chosen.keys()].sort()) out[key] = chosen.get(key)?.value ?? '';
  return out;
}
