/**
 * Turns the bytes of a YAML file into text the way Istio's YAML reader accepts them: valid UTF-8
 * only. Node's decoder would silently replace a bad byte with U+FFFD and serve a changed value;
 * Go's YAML reader refuses the file instead, and so does this.
 */
import { isUtf8 } from 'node:buffer';
import { MeshmuxError } from '../core/errors.js';

/** Where the first invalid UTF-8 sequence starts, or undefined when `bytes` is valid UTF-8. */
export function firstInvalidUtf8(bytes: Uint8Array): number | undefined {
  if (isUtf8(bytes)) return undefined;
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i] ?? 0;
    if (b < 0x80) {
      i++;
      continue;
    }
    // Lead byte → sequence length and the allowed range of the second byte (no overlongs, no
    // surrogates, nothing above U+10FFFF), as RFC 3629 defines well-formed UTF-8.
    let length: number;
    let low = 0x80;
    let high = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) length = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      if (b === 0xe0) low = 0xa0;
      if (b === 0xed) high = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      if (b === 0xf0) low = 0x90;
      if (b === 0xf4) high = 0x8f;
    } else return i;
    if (i + length > bytes.length) return i;
    const second = bytes[i + 1] ?? 0;
    if (second < low || second > high) return i;
    for (let k = 2; k < length; k++) {
      const c = bytes[i + k] ?? 0;
      if (c < 0x80 || c > 0xbf) return i;
    }
    i += length;
  }
  // isUtf8 and this scan disagree only if one of them is wrong; trust the stricter answer.
  return bytes.length;
}

/**
 * The text of `bytes`, which must be UTF-8 (a leading byte-order mark is dropped). Throws a
 * `YAML_SYNTAX` MeshmuxError naming `file`, the line and column (in bytes) and the offending byte.
 */
export function decodeUtf8(bytes: Uint8Array, file: string): string {
  const bad = firstInvalidUtf8(bytes);
  if (bad !== undefined) {
    let line = 1;
    let lineStart = 0;
    for (let i = 0; i < bad; i++) {
      if (bytes[i] === 0x0a) {
        line++;
        lineStart = i + 1;
      }
    }
    const byte = bytes[bad];
    const what = byte === undefined ? 'a truncated sequence' : `byte 0x${byte.toString(16).padStart(2, '0')}`;
    throw new MeshmuxError(
      'YAML_SYNTAX',
      `invalid UTF-8: ${what} at column ${bad - lineStart + 1} (byte offset ${bad}); YAML must be UTF-8`,
      { file, line },
    );
  }
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
