/**
 * A sampling heap profile (V8's `SamplingHeapProfile`, as the server answers `heapSample`) read
 * per allocating function.
 */

/** A node of a sampling heap profile. */
export interface SampledNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly SampledNode[];
}

/**
 * Bytes sampled per allocating function (`name file:line`). A builtin's allocations (a map's
 * `set`, an array's `push`, a `subarray`) say little alone: they are named with the function
 * that called the builtin.
 */
export function bySite(profile: { readonly head: SampledNode }): Map<string, number> {
  const sites = new Map<string, number>();
  const visit = (node: SampledNode, caller: string): void => {
    const { functionName, url, lineNumber } = node.callFrame;
    const own = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`;
    const builtin = url === '';
    const site = builtin ? `${own} in ${caller}` : own;
    if (node.selfSize > 0) sites.set(site, (sites.get(site) ?? 0) + node.selfSize);
    for (const child of node.children) visit(child, builtin ? caller : own);
  };
  visit(profile.head, '(root)');
  return sites;
}

/** The bytes of every site. */
export const sampledTotal = (sites: ReadonlyMap<string, number>): number =>
  [...sites.values()].reduce((a, b) => a + b, 0);
