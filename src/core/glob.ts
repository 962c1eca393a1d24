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
  return { dot: subject === 'name', noextglob: true, nonegate: true, strictBrackets: true };
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
  const res = patterns.filter((p) => GLOB_CHARS.test(p)).map((p) => compileOne(p, subject));
  if (res.length === 0) return (value) => exact.has(value);
  return (value) => {
    if (exact.has(value)) return true;
    const subjectValue = subject === 'name' ? value.replaceAll('/', NAME_SLASH) : value;
    return res.some((re) => re.test(subjectValue));
  };
}
