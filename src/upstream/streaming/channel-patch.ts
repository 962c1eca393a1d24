import type { ConfigResource } from '../../core/resource.js';
import type { ReadResult } from '../mcp-resource-reader.js';
import type { ChannelPatch } from './subscription-state.js';

/**
 * The change from the last state to this one, when it is made of plain good objects only (no
 * drop, no warning, no name twice among them): what was removed or replaced, by name, and the
 * objects newly read. Undefined when the response must be judged whole. `middle`: the results
 * of the response's entries that are not known to be the last state's own; `sameAs[k]` ≥ 0 says
 * `middle[k]` re-sends one of the last state's objects as it was; `removed`: the last state's
 * results the response did not re-send as they were.
 */
export function channelPatchOf(
  removed: readonly ReadResult[],
  middle: readonly ReadResult[],
  sameAs: Int32Array,
): ChannelPatch | undefined {
  const upserted = new Map<string, ConfigResource>();
  for (let k = 0; k < middle.length; k++) {
    const result = middle[k] as ReadResult;
    if (!result.ok) return undefined;
    // Re-sent as it was: already served.
    if ((sameAs[k] as number) >= 0) continue;
    if (
      result.unknownEnvelopeFields.length > 0 ||
      result.unknownBodyFields.length > 0 ||
      (result.warnings !== undefined && result.warnings.length > 0) ||
      upserted.has(result.name)
    ) {
      return undefined;
    }
    upserted.set(result.name, result.resource);
  }
  const names: string[] = [];
  for (const result of removed) {
    if (!result.ok) return undefined;
    names.push(result.name);
  }
  return { removed: names, upserted };
}

const NO_RESULTS: readonly ReadResult[] = [];

/**
 * The change a response states (an incremental one: `removed` keys, then `results` upserted, each
 * under its own name) as a patch of the state it changes: each upserted key counts as removed too
 * (the state's object under it, if any, is replaced). Undefined when one of `results` is not a
 * plain good object (see {@link channelPatchOf}).
 */
export function statedPatch(
  removed: readonly string[],
  results: readonly ReadResult[],
): ChannelPatch | undefined {
  const patch = channelPatchOf(NO_RESULTS, results, new Int32Array(results.length).fill(-1));
  if (patch === undefined) return undefined;
  return { removed: [...removed, ...patch.upserted.keys()], upserted: patch.upserted };
}
