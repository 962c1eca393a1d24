/**
 * What counts as a secret in text meshmux did not write itself, and how it is hidden before any
 * of it leaves the process (log lines, debug pages, the status page).
 *
 * Two shapes are recognised, each also in its percent-encoded form (ZooKeeper node names of Dubbo
 * providers are URLs encoded once):
 * - the userinfo of a URL: `https://user:token@host/...` → `https://***@host/...`;
 * - the value of a query parameter whose name says it holds a credential (see
 *   {@link isCredentialName}): `?token=abc&x=1` → `?token=***&x=1`.
 */

/** Words that mark a parameter or field name as holding a credential, compared without `-_.`. */
const CREDENTIAL_WORDS = [
  'token',
  'password',
  'passwd',
  'secret',
  'accesskey',
  'credential',
  'signature',
  'apikey',
  'privatekey',
] as const;

/**
 * Whether a parameter name (a Dubbo URL parameter, a query parameter) holds a credential: its
 * lower-case form, with `-`, `_` and `.` removed, contains one of `token`, `password`, `passwd`,
 * `secret`, `accesskey`, `credential`, `signature`, `apikey` or `privatekey`. `access_key`,
 * `Access-Key`, `db.password` and `authToken` all do. A containment test on purpose: a name that
 * only looks like one (`tokenizer`) loses a label, which is cheap; a secret served to every Envoy
 * is not.
 */
export function isCredentialName(name: string): boolean {
  const folded = name.toLowerCase().replace(/[-_.]/g, '');
  return CREDENTIAL_WORDS.some((word) => folded.includes(word));
}

/**
 * `scheme://userinfo@`, with the userinfo free of `/ ? # @` and white space. A scheme starts where
 * a run of the characters a scheme holds starts, not at any word boundary inside one: tried at each
 * of them, a long run (`a.a.a.…`, 60,000 characters in a refused registration) was scanned to its
 * end from every one, in time its length squared, on every log line quoting it.
 */
const USERINFO = /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi;
/** The same, percent-encoded once: `scheme%3A%2F%2Fuserinfo%40`. */
const ENCODED_USERINFO =
  /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*%3A%2F%2F)(?:(?!%2F|%3F|%23|%40)[^\s/?#@"'<>&])+%40/gi;
/** `?name=value` or `&name=value` (also `&amp;` in HTML), the value up to the next separator. */
const QUERY_PARAMETER = /([?&](?:amp;)?)([^=&?#\s"'<>]+)=([^&#\s"'<>]*)/g;
/** The same, percent-encoded: `%3Fname%3Dvalue` or `%26name%3Dvalue`. */
const ENCODED_QUERY_PARAMETER = /(%3F|%26)((?:(?!%3D|%26)[^\s"'<>&?=/])+)%3D((?:(?!%26)[^\s"'<>&])*)/gi;

/** Hidden values are replaced by this. */
export const REDACTED = '***';

/**
 * `text` with the userinfo of every URL and the value of every credential query parameter
 * replaced by `***`, in plain and percent-encoded form. Text without `@` or `=` (or their
 * encodings) is returned as it is, so the common case costs one scan.
 */
export function redactSecrets(text: string): string {
  if (!/[@=]|%40|%3D/i.test(text)) return text;
  return text
    .replace(USERINFO, `$1${REDACTED}@`)
    .replace(ENCODED_USERINFO, `$1${REDACTED}%40`)
    .replace(QUERY_PARAMETER, (whole, sep: string, name: string) =>
      isCredentialName(name) ? `${sep}${name}=${REDACTED}` : whole,
    )
    .replace(ENCODED_QUERY_PARAMETER, (whole, sep: string, name: string) =>
      isCredentialName(decodeOrKeep(name)) ? `${sep}${name}%3D${REDACTED}` : whole,
    );
}

function decodeOrKeep(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
