/**
 * Running a child as another user, for tests that need a user whom permissions stop (root reads
 * everything): that user must be able to run this Node and read this checkout.
 */
import { spawnSync } from 'node:child_process';
import { chmod, copyFile } from 'node:fs/promises';
import path from 'node:path';
import { CLI } from './meshmux-cli.js';
import { tempDir } from './meshmux-harness.js';

/** A user and group id to run a child as. */
export interface RunAsUser {
  readonly uid: number;
  readonly gid: number;
}

/** Whether `user` can run `node` on meshmux's CLI; undefined when it can, else what it said. */
function cannotRun(node: string, user: RunAsUser): string | undefined {
  const run = spawnSync(node, [CLI, '--version'], { ...user, encoding: 'utf8', timeout: 30_000 });
  if (run.error !== undefined) return `${node}: ${run.error.message}`;
  if (run.status !== 0) return `${node} ${CLI} --version: exit ${String(run.status)}: ${run.stderr}`;
  return undefined;
}

/**
 * A Node binary with which `user` runs meshmux's CLI: this process's own, or, when a folder above
 * it is closed to that user (a Node unpacked under a private temporary folder, say), a copy of it
 * in a temporary folder anyone may read, removed by `dispose`. Throws, naming what the user could
 * not reach, when even the copy cannot run the CLI (a checkout under a private home folder).
 */
export async function nodeRunnableBy(
  user: RunAsUser,
): Promise<{ node: string; dispose: () => Promise<void> }> {
  const own = cannotRun(process.execPath, user);
  if (own === undefined) return { node: process.execPath, dispose: () => Promise.resolve() };
  const copy = await tempDir('meshmux-node-');
  await chmod(copy.dir, 0o755);
  const node = path.join(copy.dir, 'node');
  await copyFile(process.execPath, node);
  await chmod(node, 0o755);
  const copied = cannotRun(node, user);
  if (copied !== undefined) {
    await copy.dispose();
    throw new Error(
      `user ${String(user.uid)} cannot run meshmux from this checkout (${copied}); ` +
        `with this Node it said: ${own}`,
    );
  }
  return { node, dispose: copy.dispose };
}
