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

/**
 * The image's entry point after `tini --`: node, node's own flags, and the path of the program it
 * runs (where `npm install --global` put the package in the image).
 */
export async function imageEntrypoint(): Promise<{ nodeArgs: string[]; script: string }> {
  const text = await readFile(path.join(PACKAGE_ROOT, 'Containerfile'), 'utf8');
  const line = /^ENTRYPOINT (\[.*\])$/m.exec(text.split(/^FROM /m).at(-1) ?? '')?.[1];
  assert.ok(line !== undefined, 'the image has an entry point');
  const argv = JSON.parse(line) as string[];
  const at = argv.indexOf('--');
  assert.ok(at >= 0 && argv[at + 1] === 'node', `the entry point runs node under tini: ${line}`);
  const rest = argv.slice(at + 2);
  const script = rest.at(-1) ?? '';
  assert.ok(script.endsWith('/meshmux/dist/src/cli.js'), `the entry point runs meshmux's cli: ${line}`);
  return { nodeArgs: rest.slice(0, -1), script };
}
