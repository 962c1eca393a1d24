import type { ConfigResource } from '../core/resource.js';

/**
 * What one group of clients may receive. Clients with the same effective policy share one view
 * (same `id`), so responses are built once per view and shared.
 */
export interface ClientView {
  /** Equal ids mean equal filters. */
  readonly id: string;
  /** True when `admits` accepts everything; lets caches skip filtering. */
  readonly admitsAll: boolean;
  /** Whether a client of this view may receive the object. Pure and cheap. */
  admits(resource: ConfigResource): boolean;
  /**
   * Where the views of one configuration split a kind's objects so that they share the bytes of
   * each object (see `KindPartitions`); absent for a view that serves a list of its own.
   */
  readonly partition?: ViewPartition;
}

/**
 * A split of every kind's objects into parts that each view of a configuration takes whole or not
 * at all: the objects of one part are admitted by the same views. A view's response is then the
 * blocks of its parts, which every view taking a part shares, instead of a list of its own whose
 * blocks copy each object's bytes again for every view that serves it.
 */
export interface PartitionScheme {
  /** Equal ids mean equal splits: views of one configuration share one scheme. */
  readonly id: string;
  /**
   * The part `r` falls in, as a key that views recognise (see {@link ViewPartition.includes});
   * undefined when no view of the scheme admits it. Pure: the same object always falls in the
   * same part.
   */
  partOf(r: ConfigResource): string | undefined;
}

/** A view's place in a {@link PartitionScheme}. */
export interface ViewPartition {
  readonly scheme: PartitionScheme;
  /** Whether the view admits the objects of a part: exactly those of every part it includes. */
  includes(part: string): boolean;
}

/** The view of a meshmux without policies: everything to everyone. */
export const FULL_VIEW: ClientView = Object.freeze({
  id: 'all',
  admitsAll: true,
  admits: () => true,
});
