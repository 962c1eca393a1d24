import { globMatcher } from '../../core/glob.js';

/** The files a git source reads when it names no `paths`. */
export const DEFAULT_REPO_PATHS: readonly string[] = ['**/*.{yaml,yml}'];

/**
 * Compiles repository path globs (`istio/**\/*.yaml`) into one predicate over slash-separated
 * repository paths, in the path form of the one glob dialect (`core/glob.ts`): `*` stays within a
 * folder, and folders and files starting with a dot (`.github/`) match only when a glob names
 * them, so CI files are not read as mesh config. A leading `./` or `/` is ignored.
 */
export function repoPathMatcher(patterns: readonly string[]): (path: string) => boolean {
  return globMatcher(
    patterns.map((p) => p.replace(/^(\.\/|\/)+/, '')),
    'path',
  );
}
