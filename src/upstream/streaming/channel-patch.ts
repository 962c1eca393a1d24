import type { ConfigResource } from '../../core/resource.js';
import type { ReadResult } from '../mcp-resource-reader.js';
import type { ChannelPatch } from './subscription-state.js';
import type { GoodRead } from './channel-notes.js';

/**
 * The change from the last state to this one, when it is made of good objects only (no drop, no
 * name twice among them; an entry re-sent as it was counts as no change, whatever it was read
 * as): what was removed or replaced, by name, the objects newly read, and of those the ones with
 * notes (pruned fields, warnings of their own). Undefined when the response must be judged whole.
 * `middle`: the results of the response's entries that are not known to be the last state's own;
 * `sameAs[k]` ≥ 0 says `middle[k]` re-sends one of the last state's objects as it was; `removed`:
 * the last state's results the response did not re-send as they were.
 */
export function channelPatchOf(
  removed: readonly ReadResult[],
  middle: readonly ReadResult[],
  sameAs: Int32Array,
): ChannelPatch | undefined {
  const upserted = new Map<string, ConfigResource>();
  let noted: Map<string, GoodRead> | undefined;
  for (let k = 0; k < middle.length; k++) {
    // Re-sent as it was: already served, or dropped as before.
    if ((sameAs[k] as number) >= 0) continue;
    const result = middle[k] as ReadResult;
    if (!result.ok) return undefined;
    if (upserted.has(result.name)) return undefined;
    upserted.set(result.name, result.resource);
    if (
      result.unknownEnvelopeFields.length > 0 ||
      result.unknownBodyFields.length > 0 ||
      (result.warnings !== undefined && result.warnings.length > 0)
    ) {
      (noted ??= new Map()).set(result.name, result);
    }
  }
  const names: string[] = [];
  for (const result of removed) {
    if (!result.ok) return undefined;
    names.push(result.name);
  }
  return noted === undefined ? { removed: names, upserted } : { removed: names, upserted, noted };
}

const NO_RESULTS: readonly ReadResult[] = [];

/**
 * The change a response states (an incremental one: `removed` keys, then `results` upserted, each
 * under its own name) as a patch of the state it changes: each upserted key counts as removed too
 * (the state's object under it, if any, is replaced). Undefined when one of `results` is not a
 * good object, or two name one (see {@link channelPatchOf}).
 */
export function statedPatch(
  removed: readonly string[],
  results: readonly ReadResult[],
): ChannelPatch | undefined {
  const patch = channelPatchOf(NO_RESULTS, results, new Int32Array(results.length).fill(-1));
  if (patch === undefined) return undefined;
  return { ...patch, removed: [...removed, ...patch.upserted.keys()] };
}
