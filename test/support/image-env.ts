import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { PACKAGE_ROOT } from '../../src/core/paths.js';

/** The value the Containerfile's last stage gives `name` with `ENV name=value` (quotes taken off). */
export async function imageEnv(name: string): Promise<string> {
  const text = await readFile(path.join(PACKAGE_ROOT, 'Containerfile'), 'utf8');
  const last = text.split(/^FROM /m).at(-1) ?? '';
  const match = new RegExp(`^ENV ${name}=(.+)$`, 'm').exec(last);
  assert.ok(match?.[1] !== undefined, `the image sets ${name}`);
  return match[1].replace(/^"|"$/g, '').trim();
}

/** The command `npm start` runs (the package's `start` script). */
export async function npmStartScript(): Promise<string> {
  const pkg = JSON.parse(await readFile(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  return pkg.scripts['start'] ?? '';
}
