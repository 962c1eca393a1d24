/**
 * `meshmux validate --config F --source NAME`: one configured source read as `serve` reads it,
 * with a real git repository: the source's ref and paths decide what is read.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TestRepo, serviceEntry } from '../support/git-fixtures.js';
import { tempDir } from '../support/meshmux-harness.js';
import { runMeshmuxCli } from '../support/meshmux-cli.js';

const meshmuxCli = (args: string[], cwd: string) => runMeshmuxCli(args, cwd);

const BROKEN =
  'apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: broken, namespace: shop}\nspec: {hosts: 42}\n';

describe('meshmux validate --source', () => {
  let dir: string;
  let dispose: () => Promise<void>;

  before(async () => {
    ({ dir, dispose } = await tempDir('meshmux-validate-source-'));
    const repo = await TestRepo.create(dir);
    // main: an invalid document under istio/; release: valid under istio/, invalid outside it.
    await repo.commitAndPush({ 'istio/se.yaml': BROKEN }, 'broken on main');
    await repo.git('checkout', '--quiet', '-b', 'release');
    await repo.write({
      'istio/se.yaml': serviceEntry('payments', 'shop', 'payments.example.com'),
      'istio/se2.yaml': serviceEntry('ledger', 'shop', 'ledger.example.com'),
      'other/bad.yaml': BROKEN,
    });
    await repo.commit('release');
    await repo.push('release');
    await writeFile(
      path.join(dir, 'meshmux.yaml'),
      [
        'sources:',
        `  - {name: release, type: git, url: '${repo.fileUrl}', ref: release, paths: ['istio/**'], cacheDir: ./cache}`,
        `  - {name: main, type: git, url: '${repo.fileUrl}', ref: main, cacheDir: ./cache}`,
        '',
      ].join('\n'),
    );
  });
  after(() => dispose());

  it('reads a git source at its ref and under its paths only', async () => {
    const result = await meshmuxCli(['validate', '--config', 'meshmux.yaml', '--source', 'release'], dir);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /release \(git, revision [0-9a-f]{40}\): 2 valid object\(s\), 0 error\(s\)/);
  });

  it('names the file and line of an invalid document on the ref it reads, and exits 1', async () => {
    const result = await meshmuxCli(['validate', '--config', 'meshmux.yaml', '--source', 'main'], dir);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /istio\/se\.yaml/);
    assert.match(result.stdout, /0 valid object\(s\), 1 error\(s\)/);
  });

  it('says which sources exist when the name matches none', async () => {
    const result = await meshmuxCli(['validate', '--config', 'meshmux.yaml', '--source', 'nope'], dir);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /no source named nope \(sources: release, main\)/);
  });
});
