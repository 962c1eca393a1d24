/**
 * The cache of compiled code the image points node at (`NODE_COMPILE_CACHE`): under /tmp, the one
 * path besides the state folder that the image's read-only root leaves writable, which the
 * deployment mounts as a volume that outlives the container's restarts; filled by one start of the
 * CLI and read by the next, so a restarted meshmux compiles none of its modules again. Node 20 has
 * no such cache and ignores the variable.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import * as nodeModule from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { MESHMUX_VERSION } from '../../src/core/version.js';
import { imageEnv } from '../support/image-env.js';
import { CLI } from '../support/meshmux-cli.js';

const run = promisify(execFile);

/** Whether this node has a compile cache (22.1 and later). */
const HAS_COMPILE_CACHE =
  typeof (nodeModule as unknown as { enableCompileCache?: unknown }).enableCompileCache === 'function';

describe("the image's compile cache", () => {
  it('lives under /tmp, which the deployment mounts writable', async () => {
    const dir = await imageEnv('NODE_COMPILE_CACHE');
    assert.ok(dir.startsWith('/tmp/'), `NODE_COMPILE_CACHE=${dir}`);
    const deployment = await readFile(
      path.join(PACKAGE_ROOT, 'deploy', 'kubernetes', 'deployment.yaml'),
      'utf8',
    );
    assert.match(deployment, /mountPath: \/tmp \}/, 'the deployment mounts a volume at /tmp');
    assert.match(deployment, /readOnlyRootFilesystem: true/);
  });

  it('is filled by one start of the CLI and read by the next, or ignored by a node without one', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'meshmux-compile-cache-'));
    try {
      const env = { ...process.env, NODE_COMPILE_CACHE: dir, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' };
      const first = await run(process.execPath, [CLI, '--version'], { env });
      assert.equal(first.stdout.trim(), MESHMUX_VERSION);
      const second = await run(process.execPath, [CLI, '--version'], { env });
      assert.equal(second.stdout.trim(), MESHMUX_VERSION);
      if (!HAS_COMPILE_CACHE) {
        assert.deepEqual(await readdir(dir), [], 'node 20 writes nothing there');
        return;
      }
      // node reports each file it read from the cache and whether it took the compiled code.
      const lines = second.stderr.split('\n');
      const read = lines.filter((line) => / reading cache from .*\/dist\/bundle\//.test(line));
      const taken = lines.filter((line) => / was accepted/.test(line) && line.includes('/dist/bundle/'));
      assert.ok(
        taken.some((line) => line.includes('/dist/bundle/cli.js ')),
        `cli.js compiled again:\n${second.stderr.slice(0, 2000)}`,
      );
      assert.ok(read.length > 1, 'the entry and the chunks it imports are read from the cache');
      assert.equal(taken.length, read.length, `some file compiled again:\n${second.stderr.slice(0, 3000)}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
