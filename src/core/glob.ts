import picomatch from 'picomatch';

/**
 * The one glob dialect of meshmux, used for namespaces, kinds, object names, Dubbo interfaces and
 * applications, policy matches (node ids, metadata values, certificate SANs) and repository paths:
 *
 * - `*` matches any run of characters (also none), `?` exactly one character;
 * - `[abc]`, `[a-z]` match one character of the set, `[^abc]` and `[!abc]` one character outside it;
 * - `{a,b}` matches either alternative (`{a,b}*`, `*.{yaml,yml}`), and may nest;
 * - `\` makes the next character literal; every other character, `.` `(` `)` `|` `+` `@` `!`
 *   included, stands for itself; matching is case-sensitive and covers the whole value.
 *
 * The subject decides what `/` and a leading `.` do:
 * - in a `name`, `/` and `.` are ordinary characters: `*` crosses both
 *   (`spiffe://cluster.local/ns/x/*` matches every service account of namespace `x`);
 * - in a `path`, `/` separates folders: `*` and `?` stay within one folder, a whole `**` folder
 *   matches any number of folders, and a file or folder whose name starts with `.` matches only
 *   where the glob itself spells that dot (`**\/*.yaml` skips `.github/ci.yaml`).
 *
 * A glob with an unclosed `[`, `{` or a range such as `[z-a]` is invalid: {@link globProblem} says
 * why, and configuration is checked with it at load, so every glob that loads compiles here.
 */
export type GlobSubject = 'name' | 'path';

/** Stands for `/` in names, so that picomatch's `*` crosses it. It cannot occur in a config value. */
const NAME_SLASH = '\u0000';

const GLOB_CHARS = /[*?[\]{}\\]/;

function options(subject: GlobSubject): picomatch.PicomatchOptions {
  const name = subject === 'name';
  // picomatch's shortcut expressions for a few whole name globs are not the dialect's: its `*.*`
  // wants a character after the dot (`a.` unmatched), and so does the `*.*` of `*.*.yaml`.
  return { dot: name, fastpaths: !name, noextglob: true, nonegate: true, strictBrackets: true };
}

