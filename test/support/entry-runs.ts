import type { ResponseLayout } from '../../src/upstream/xds/discovery-response.js';

/**
 * What `layout.runFrom(k)` answers, found by looking at every entry from `k` on: the entry after
 * the last of those that follow one another with nothing between them, and where that last ends.
 */
export function walkedRun(layout: ResponseLayout, k: number): { next: number; end: number } {
  let next = k + 1;
  while (next < layout.count && layout.entryStart(next) === layout.entryEnd(next - 1)) next++;
  return { next, end: layout.entryEnd(next - 1) };
}
