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

/**
 * `fold` parted by kind: `part`, the update of `kinds` alone, and `rest`, the update of every other
 * kind (undefined when it updates none). A full fold empties every kind it does not list: its rest
 * lists each such kind of `held` (the kinds the source holds) as empty, so the two parts applied
 * one after the other are the fold.
 */
export function partFold(
  fold: UpdateFold,
  kinds: ReadonlySet<string>,
  held: Iterable<string>,
): { readonly part: UpdateFold; readonly rest: UpdateFold | undefined } {
  const part = new Map<string, readonly ConfigResource[]>();
  const rest = new Map<string, readonly ConfigResource[]>();
  for (const [kind, list] of fold.kinds) (kinds.has(kind) ? part : rest).set(kind, list);
  for (const kind of kinds) if (!part.has(kind)) part.set(kind, []);
  if (fold.full) for (const kind of held) if (!kinds.has(kind) && !rest.has(kind)) rest.set(kind, []);
  const of = (own: ReadonlyMap<string, readonly ConfigResource[]>): UpdateFold => ({
    ...fold,
    full: false,
    kinds: own,
    listed: new Set([...fold.listed].filter((kind) => own.has(kind))),
  });
  return { part: of(part), rest: rest.size === 0 ? undefined : of(rest) };
}
