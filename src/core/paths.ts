import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(start: string): string {
  let dir = start;
  for (;;) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'proto'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`meshmux: cannot find the package root above ${start}`);
    dir = parent;
  }
}

/** The installed package's root: the folder holding package.json, proto/ and config/. */
export const PACKAGE_ROOT = findPackageRoot(path.dirname(fileURLToPath(import.meta.url)));

/** The folder of our .proto files. */
export const PROTO_DIR = path.join(PACKAGE_ROOT, 'proto');
