/**
 * RFC 3339 timestamps, as used by `google.protobuf.Timestamp` in proto3 JSON and by Kubernetes'
 * `metadata.creationTimestamp`.
 */
import { MeshmuxError } from '../core/errors.js';
import type { Timestamp } from '../core/resource.js';
import { fractionDigits } from '../core/go-duration.js';

/** The outcome of parsing a timestamp: the value, or why the text is not one. Never throws. */
export type TimestampParse =
  { readonly ok: true; readonly timestamp: Timestamp } | { readonly ok: false; readonly reason: string };

// Upper-case T and Z only: Go's time.Parse, which Istio and Kubernetes use, rejects lower case.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))$/;

/** Seconds from 0001-01-01 to 1970-01-01 and from 1970-01-01 to 10000-01-01: protobuf's Timestamp range. */
const MIN_SECONDS = -62_135_596_800;
const MAX_SECONDS = 253_402_300_799;

function isLeap(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeap(year) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days-from-civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146_097 + doe - 719_468;
}

/**
 * Parses an RFC 3339 date-time (`2024-05-01T12:00:00Z`, `2024-05-01T14:00:00.5+02:00`) into seconds
 * and nanos since the Unix epoch. Leap seconds and years outside
 * 0001–9999 are rejected, as Go's parser and protobuf reject them; digits past the ninth are
 * truncated, as Go truncates them. Pure; never throws.
 */
export function parseRfc3339(text: string): TimestampParse {
  const m = RFC3339.exec(text);
  const invalid = (why: string): TimestampParse => ({
    ok: false,
    reason: `${JSON.stringify(text)} is not an RFC 3339 timestamp: ${why} (e.g. "2024-05-01T12:00:00Z")`,
  });
  if (m === null) return invalid('wrong format');
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12) return invalid('month out of range');
  if (day < 1 || day > daysInMonth(year, month)) return invalid('day out of range');
  if (hour > 23 || minute > 59 || second > 59) return invalid('time of day out of range');
  let offset = 0;
  if (m[8] === undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return invalid('zone offset out of range');
    offset = (m[9] === '-' ? -1 : 1) * (oh * 3600 + om * 60);
  }
  const seconds = daysFromCivil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
  if (seconds < MIN_SECONDS || seconds > MAX_SECONDS) return invalid('outside years 0001 to 9999');
  const nanos = m[7] === undefined ? 0 : Number(m[7].slice(0, 9).padEnd(9, '0'));
  return { ok: true, timestamp: { seconds, nanos } };
}

/**
 * The canonical proto3 JSON text of a Timestamp: UTC with a `Z`, and 0, 3, 6 or 9 fractional digits
 * (`"2024-05-01T12:00:00Z"`, `"2024-05-01T12:00:00.500Z"`). Throws a `DECODE` MeshmuxError for a
 * Timestamp outside protobuf's range.
 */
export function formatRfc3339(ts: Timestamp): string {
  const { seconds, nanos } = ts;
  if (!Number.isInteger(seconds) || seconds < MIN_SECONDS || seconds > MAX_SECONDS) {
    throw new MeshmuxError('DECODE', `invalid google.protobuf.Timestamp: seconds ${seconds} out of range`);
  }
  if (!Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999) {
    throw new MeshmuxError('DECODE', `invalid google.protobuf.Timestamp: nanos ${nanos} out of range`);
  }
  // Date handles the whole 0001–9999 range in UTC; only the year needs padding to four digits.
  const iso = new Date(seconds * 1000).toISOString(); // e.g. 2024-05-01T12:00:00.000Z
  return `${iso.slice(0, 19)}${fractionDigits(nanos)}Z`;
}