/** Rewrites a glob of the dialect into the picomatch syntax that means the same. */
function toPicomatch(glob: string, subject: GlobSubject): string {
  // Parentheses are literal here, but picomatch reads them as groups even without extglobs.
  let out = glob.replace(
    /(\\.)|([()])|(\[!)/g,
    (all, escaped: string | undefined, paren: string | undefined) =>
      escaped !== undefined ? escaped : paren !== undefined ? `\\${paren}` : '[^',
  );
  if (subject === 'name') out = out.replaceAll('/', NAME_SLASH);
  return out;
}

function compileOne(glob: string, subject: GlobSubject): RegExp {
  const re = picomatch.makeRe(toPicomatch(glob, subject), options(subject));
  if (String(re) === String(/$^/))
    throw new SyntaxError(`it can match no ${subject === 'path' ? 'path' : 'value'}`);
  return re;
}

/** One step of a {@link starGlob}: any run of characters, any one character, or this character. */
type StarStep = 'any-run' | 'any-one' | { readonly char: string };

/**
 * The steps of a name glob made of literal characters, `?` and single `*` only, or undefined for
 * any other glob. Those are most globs over client-supplied values (node ids, metadata), and the
 * expression picomatch builds for them backtracks: `*-*-east` on a value of 60,000 `-` took 1.9 s.
 * Brackets, braces, `**` and a leading `.` keep picomatch's expression and its finer rules. A `/`
 * or `|` after a `*` stands for itself here, as the dialect says, where that expression dropped
 * the `/` and read `|` as an alternative.
 */
function starGlob(glob: string): readonly StarStep[] | undefined {
  if (glob.startsWith('.')) return undefined;
  const steps: StarStep[] = [];
  for (let i = 0; i < glob.length; i++) {
    const c = glob.charAt(i);
    if (c === '*') {
      if (glob.charAt(i + 1) === '*') return undefined;
      steps.push('any-run');
    } else if (c === '?') steps.push('any-one');
    else if (c === '\\') {
      const escaped = glob.charAt(++i);
      // `\d` and the like mean a class to picomatch, not the letter.
      if (escaped === '' || /[0-9A-Za-z]/.test(escaped)) return undefined;
      steps.push({ char: escaped });
    } else if ('[]{}'.includes(c)) return undefined;
    else steps.push({ char: c });
  }
  return steps;
}

/**
 * Matches `value` against `steps` in one pass over it, O(value length x steps) whatever the value:
 * the set of steps reached so far is carried forward character by character (UTF-16 code units,
 * as picomatch's expressions count them), never tried again from an earlier character.
 */
function starMatcher(steps: readonly StarStep[]): (value: string) => boolean {
  const n = steps.length;
  const closeOver = (reached: Uint8Array): void => {
    for (let i = 0; i < n; i++) if (reached[i] === 1 && steps[i] === 'any-run') reached[i + 1] = 1;
  };
  // picomatch's `*` at the start of a glob matches no empty value, and never `.` or `..` whole.
  const leadingRun = steps[0] === 'any-run';
  return (value) => {
    if (leadingRun && (value === '' || value === '.' || value === '..')) return false;
    let reached = new Uint8Array(n + 1);
    let next = new Uint8Array(n + 1);
    reached[0] = 1;
    closeOver(reached);
    for (let k = 0; k < value.length; k++) {
      const c = value.charAt(k);
      next.fill(0);
      let any = false;
      for (let i = 0; i < n; i++) {
        if (reached[i] !== 1) continue;
        const step = steps[i] as StarStep;
        if (step === 'any-run') next[i] = 1;
        else if (step === 'any-one' || step.char === c) next[i + 1] = 1;
        else continue;
        any = true;
      }
      if (!any) return false;
      closeOver(next);
      [reached, next] = [next, reached];
    }
    return reached[n] === 1;
  };
}

/**
 * The predicate picomatch's expression gives one glob: the dialect's reference, used for every
 * glob {@link globMatcher} does not match in one pass. Throws a SyntaxError for an invalid glob.
 */
export function expressionTest(glob: string, subject: GlobSubject): (value: string) => boolean {
  const re = compileOne(glob, subject);
  return subject === 'name'
    ? (value) => re.test(value.replaceAll('/', NAME_SLASH))
    : (value) => re.test(value);
}

/** The predicate of one glob that is not a plain name. */
function compileTest(glob: string, subject: GlobSubject): (value: string) => boolean {
  // Compiled either way, so that an invalid glob throws whichever matcher it would get.
  const reference = expressionTest(glob, subject);
  const steps = subject === 'name' ? starGlob(glob) : undefined;
  return steps === undefined ? reference : starMatcher(steps);
}

/** True when `glob` has no special character: it matches exactly itself. */
export function isPlainName(glob: string): boolean {
  return !GLOB_CHARS.test(glob);
}

/** Why `glob` is not a valid glob of the dialect, or undefined when it is. Pure; never throws. */
export function globProblem(glob: string, subject: GlobSubject = 'name'): string | undefined {
  try {
    compileOne(glob, subject);
    return undefined;
  } catch (err) {
    return `not a valid glob: ${(err as Error).message}`;
  }
}

/**
 * Compiles a list of globs into one predicate: true when the value matches any of them. An empty
 * or absent list matches nothing; callers decide what "no list" means. Throws a SyntaxError for an
 * invalid glob (configuration never holds one, see {@link globProblem}). The predicate is pure.
 */
export function globMatcher(
  patterns: readonly string[] | undefined,
  subject: GlobSubject = 'name',
): (value: string) => boolean {
  if (patterns === undefined || patterns.length === 0) return () => false;
  // Plain names, the common case, are looked up rather than run as expressions.
  const exact = new Set(patterns.filter((p) => !GLOB_CHARS.test(p)));
  const tests = patterns.filter((p) => GLOB_CHARS.test(p)).map((p) => compileTest(p, subject));
  if (tests.length === 0) return (value) => exact.has(value);
  return (value) => exact.has(value) || tests.some((test) => test(value));
}
