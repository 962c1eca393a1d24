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
}

/** The view of a meshmux without policies: everything to everyone. */
export const FULL_VIEW: ClientView = Object.freeze({
  id: 'all',
  admitsAll: true,
  admits: () => true,
});
