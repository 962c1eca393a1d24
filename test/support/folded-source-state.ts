/**
 * What a source's events amount to once folded as the merge folds them: a snapshot replaces the
 * kinds it names (or, naming none, the kinds of its resources); status events change nothing.
 */
import type { ConfigResource } from '../../src/core/resource.js';
import type { SourceEvent } from '../../src/core/source-event.js';

/** The source's state after `events`: kind → `namespace/name` → resource. A new map per call. */
export function foldSourceEvents(events: readonly SourceEvent[]): Map<string, Map<string, ConfigResource>> {
  const state = new Map<string, Map<string, ConfigResource>>();
  for (const e of events) {
    if (e.type !== 'snapshot') continue;
    for (const kind of e.kinds ?? new Set([...e.resources].map((r) => r.kind))) state.set(kind, new Map());
    for (const r of e.resources) state.get(r.kind)?.set(`${r.namespace}/${r.name}`, r);
  }
  return state;
}

/** The sorted `namespace/name` keys of `kind` the source serves after `events`. */
export function servedKeys(events: readonly SourceEvent[], kind: string): string[] {
  return [...(foldSourceEvents(events).get(kind)?.keys() ?? [])].sort();
}
