/**
 * The first index of `sorted` (ascending, as `<` orders its values: numbers, or strings as
 * `Array.prototype.sort` orders them) whose value is `value` or more; `sorted.length` when none
 * is. By halves: O(log n).
 */
export function firstAtOrAfter<T extends number | string>(sorted: readonly T[], value: T): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((sorted[middle] as T) < value) low = middle + 1;
    else high = middle;
  }
  return low;
}
