import { ChunkedList } from '../core/chunked-list.js';
import { compareByName, type ConfigResource } from '../core/resource.js';
import type { KindSnapshot } from './config-snapshot.js';

/**
 * Objects no longer served and objects newly served between two snapshots of a kind, in served
 * order. Shared between whoever asks for the same two snapshots: not to be altered.
 */
export interface KindDifference {
  readonly removed: readonly ConfigResource[];
  readonly added: readonly ConfigResource[];
}

const NOTHING: KindDifference = Object.freeze({ removed: Object.freeze([]), added: Object.freeze([]) });

/**
 * The last difference walked out to each snapshot, with the snapshot it was walked from: the ADS
 * server, the metrics and each view ask for the same pair after a change the merge kept no change
 * set for (a first sync), and one walk of both lists answers them all. Snapshots never change, so
 * an answer found here is the walk's.
 */
const walked = new WeakMap<
  KindSnapshot,
  { readonly from: KindSnapshot; readonly difference: KindDifference }
>();

/**
 * What changed from `before` to `after` (either absent: the kind had no objects). When `after`
 * carries the merge's own change set and it leads from `before`, that is the answer, in
 * O(changed); otherwise both lists are walked in step.
 */
export function changesBetween(
  before: KindSnapshot | undefined,
  after: KindSnapshot | undefined,
): KindDifference {
  if (before === after) return NOTHING;
  if (before === undefined) return { removed: [], added: after?.resources ?? [] };
  if (after === undefined) return { removed: before.resources, added: [] };
  if (sameList(before, after)) return NOTHING;
  const changes = after.changes;
  if (changes !== undefined && before.serial !== undefined && changes.from === before.serial) return changes;
  const known = walked.get(after);
  if (known?.from === before) return known.difference;
  // Lists in chunks are compared only where their chunks differ: a change leaves the others shared.
  const [was, now] = ChunkedList.unshared(before.list ?? before.resources, after.list ?? after.resources);
  const difference = diffSorted(was, now);
  walked.set(after, { from: before, difference });
  return difference;
}

/** Whether two snapshots of a kind hold the same list (compared by identity, never walked). */
function sameList(a: KindSnapshot, b: KindSnapshot): boolean {
  // The chunked lists when both have them: their arrays are built only when asked for.
  if (a.list !== undefined && b.list !== undefined) return a.list === b.list;
  return a.resources === b.resources;
}

/**
 * The objects in only one of two lists sorted by namespace and name. Identical instances are
 * skipped with a pointer comparison, so two lists that differ by a few objects cost O(n) pointer
 * comparisons and O(changes) key comparisons.
 */
export function diffSorted(
  before: readonly ConfigResource[],
  after: readonly ConfigResource[],
): KindDifference {
  const removed: ConfigResource[] = [];
  const added: ConfigResource[] = [];
  let i = 0;
  let j = 0;
  while (i < before.length && j < after.length) {
    const a = before[i] as ConfigResource;
    const b = after[j] as ConfigResource;
    if (a === b) {
      i++;
      j++;
      continue;
    }
    const c = compareByName(a, b);
    if (c <= 0) {
      removed.push(a);
      i++;
    }
    if (c >= 0) {
      added.push(b);
      j++;
    }
  }
  for (; i < before.length; i++) removed.push(before[i] as ConfigResource);
  for (; j < after.length; j++) added.push(after[j] as ConfigResource);
  return { removed, added };
}
