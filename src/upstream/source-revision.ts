import { createHash } from 'node:crypto';
import type { ConfigResource } from '../core/resource.js';

/** A content hash over a set of objects, independent of their order. */
export function revisionOf(resources: readonly ConfigResource[]): string {
  const lines = resources.map((r) => `${r.kind}|${r.namespace}/${r.name}@${r.version}`).sort();
  const h = createHash('sha256');
  for (const line of lines) h.update(`${line}\n`);
  return h.digest('base64url').slice(0, 16);
}
