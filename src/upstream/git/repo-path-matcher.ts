import picomatch from 'picomatch';

/** The files a git source reads when it names no `paths`. */
export const DEFAULT_REPO_PATHS: readonly string[] = ['**/*.{yaml,yml}'];

/**
 * Compiles repository path globs (`istio/**\/*.yaml`, braces, `?`, character classes) into one
 * predicate over slash-separated repository paths. Folders and files starting with a dot
 * (`.github/`) match only when a glob names them, so CI files are not read as mesh config.
 */
export function repoPathMatcher(patterns: readonly string[]): (path: string) => boolean {
  const normalized = patterns.map((p) => p.replace(/^(\.\/|\/)+/, ''));
  return picomatch(normalized, { dot: false });
}
