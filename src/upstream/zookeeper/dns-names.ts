import { createHash } from 'node:crypto';

/** Istio's (and Kubernetes') DNS-1123 label: lower-case letters, digits and `-`, 1–63 chars. */
const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const MAX_LABEL = 63;
/** Kubernetes object names (DNS-1123 subdomain). */
export const MAX_OBJECT_NAME = 253;
/** Istio's limit on a host name. */
const MAX_HOST = 255;

/** Eight hex digits of SHA-256: the disambiguator appended when a name must be shortened. */
export function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/**
 * Cuts `text` (already made of `[a-z0-9.-]`) to at most `max` characters, ending in a letter or
 * digit. Longer text keeps a prefix and a hash of the whole, so different long inputs stay different.
 */
export function boundedName(text: string, max: number): string {
  if (text.length <= max) return text;
  const suffix = 9; // '-' and eight hex digits
  let head = text.slice(0, max - suffix);
  // The hash joins the last label, which must stay within 63 characters.
  const lastLabelStart = head.lastIndexOf('.') + 1;
  head = head.slice(0, lastLabelStart + Math.min(head.length - lastLabelStart, MAX_LABEL - suffix));
  head = head.replace(/[^a-z0-9]+$/, '');
  return `${head}-${shortHash(text)}`;
}

/**
 * One DNS label from free text: lower-cased, every run of other characters (dots included)
 * turned into one `-`, no `-` at either end, at most 63 characters. Empty input gives ''.
 */
export function dnsLabel(text: string): string {
  const label = text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return boundedName(label, MAX_LABEL);
}

/** A dotted name (a Java interface) as DNS labels: each `.`-separated part through {@link dnsLabel}; empty parts dropped. */
export function dnsPath(text: string): string {
  return text
    .split('.')
    .map(dnsLabel)
    .filter((l) => l !== '')
    .join('.');
}

/**
 * Why Istio's validation would reject `host` as a ServiceEntry host (FQDN rules: at most 255
 * characters, every label a DNS-1123 label, a top-level label that is not all digits, no
 * wildcard), or undefined when it is valid.
 */
export function istioHostProblem(host: string): string | undefined {
  if (host === '') return 'the host is empty';
  if (host.length > MAX_HOST) return `host "${host}" is longer than ${MAX_HOST} characters`;
  const labels = host.split('.');
  const top = labels[labels.length - 1] ?? '';
  if (/^\d+$/.test(top)) return `host "${host}" has an all-numeric top-level label "${top}"`;
  for (const label of labels) {
    if (!DNS_1123_LABEL.test(label) || label.length > MAX_LABEL) {
      return `host "${host}" has an invalid DNS label "${label}"`;
    }
  }
  return undefined;
}

/** Whether `name` is a valid Kubernetes object name (DNS-1123 subdomain). */
export function isDns1123Subdomain(name: string): boolean {
  return (
    name.length > 0 &&
    name.length <= MAX_OBJECT_NAME &&
    name.split('.').every((l) => l.length <= MAX_LABEL && DNS_1123_LABEL.test(l))
  );
}
