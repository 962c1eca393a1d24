import { linesDigest } from '../../core/content-digest.js';
import type { ConfigResource } from '../../core/resource.js';

/** A content hash over a set of objects, independent of their order. */
export function revisionOf(resources: readonly ConfigResource[]): string {
  return linesDigest(resources.map((r) => `${r.kind}|${r.namespace}/${r.name}@${r.version}`).sort());
}
