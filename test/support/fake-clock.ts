/**
 * A process whose wall clock runs ahead of the machine's, through libfaketime (Debian package
 * `faketime`): preloaded into the process, it moves what `Date.now()` reads, while timers and
 * `performance.now()` (the monotonic clock) keep the machine's pace.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { missingPeerLine } from './required-peer.js';

const LIBRARY = 'libfaketime.so.1';

/** Where the library lies (under the multiarch folder of the machine), or undefined. */
function libraryPath(): string | undefined {
  for (const base of ['/usr/lib', '/usr/lib64']) {
    let entries: string[];
    try {
      entries = readdirSync(base);
    } catch {
      continue;
    }
    for (const folder of ['faketime', ...entries.map((e) => path.join(e, 'faketime'))]) {
      try {
        if (readdirSync(path.join(base, folder)).includes(LIBRARY)) return path.join(base, folder, LIBRARY);
      } catch {
        // Not a folder of it.
      }
    }
  }
  return undefined;
}

/** The line naming the package when libfaketime is missing, else undefined. */
export function fakeClockMissing(): string | undefined {
  return libraryPath() === undefined ? missingPeerLine('libfaketime', 'faketime') : undefined;
}

/** Environment variables that start a process with its wall clock `offset` ahead (`+1h`, say). */
export function clockAheadEnv(offset: string): Record<string, string> {
  const library = libraryPath();
  if (library === undefined) throw new Error(fakeClockMissing());
  return { LD_PRELOAD: library, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}
