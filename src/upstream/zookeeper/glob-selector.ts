/** Include and exclude globs: `*` matches any run of characters (dots too), `?` one character. */
export interface GlobLists {
  /** When absent or empty, everything is included. */
  readonly include?: readonly string[] | undefined;
  readonly exclude?: readonly string[] | undefined;
}

function globRegExp(glob: string): RegExp {
  const body = glob
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[\\^$.|+()[\]{}]/g, '\\$&')))
    .join('');
  return new RegExp(`^${body}$`);
}

/** Decides whether a name is selected: it matches an include glob (if any) and no exclude glob. Pure. */
export class GlobSelector {
  private readonly include: readonly RegExp[];
  private readonly exclude: readonly RegExp[];

  constructor(lists: GlobLists = {}) {
    this.include = (lists.include ?? []).map(globRegExp);
    this.exclude = (lists.exclude ?? []).map(globRegExp);
  }

  matches(name: string): boolean {
    if (this.include.length > 0 && !this.include.some((r) => r.test(name))) return false;
    return !this.exclude.some((r) => r.test(name));
  }
}
