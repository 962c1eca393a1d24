/**
 * Kubernetes' rules for object names, namespaces, label and annotation keys and label values
 * (apimachinery's validation). Each check returns the reason a value is invalid, or undefined.
 */

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Kubernetes' limit on the summed size of one object's annotation keys and values. */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** A DNS-1123 label (namespaces): lower-case alphanumerics and `-`, at most 63 characters. */
export function checkDns1123Label(value: string): string | undefined {
  if (value.length > 63) return `${JSON.stringify(value)} is longer than 63 characters`;
  if (!DNS1123_LABEL.test(value)) {
    return `${JSON.stringify(value)} is not a DNS-1123 label: use lower-case letters, digits and '-', starting and ending with a letter or digit`;
  }
  return undefined;
}

/** A DNS-1123 subdomain (object names): labels joined by `.`, at most 253 characters. */
export function checkDns1123Subdomain(value: string): string | undefined {
  if (value.length > 253) return `${JSON.stringify(value)} is longer than 253 characters`;
  if (!DNS1123_SUBDOMAIN.test(value)) {
    return `${JSON.stringify(value)} is not a DNS-1123 subdomain: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit`;
  }
  return undefined;
}

/** A qualified name (label and annotation keys): `[prefix/]name`, prefix a DNS-1123 subdomain. */
export function checkQualifiedName(key: string): string | undefined {
  const parts = key.split('/');
  if (parts.length > 2) return `key ${JSON.stringify(key)} has more than one '/'`;
  const name = parts.length === 2 ? (parts[1] ?? '') : key;
  if (parts.length === 2) {
    const prefix = parts[0] ?? '';
    if (prefix === '') return `key ${JSON.stringify(key)} has an empty prefix before '/'`;
    const bad = checkDns1123Subdomain(prefix);
    if (bad !== undefined) return `the prefix of key ${JSON.stringify(key)}: ${bad}`;
  }
  if (name === '') return `key ${JSON.stringify(key)} has an empty name`;
  if (name.length > 63) return `key ${JSON.stringify(key)}: the name part is longer than 63 characters`;
  if (!QUALIFIED_NAME_PART.test(name)) {
    return `key ${JSON.stringify(key)}: the name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}

/** A label value: empty, or at most 63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric. */
export function checkLabelValue(value: string): string | undefined {
  if (value.length > 63) return `value ${JSON.stringify(value)} is longer than 63 characters`;
  if (!LABEL_VALUE.test(value)) {
    return `value ${JSON.stringify(value)} must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}
