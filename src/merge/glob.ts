/**
 * Compiles a list of names or globs (`*` any run, `?` one character) into one matcher.
 * An empty or absent list matches nothing; callers decide what "no list" means.
 */
export function globMatcher(patterns: readonly string[] | undefined): (value: string) => boolean {
  if (patterns === undefined || patterns.length === 0) return () => false;
  const exact = new Set(patterns.filter((p) => !/[*?]/.test(p)));
  const globs = patterns
    .filter((p) => /[*?]/.test(p))
    .map(
      (p) =>
        new RegExp(
          `^${p
            .replace(/[.+^${}()|[\]\\]/g, '\\$&')
            .replace(/\*/g, '.*')
            .replace(/\?/g, '.')}$`,
        ),
    );
  return (value) => exact.has(value) || globs.some((g) => g.test(value));
}
