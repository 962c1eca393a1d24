/**
 * Headless Chromium (Debian package `chromium`) for tests of pages: the DOM as the browser built
 * it, or a screenshot. A fresh profile per run, removed after.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The browser's path, or undefined when it is not installed. */
export async function findChromium(): Promise<string | undefined> {
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      const { stdout } = await run('sh', ['-c', `command -v ${name}`]);
      if (stdout.trim() !== '') return stdout.trim();
    } catch {
      // try the next name
    }
  }
  return undefined;
}

async function headless<T>(
  chromium: string,
  args: string[],
  url: string,
  read: (profile: string) => Promise<T>,
  stdout?: (s: string) => void,
): Promise<T> {
  const profile = await mkdtemp(path.join(tmpdir(), 'meshmux-chromium-'));
  try {
    const result = await run(
      chromium,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--disable-crash-reporter',
        '--disable-breakpad',
        '--hide-scrollbars',
        `--user-data-dir=${profile}`,
        ...args.map((a) => a.replace('{profile}', profile)),
        url,
      ],
      { timeout: 60_000, maxBuffer: 32 * 1024 * 1024 },
    );
    stdout?.(result.stdout);
    return await read(profile);
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}

/** The DOM of `url` after its scripts ran, serialised. */
export async function dumpDom(chromium: string, url: string): Promise<string> {
  let dom = '';
  await headless(
    chromium,
    ['--dump-dom'],
    url,
    () => Promise.resolve(),
    (s) => (dom = s),
  );
  return dom;
}

/** A PNG screenshot of `url` in a window `width`×`height` pixels. */
export function screenshot(chromium: string, url: string, width: number, height: number): Promise<Buffer> {
  return headless(
    chromium,
    [`--window-size=${width},${height}`, '--force-device-scale-factor=1', '--screenshot={profile}/shot.png'],
    url,
    (profile) => readFile(path.join(profile, 'shot.png')),
  );
}
