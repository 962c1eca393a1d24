import { globMatcher } from '../../core/glob.js';

/** Include and exclude globs over names, in the one glob dialect (`core/glob.ts`). */
export interface GlobLists {
  /** When absent or empty, everything is included. */
  readonly include?: readonly string[] | undefined;
  readonly exclude?: readonly string[] | undefined;
}

/** Decides whether a name is selected: it matches an include glob (if any) and no exclude glob. Pure. */
export class GlobSelector {
  private readonly include: ((name: string) => boolean) | undefined;
  private readonly exclude: (name: string) => boolean;

  constructor(lists: GlobLists = {}) {
    this.include =
      lists.include === undefined || lists.include.length === 0 ? undefined : globMatcher(lists.include);
    this.exclude = globMatcher(lists.exclude);
  }

  matches(name: string): boolean {
    if (this.include !== undefined && !this.include(name)) return false;
    return !this.exclude(name);
  }
}
