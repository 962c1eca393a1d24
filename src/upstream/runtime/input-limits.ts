import { MeshmuxError } from '../../core/errors.js';

/**
 * The largest file (file source) or blob (git source) read by default: 32 MiB. Far above any real
 * Istio file, far below what would exhaust the heap while it is parsed (a parsed YAML tree costs
 * many times its text).
 */
export const DEFAULT_MAX_FILE_BYTES = 32 * 1024 * 1024;

/** `33554432` → `32 MiB`; exact multiples only, otherwise bytes. */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`;
  }
  return `${bytes} bytes`;
}

/**
 * The error for a file that is larger than the cap: it names the file, its size and the cap.
 * The file is not read; what it held before stays served.
 */
export function fileTooLarge(file: string, size: number, maxBytes: number): MeshmuxError {
  return new MeshmuxError(
    'LIMIT',
    `file too large: ${size} bytes is more than the limit of ${formatBytes(maxBytes)} (maxFileSize); not read`,
    { file },
  );
}
