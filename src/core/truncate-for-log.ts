/** Longest client-supplied string put whole into a log line, status page or debug page. */
export const MAX_LOGGED_CHARS = 256;

/**
 * `text` cut to `max` characters, with how much was left out: a client decides what it sends, so
 * a 10 MB NACK message or node id must not become a 10 MB log line. Shorter text is returned as is.
 * The cut text is a copy: in V8 a slice of a long string keeps the whole of it alive, and a
 * truncated string may be kept (a stream's last acknowledged version).
 */
export function truncateForLog(text: string, max = MAX_LOGGED_CHARS): string {
  if (text.length <= max) return text;
  const cut = Buffer.from(text.slice(0, max), 'utf16le').toString('utf16le');
  return `${cut}… (${text.length - max} more characters)`;
}

/**
 * A client-supplied map (node metadata) fit for a log line or a debug page: at most `maxKeys`
 * keys, each key and string value truncated, nested values summarized by their JSON size.
 */
export function truncateRecordForLog(
  record: Readonly<Record<string, unknown>>,
  maxKeys = 32,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const keys = Object.keys(record);
  for (const key of keys.slice(0, maxKeys)) {
    const value = record[key];
    out[truncateForLog(key, 64)] =
      typeof value === 'string'
        ? truncateForLog(value)
        : typeof value === 'number' || typeof value === 'boolean' || value === null
          ? value
          : truncateForLog(JSON.stringify(value) ?? '', 64);
  }
  if (keys.length > maxKeys) out['…'] = `${keys.length - maxKeys} more keys`;
  return out;
}
