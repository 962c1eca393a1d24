import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from './paths.js';

/** The installed package's version, from its package.json (`meshmux --version`, `meshmux_build_info`). */
export const MESHMUX_VERSION: string = (
  JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;
