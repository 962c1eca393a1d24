/**
 * Preloaded with `--import` into a process under test: records every module it loads into the
 * file `MODULE_LOAD_LOG` names, the ES modules as they are resolved and the CommonJS ones at exit,
 * one URL per line. {@link loadedPackages} reads the file back as package names, {@link loadedFiles}
 * as paths.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The environment variable naming the log file. */
export const MODULE_LOAD_LOG = 'MODULE_LOAD_LOG';

const file = process.env[MODULE_LOAD_LOG];
if (file !== undefined) {
  register(new URL('./module-load-hooks.js', import.meta.url), { data: { log: file } });
  process.on('exit', () => {
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    appendFileSync(file, loaded.map((f) => `${pathToFileURL(f).href}\n`).join(''));
  });
}

/** The packages (`name` or `@scope/name`) of `node_modules` whose modules the log names. */
export function loadedPackages(logFile: string): ReadonlySet<string> {
  const packages = new Set<string>();
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(line);
    if (m?.[1] !== undefined) packages.add(m[1]);
  }
  return packages;
}

/** The paths of the files the log names, each once, in the order first named. */
export function loadedFiles(logFile: string): readonly string[] {
  const files = new Set<string>();
  for (const line of readFileSync(logFile, 'utf8').split('\n'))
    if (line.startsWith('file:')) files.add(fileURLToPath(line));
  return [...files];
}
