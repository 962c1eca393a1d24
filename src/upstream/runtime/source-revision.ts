import { linesDigest } from '../../core/content-digest.js';
import type { ReadList } from '../../core/chunked-list.js';
import { isContentVersion, type ConfigResource } from '../../core/resource.js';

/**
 * What names an object and its content in a revision: its version when that is a content version
 * (a hash of kind, namespace, name and content already), else its `kind|namespace/name@version`
 * line, which no content version can equal (those hold neither `|` nor `@`).
 */
function idsOf(resources: ReadList<ConfigResource>): string[] {
  const ids = new Array<string>(resources.length);
  for (let i = 0; i < resources.length; i++) {
    const r = resources.at(i) as ConfigResource;
    ids[i] = isContentVersion(r.version) ? r.version : `${r.kind}|${r.namespace}/${r.name}@${r.version}`;
  }
  return ids;
}

/**
 * A content hash over a set of objects, independent of their order: the same objects give the
 * same revision on every replica and after every restart.
 */
export function revisionOf(resources: ReadList<ConfigResource>): string {
  return linesDigest(idsOf(resources).sort());
}

/**
 * A content hash over a list of objects in its order: for a list whose order decides what is
 * served (a file defining one object twice serves the later).
 */
export function sequenceRevision(resources: readonly ConfigResource[]): string {
  return linesDigest(idsOf(resources));
}
