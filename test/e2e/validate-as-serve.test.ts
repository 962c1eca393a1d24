import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PACKAGE_ROOT } from '../../src/core/paths.js';
import { CLI } from '../support/meshmux-cli.js';
import { serviceEntry, TestRepo } from '../support/git-fixtures.js';
import { tempDir } from '../support/meshmux-harness.js';

function validate(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, 'validate', ...args],
      { env: { ...process.env, MESHMUX_LOG_LEVEL: 'silent' } },
      (err, stdout, stderr) => resolve({ code: err === null ? 0 : Number(err.code), stdout, stderr }),
    );
  });
}

describe('meshmux validate reads as serve does', () => {
  it('refuses a folder’s file over --max-file-size and one that is not UTF-8, naming each', async () => {
    const { dir, dispose } = await tempDir('meshmux-validate-');
    try {
      await writeFile(path.join(dir, 'a-good.yaml'), serviceEntry('good', 'payments', 'good.example.com'));
      await writeFile(
        path.join(dir, 'b-large.yaml'),
        serviceEntry('large', 'payments', 'large.example.com') + `# ${'x'.repeat(2048)}\n`,
      );
      await writeFile(path.join(dir, 'c-latin1.yaml'), Buffer.from('kind: Service\n# caf\xe9\n', 'latin1'));
      const result = await validate('--max-file-size', '1Ki', dir);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /b-large\.yaml.*file too large: \d+ bytes is more than the limit of 1 KiB/);
      assert.match(result.stderr, /c-latin1\.yaml.*UTF-8/);
      assert.match(result.stdout, /1 valid object\(s\), 2 error\(s\)/);
      // Without the cap the large file is read like any other.
      const uncapped = await validate(dir);
      assert.match(uncapped.stdout, /2 valid object\(s\), 1 error\(s\)/);
    } finally {
      await dispose();
    }
  });

  it('serves the later file where two define one object, and says so', async () => {
    const { dir, dispose } = await tempDir('meshmux-validate-');
    try {
      await writeFile(path.join(dir, 'a.yaml'), serviceEntry('same', 'payments', 'a.example.com'));
      await writeFile(path.join(dir, 'b.yaml'), serviceEntry('same', 'payments', 'b.example.com'));
      const result = await validate(dir);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stderr, /warning: .*b\.yaml.*also defined in .*a\.yaml; this later file wins/);
      assert.match(result.stdout, /1 valid object\(s\), 0 error\(s\)/);
    } finally {
      await dispose();
    }
  });

  it('applies the size cap to a repository’s blobs as the git source does', async () => {
    const { dir, dispose } = await tempDir('meshmux-validate-git-');
    try {
      await mkdir(dir, { recursive: true });
      const repo = await TestRepo.create(dir, 'capped');
      await repo.commitAndPush(
        {
          'istio/small.yaml': serviceEntry('small', 'payments', 'small.example.com'),
          'istio/large.yaml':
            serviceEntry('large', 'payments', 'large.example.com') + `# ${'x'.repeat(2048)}\n`,
        },
        'one large',
      );
      const result = await validate('--max-file-size', '1Ki', repo.remote);
      assert.equal(result.code, 1, result.stderr);
      assert.match(result.stderr, /capped\.git:istio\/large\.yaml.*file too large/);
      assert.match(result.stdout, /1 valid object\(s\), 1 error\(s\)/);
    } finally {
      await dispose();
    }
  });

  it('refuses a size it cannot read', async () => {
    const result = await validate('--max-file-size', 'lots', PACKAGE_ROOT);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /lots is not a size/);
  });
});
