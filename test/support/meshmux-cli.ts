import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../src/core/paths.js';

/** The built and bundled CLI, as `npm start`, the package's `bin` and the image run it. */
export const CLI = path.join(PACKAGE_ROOT, 'dist', 'bundle', 'cli.js');

const execFileAsync = promisify(execFile);

/**
 * Runs `meshmux <args>` in `cwd` (default the package root) with a deadline of `timeoutMs`;
 * resolves to its exit code and both outputs, whatever the code.
 */
export async function runMeshmuxCli(
  args: readonly string[],
  cwd = PACKAGE_ROOT,
  timeoutMs = 60_000,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, [CLI, ...args], {
      cwd,
      timeout: timeoutMs,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
