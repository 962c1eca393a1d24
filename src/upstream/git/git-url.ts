import { createHash } from 'node:crypto';

/** A full commit id (SHA-1 or SHA-256 object format). */
const COMMIT_ID = /^([0-9a-f]{40}|[0-9a-f]{64})$/;

/** Whether a configured ref is a full commit id rather than a branch or tag name. */
export function isCommitId(ref: string): boolean {
  return COMMIT_ID.test(ref);
}

/**
 * The URL as it may be logged: a password, and any user name of an http(s) URL (where tokens are
 * often put), become `***`, and a query string is dropped. ssh user names (`git@`) stay.
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url; // scp-like `user@host:path`: no secret can hide in it
  }
  if (parsed.password !== '') parsed.password = '***';
  if (parsed.username !== '' && /^https?:$/.test(parsed.protocol)) parsed.username = '***';
  if (parsed.search !== '') parsed.search = '';
  return parsed.toString();
}

/** Replaces every occurrence of each secret (and of the raw URL) in a text with its masked form. */
export function secretRedactor(url: string, secrets: readonly string[]): (text: string) => string {
  const safeUrl = redactUrl(url);
  const pairs: Array<[string, string]> = [[url, safeUrl]];
  for (const s of secrets) if (s.length >= 4) pairs.push([s, '***']);
  return (text) => {
    let out = text;
    for (const [from, to] of pairs) out = out.split(from).join(to);
    return out;
  };
}

/**
 * The folder name of a URL's shared bare repository: a readable slug of host and path plus a
 * hash of the exact URL, so two URLs never share a folder and a human can still tell them apart.
 */
export function mirrorFolderName(url: string): string {
  const hash = createHash('sha256').update(url).digest('hex').slice(0, 16);
  const slug = redactUrl(url)
    .replace(/^[a-z+]+:\/\//, '')
    .replace(/^[^@/]*@/, '')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
    .slice(-48);
  return `${slug === '' ? 'repo' : slug}-${hash}.git`;
}
