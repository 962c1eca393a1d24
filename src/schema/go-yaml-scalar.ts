/**
 * Scalar resolution as Istio and kubectl see it. Both read YAML with sigs.k8s.io/yaml, which uses
 * go-yaml v2: a YAML 1.1 resolver. So unlike YAML 1.2's core schema, plain `yes`, `no`, `on`,
 * `off`, `y` and `n` are booleans, `0755` is octal and `1_000` is a thousand. Timestamps stay
 * strings (go-yaml keeps them as text when decoding into untyped values), and sexagesimal numbers
 * (`1:30`) are plain strings, as go-yaml never implemented them.
 */

/** A resolved scalar: the JSON value it becomes, and the YAML type it was resolved as. */
export type ResolvedScalar =
  | { readonly tag: 'null'; readonly value: null }
  | { readonly tag: 'bool'; readonly value: boolean }
  | { readonly tag: 'int'; readonly value: number }
  | { readonly tag: 'float'; readonly value: number }
  | { readonly tag: 'str'; readonly value: string };

const WORDS: ReadonlyMap<string, ResolvedScalar> = new Map<string, ResolvedScalar>([
  ...['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'].map(
    (w) => [w, { tag: 'bool', value: true }] as const,
  ),
  ...['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'].map(
    (w) => [w, { tag: 'bool', value: false }] as const,
  ),
  ...['', '~', 'null', 'Null', 'NULL'].map((w) => [w, { tag: 'null', value: null }] as const),
  ...['.nan', '.NaN', '.NAN'].map((w) => [w, { tag: 'float', value: Number.NaN }] as const),
  ...['.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF'].map(
    (w) => [w, { tag: 'float', value: Number.POSITIVE_INFINITY }] as const,
  ),
  ...['-.inf', '-.Inf', '-.INF'].map((w) => [w, { tag: 'float', value: Number.NEGATIVE_INFINITY }] as const),
]);

/** go-yaml's float syntax, checked before Go's ParseFloat is tried. */
const YAML_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const LEADING_DOT_FLOAT = /^\.[0-9]+([eE][-+]?[0-9]+)?$/;

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const UINT64_MAX = (1n << 64n) - 1n;

const DIGITS: Readonly<Record<number, RegExp>> = {
  2: /^[01]+$/,
  8: /^[0-7]*$/,
  10: /^[0-9]+$/,
  16: /^[0-9a-fA-F]+$/,
};

/** Go's `strconv.ParseUint(s, 0, …)` syntax without the range check: base prefixes, leading-0 octal. */
function parseUnsignedBase0(s: string): bigint | undefined {
  if (s === '') return undefined;
  let base = 10;
  let digits = s;
  if (s.startsWith('0')) {
    const p = s[1]?.toLowerCase();
    if (s.length >= 3 && p === 'b') [base, digits] = [2, s.slice(2)];
    else if (s.length >= 3 && p === 'o') [base, digits] = [8, s.slice(2)];
    else if (s.length >= 3 && p === 'x') [base, digits] = [16, s.slice(2)];
    else [base, digits] = [8, s.slice(1)];
  }
  const pattern = DIGITS[base];
  if (pattern === undefined || !pattern.test(digits)) return undefined;
  if (digits === '') return 0n;
  const prefix = base === 2 ? '0b' : base === 8 ? '0o' : base === 16 ? '0x' : '';
  return BigInt(prefix + digits);
}

/** Go's `strconv.ParseInt(s, 0, 64)` syntax (sign allowed), without the range check. */
function parseSignedBase0(s: string): bigint | undefined {
  const negative = s.startsWith('-');
  const body = s.startsWith('-') || s.startsWith('+') ? s.slice(1) : s;
  const magnitude = parseUnsignedBase0(body);
  if (magnitude === undefined) return undefined;
  return negative ? -magnitude : magnitude;
}

/**
 * Resolves the text of an untagged plain scalar exactly as go-yaml v2 does (see the file comment).
 * Integers beyond 2^53 become the nearest double, as they do in Istio, which decodes specs into
 * float64 before reading them as protobuf.
 */
export function resolvePlainScalar(text: string): ResolvedScalar {
  const word = WORDS.get(text);
  if (word !== undefined) return word;
  const first = text[0] ?? '';
  if (first === '.') {
    return LEADING_DOT_FLOAT.test(text) ? { tag: 'float', value: Number(text) } : { tag: 'str', value: text };
  }
  if (!/[-+0-9]/.test(first)) return { tag: 'str', value: text };

  const plain = text.replaceAll('_', '');
  const signed = parseSignedBase0(plain);
  if (signed !== undefined && signed >= INT64_MIN && signed <= INT64_MAX) {
    return { tag: 'int', value: Number(signed) };
  }
  const unsigned = /^[-+]/.test(plain) ? undefined : parseUnsignedBase0(plain);
  if (unsigned !== undefined && unsigned <= UINT64_MAX) return { tag: 'int', value: Number(unsigned) };
  if (YAML_FLOAT.test(plain)) {
    const f = Number(plain);
    // Go's ParseFloat fails on overflow, and go-yaml then keeps the text as a string.
    if (Number.isFinite(f)) return { tag: 'float', value: f };
  }
  // Integers too big for 64 bits still resolve (go-yaml falls back to big.Int).
  if (signed !== undefined) return { tag: 'int', value: Number(signed) };
  return { tag: 'str', value: text };
}

/**
 * Resolves a scalar that carries an explicit standard tag (`!!int "80"`, `!!str 80`), or returns a
 * reason when the text does not fit the tag. `tag` is the short form without `!!`.
 */
export function resolveTaggedScalar(tag: string, text: string): ResolvedScalar | { readonly error: string } {
  if (tag === 'str') return { tag: 'str', value: text };
  const resolved = resolvePlainScalar(text);
  if (resolved.tag === tag) return resolved;
  // go-yaml lets an integer stand where a float is asked for.
  if (tag === 'float' && resolved.tag === 'int') return { tag: 'float', value: resolved.value };
  return { error: `cannot read ${JSON.stringify(text)} as !!${tag}` };
}
