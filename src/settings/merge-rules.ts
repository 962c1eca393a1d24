import { isDeepStrictEqual } from 'node:util';
import type { SourcePolicy } from '../merge/source-rules.js';
import type { SourceConfig } from './source-config.js';
import type { MergeRules } from './sources/common.js';

/** The merge's policy for a source with these rules. */
export function sourcePolicy(rules: MergeRules): Partial<SourcePolicy> {
  return {
    priority: rules.priority,
    ...(rules.allow === undefined ? {} : { allow: rules.allow }),
    ...(rules.deny === undefined ? {} : { deny: rules.deny }),
    keepOnEmpty: rules.onEmpty === 'keep',
    ...(rules.maxStale === undefined ? {} : { maxStaleMs: rules.maxStale }),
    maxDeleteRatio: rules.maxDeleteRatio,
    deleteWindowMs: rules.deleteWindow,
    ...(rules.confirmAfter === undefined ? {} : { confirmAfterMs: rules.confirmAfter }),
    settleMs: rules.settle,
    required: rules.required,
  };
}

/**
 * Whether two configurations of a source reach their upstream the same way: everything but the
 * merge rules is equal, compared structurally (key order does not matter). When it holds, the
 * running source is kept and only its rules are applied anew.
 */
export function sameConnection(a: SourceConfig, b: SourceConfig): boolean {
  const { rules: _a, ...left } = a;
  const { rules: _b, ...right } = b;
  return isDeepStrictEqual(left, right);
}
