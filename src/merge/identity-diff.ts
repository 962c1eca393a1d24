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
  let i = 0;
  let j = 0;
  while (i < after.length && j < before.length) {
    if (after[i] === before[j]) {
      i++;
      j++;
      continue;
    }
    let aligned = false;
    for (let d = 1; d <= REALIGN_WINDOW && !aligned; d++) {
      for (let a = 0; a <= d; a++) {
        const b = d - a;
        if (i + a < after.length && j + b < before.length && after[i + a] === before[j + b]) {
          for (let k = 0; k < a; k++) added.push(after[i + k] as ConfigResource);
          for (let k = 0; k < b; k++) vanished.push(before[j + k] as ConfigResource);
          i += a;
          j += b;
          aligned = true;
          break;
        }
      }
    }
    if (!aligned) {
      const was = new Set(before.slice(j));
      const now = new Set(after.slice(i));
      for (const r of after.slice(i)) if (!was.has(r)) added.push(r);
      for (const r of before.slice(j)) if (!now.has(r)) vanished.push(r);
      return { added, vanished };
    }
  }
  for (; i < after.length; i++) added.push(after[i] as ConfigResource);
  for (; j < before.length; j++) vanished.push(before[j] as ConfigResource);
  return { added, vanished };
}
