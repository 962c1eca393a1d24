import type { ConfigResource } from '../core/resource.js';

/** How far a walk in step looks ahead to re-align two lists after a difference. */
const REALIGN_WINDOW = 16;

/** What two lists of objects differ in, by identity. */
export interface IdentityDiff {
  /** Instances only in the later list, in its order. */
  readonly added: ConfigResource[];
  /** Instances only in the earlier list, in its order. */
  readonly vanished: ConfigResource[];
}

/**
 * The instances only in `before` and only in `after`, compared by identity (never by content).
 * Walks both lists in step, re-aligning within a small window after each difference (O(n)
 * pointer comparisons when the order is kept); when the lists do not re-align, falls back to
 * sets. Reads neither list's objects; alters neither list.
 */
export function diffByIdentity(
  before: readonly ConfigResource[],
  after: readonly ConfigResource[],
): IdentityDiff {
  const added: ConfigResource[] = [];
  const vanished: ConfigResource[] = [];
  const stuck = walkInStep(before, after, (j, removed, i, inserted) => {
    for (let k = 0; k < inserted; k++) added.push(after[i + k] as ConfigResource);
    for (let k = 0; k < removed; k++) vanished.push(before[j + k] as ConfigResource);
    return true;
  });
  if (stuck !== undefined) {
    const [j, i] = stuck;
    const was = new Set(before.slice(j));
    const now = new Set(after.slice(i));
    for (const r of after.slice(i)) if (!was.has(r)) added.push(r);
    for (const r of before.slice(j)) if (!now.has(r)) vanished.push(r);
  }
  return { added, vanished };
}

/**
 * Walks both lists in step, re-aligning within {@link REALIGN_WINDOW} after each difference, and
 * calls `differ(j, removed, i, inserted)` for each run that differs: `removed` objects of `before`
 * from `j`, `inserted` of `after` from `i` (the last run: what is left of either list). `differ`
 * returns false to stop the walk. Returns where the lists stopped agreeing for good (`[j, i]`), or
 * undefined when the walk reached both ends or was stopped.
 */
function walkInStep(
  before: readonly ConfigResource[],
  after: readonly ConfigResource[],
  differ: (j: number, removed: number, i: number, inserted: number) => boolean,
): readonly [number, number] | undefined {
  let i = 0;
  let j = 0;
  while (i < after.length && j < before.length) {
    if (after[i] === before[j]) {
      i++;
      j++;
      continue;
    }
    const skip = realign(before, after, j, i);
    if (skip === undefined) return [j, i];
    const [b, a] = skip;
    if (!differ(j, b, i, a)) return undefined;
    i += a;
    j += b;
  }
  if (i < after.length || j < before.length) differ(j, before.length - j, i, after.length - i);
  return undefined;
}

/**
 * After `before[j]` and `after[i]` differ: how many objects of each to skip (`[fromBefore,
 * fromAfter]`, fewest in all first) for the two to agree again, looking at most
 * {@link REALIGN_WINDOW} ahead; undefined when they do not agree within it. Both lists ending
 * counts as agreeing: a difference in their last objects is one last run, not a walk stuck.
 */
function realign(
  before: readonly ConfigResource[],
  after: readonly ConfigResource[],
  j: number,
  i: number,
): readonly [number, number] | undefined {
  for (let d = 1; d <= REALIGN_WINDOW; d++) {
    for (let a = 0; a <= d; a++) {
      const b = d - a;
      if (i + a === after.length && j + b === before.length) return [b, a];
      if (i + a < after.length && j + b < before.length && after[i + a] === before[j + b]) return [b, a];
    }
  }
  return undefined;
}

/** At position `at` of a list, `removed` objects give way to `inserted` others. */
export interface ListSplice {
  readonly at: number;
  readonly removed: number;
  readonly inserted: number;
}

/**
 * The splices that turn `before` into `after`, compared by identity, in ascending order, and the
 * objects they insert, in order: the walk of {@link diffByIdentity}, keeping positions. Undefined
 * when the lists do not re-align after a difference, or when more than `most` objects would be
 * inserted.
 */
export function identitySplices(
  before: readonly ConfigResource[],
  after: readonly ConfigResource[],
  most: number,
): { readonly splices: ListSplice[]; readonly inserted: ConfigResource[] } | undefined {
  const splices: ListSplice[] = [];
  const inserted: ConfigResource[] = [];
  let tooMany = false;
  const stuck = walkInStep(before, after, (j, removed, i, count) => {
    splices.push({ at: j, removed, inserted: count });
    for (let k = 0; k < count; k++) inserted.push(after[i + k] as ConfigResource);
    tooMany = inserted.length > most;
    return !tooMany;
  });
  return stuck !== undefined || tooMany ? undefined : { splices, inserted };
}
