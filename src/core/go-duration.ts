/**
 * Durations as Istio reads them. Istio decodes `google.protobuf.Duration` fields with Go's
 * `time.ParseDuration` (the legacy jsonpb decoder does), so `5m`, `1h30m`, `300us` and `-2s` are
 * valid wherever a Duration is, and every canonical proto3 JSON duration (`"1.000000001s"`) is a
 * Go duration too. Output is always the canonical proto3 JSON form, as Go's protojson prints it.
 */
import { MeshmuxError } from './errors.js';

/** A `google.protobuf.Duration` in plain numbers. `seconds` and `nanos` never have opposite signs. */
export interface Duration {
  readonly seconds: number;
  readonly nanos: number;
}

/** The outcome of parsing a duration: the value, or why the text is not one. Never throws. */
export type DurationParse =
  { readonly ok: true; readonly duration: Duration } | { readonly ok: false; readonly reason: string };

const NANOS_PER_SECOND = 1_000_000_000n;

/** Go's limit: a duration is an int64 count of nanoseconds. */
const GO_MAX_MAGNITUDE = 1n << 63n;

/** Protobuf's limit for Duration.seconds: ±10,000 years. */
const PROTO_MAX_SECONDS = 315_576_000_000;

const UNIT_NANOS: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['\u00b5s', 1_000n], // micro sign
  ['\u03bcs', 1_000n], // Greek small letter mu
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);

const EXAMPLES = 'e.g. "5s", "100ms", "1h30m"';

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

/**
 * Parses a Go duration string into a Duration, accepting exactly what Go's `time.ParseDuration`
 * accepts: an optional sign, then one or more `<number><unit>` terms (units `ns`, `us`, `µs`, `ms`,
 * `s`, `m`, `h`; the number may have a fraction), or a bare `0`. Values beyond Go's range
 * (about ±292 years) are rejected, as Istio rejects them. Pure; never throws.
 */
export function parseGoDuration(text: string): DurationParse {
  const invalid = (why: string): DurationParse => ({
    ok: false,
    reason: `${JSON.stringify(text)} is not a valid duration: ${why} (${EXAMPLES})`,
  });
  let s = text;
  let negative = false;
  if (s.startsWith('-') || s.startsWith('+')) {
    negative = s.startsWith('-');
    s = s.slice(1);
  }
  if (s === '0') return { ok: true, duration: { seconds: 0, nanos: 0 } };
  if (s === '') return invalid('it is empty');

  let total = 0n;
  let i = 0;
  while (i < s.length) {
    const start = i;
    // Integer part, exact; Go fails as soon as it passes 2^63.
    let whole = 0n;
    while (isDigit(s[i])) {
      whole = whole * 10n + BigInt(Number(s[i]));
      if (whole > GO_MAX_MAGNITUDE) return invalid('it is out of range');
      i++;
    }
    const hasWhole = i > start;
    // Fraction part: Go keeps digits while they fit an int64 and scales in floating point, so
    // the same rounding is reproduced here with JS numbers (IEEE doubles, like Go's float64).
    let fraction = 0n;
    let scale = 1;
    let hasFraction = false;
    if (s[i] === '.') {
      i++;
      let overflow = false;
      while (isDigit(s[i])) {
        hasFraction = true;
        if (!overflow) {
          const next = fraction * 10n + BigInt(Number(s[i]));
          if (fraction > (GO_MAX_MAGNITUDE - 1n) / 10n || next > GO_MAX_MAGNITUDE) overflow = true;
          else {
            fraction = next;
            scale *= 10;
          }
        }
        i++;
      }
    }
    if (!hasWhole && !hasFraction) return invalid('a number is missing');
    const unitStart = i;
    while (i < s.length && s[i] !== '.' && !isDigit(s[i])) i++;
    const unitText = s.slice(unitStart, i);
    if (unitText === '') return invalid('a unit is missing');
    const unit = UNIT_NANOS.get(unitText);
    if (unit === undefined) return invalid(`unknown unit ${JSON.stringify(unitText)}`);
    if (whole > GO_MAX_MAGNITUDE / unit) return invalid('it is out of range');
    let term = whole * unit;
    if (fraction > 0n) {
      term += BigInt(Math.trunc(Number(fraction) * (Number(unit) / scale)));
      if (term > GO_MAX_MAGNITUDE) return invalid('it is out of range');
    }
    total += term;
    if (total > GO_MAX_MAGNITUDE) return invalid('it is out of range');
  }
  if (!negative && total > GO_MAX_MAGNITUDE - 1n) return invalid('it is out of range');
  const signed = negative ? -total : total;
  // Truncating division keeps seconds and nanos on the same side of zero, as protobuf requires.
  return {
    ok: true,
    duration: {
      seconds: Number(signed / NANOS_PER_SECOND),
      nanos: Number(signed % NANOS_PER_SECOND),
    },
  };
}

/** Why a Duration cannot be represented in proto3 JSON, or undefined when it can. */
export function checkDuration(d: Duration): string | undefined {
  if (!Number.isInteger(d.seconds) || !Number.isInteger(d.nanos)) return 'seconds and nanos must be integers';
  if (Math.abs(d.seconds) > PROTO_MAX_SECONDS) return `seconds ${d.seconds} is beyond ±10000 years`;
  if (Math.abs(d.nanos) > 999_999_999) return `nanos ${d.nanos} is not below one second`;
  if ((d.seconds > 0 && d.nanos < 0) || (d.seconds < 0 && d.nanos > 0)) {
    return 'seconds and nanos have opposite signs';
  }
  return undefined;
}

/**
 * Digits after the decimal point for a nanosecond count in 0..999,999,999, in groups of three with
 * trailing zero groups dropped, so there are 0, 3, 6 or 9 of them (as Go's protojson prints).
 */
export function fractionDigits(nanos: number): string {
  if (nanos === 0) return '';
  let digits = String(nanos).padStart(9, '0');
  while (digits.endsWith('000')) digits = digits.slice(0, -3);
  return `.${digits}`;
}

/**
 * The canonical proto3 JSON text of a Duration: `"5s"`, `"0.500s"`, `"-1.000000001s"`.
 * Throws a `DECODE` MeshmuxError for a Duration protobuf does not allow (out of range, mixed signs).
 */
export function formatDuration(d: Duration): string {
  const problem = checkDuration(d);
  if (problem !== undefined) throw new MeshmuxError('DECODE', `invalid google.protobuf.Duration: ${problem}`);
  const sign = d.seconds < 0 || d.nanos < 0 ? '-' : '';
  return `${sign}${Math.abs(d.seconds)}${fractionDigits(Math.abs(d.nanos))}s`;
}
