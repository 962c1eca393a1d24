import { linesDigest } from '../core/content-digest.js';
import type { MeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';
import type { SourceSnapshotEvent } from '../core/source-event.js';

/**
 * Snapshot events not applied yet, folded into the state they add up to: per kind, the last list
 * the source sent. `full` once an event replaced every kind (kinds absent from `kinds` are then
 * empty). Immutable: folding in an event makes a new fold.
 */
export interface UpdateFold {
  readonly full: boolean;
  readonly kinds: ReadonlyMap<string, readonly ConfigResource[]>;
  readonly revision: string;
  readonly errors: readonly MeshmuxError[];
  readonly warnings: readonly MeshmuxError[];
  /** Kinds some folded event listed afresh (see `SourceSnapshotEvent.listed`). */
  readonly listed: ReadonlySet<string>;
}

/** Folds one snapshot event into the update it continues (or starts one); `fold` is not altered. */
export function foldIn(fold: UpdateFold | undefined, event: SourceSnapshotEvent): UpdateFold {
  const kinds = new Map<string, ConfigResource[]>();
  const full = event.kinds === undefined;
  if (!full && fold !== undefined) for (const [k, list] of fold.kinds) kinds.set(k, [...list]);
  for (const k of event.kinds ?? []) kinds.set(k, []);
  for (const r of event.resources) {
    if (!full && !(event.kinds?.has(r.kind) ?? false)) continue;
    const list = kinds.get(r.kind);
    if (list === undefined) kinds.set(r.kind, [r]);
    else list.push(r);
  }
  const listed = new Set(fold?.listed);
  for (const k of event.listed ?? []) listed.add(k);
  return {
    full: full || (fold?.full ?? false),
    kinds,
    revision: event.revision,
    errors: event.errors,
    warnings: event.warnings,
    listed,
  };
}

/** The one snapshot event a fold adds up to. */
export function foldEvent(fold: UpdateFold): SourceSnapshotEvent {
  return {
    type: 'snapshot',
    ...(fold.full ? {} : { kinds: new Set(fold.kinds.keys()) }),
    resources: [...fold.kinds.values()].flat(),
    revision: fold.revision,
    ...(fold.listed.size === 0 ? {} : { listed: fold.listed }),
    errors: fold.errors,
    warnings: fold.warnings,
  };
}

/**
 * A digest of what an update asks the source to hold: the kinds it replaces (or all) and each
 * object's name and content version. Equal updates have equal digests on every replica, whatever
 * their order, revision or creation times. Pure.
 */
export function foldDigest(fold: UpdateFold): string {
  const lines: string[] = [];
  for (const [kind, list] of fold.kinds) {
    lines.push(`kind ${kind}`);
    for (const r of list) lines.push(`${r.kind}|${r.namespace}/${r.name}@${r.version}`);
  }
  lines.sort();
  if (fold.full) lines.unshift('full');
  return linesDigest(lines);
}
