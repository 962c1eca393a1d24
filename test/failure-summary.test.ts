/**
 * The reporter `npm run test:unit` adds after TAP names every failed test at the very end of the
 * output, so a log that keeps only its tail still says which test failed and why. Runs the real
 * `node --test` on a small file of passing and failing tests.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

const REPORTER = fileURLToPath(new URL('./support/failure-summary.js', import.meta.url));

const SPEC = `
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
describe('a suite', () => {
  it('passes quietly', () => {});
  it('compares two numbers', () => assert.equal(1, 2, 'one is not two'));
});
it('throws on its own', () => { throw new Error('out of range'); });
`;

interface Run {
  readonly code: number;
  readonly stdout: string;
}

/** The environment without the variable by which a test file knows the runner started it. */
function runnerEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['NODE_TEST_CONTEXT'];
  return env;
}

function runNodeTest(args: readonly string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--test', ...args], { cwd, env: runnerEnv() }, (error, stdout) => {
      resolve({ code: typeof error?.code === 'number' ? error.code : 0, stdout });
    });
  });
}

const reporterArgs = [
  '--test-reporter=tap',
  '--test-reporter-destination=stdout',
  `--test-reporter=${REPORTER}`,
  '--test-reporter-destination=stdout',
];

describe('the failure summary reporter', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'failure-summary-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('ends the output with each failed test, its file and its error, and no passing test', async () => {
    await writeFile(join(dir, 'mixed.test.mjs'), SPEC);
    const run = await runNodeTest([...reporterArgs, 'mixed.test.mjs'], dir);
    assert.equal(run.code, 1);
    const summaryAt = run.stdout.lastIndexOf('# 2 failed tests:');
    assert.ok(summaryAt > run.stdout.lastIndexOf('# duration_ms'), run.stdout);
    const summary = run.stdout.slice(summaryAt);
    assert.match(summary, /✖ mixed\.test\.mjs: compares two numbers\n\s+AssertionError.*one is not two/);
    assert.match(summary, /✖ mixed\.test\.mjs: throws on its own\n\s+Error: out of range/);
    assert.doesNotMatch(summary, /a suite|passes quietly/);
    assert.doesNotMatch(summary, /\(node:internal/);
  });

  it('adds nothing to a run where every test passed', async () => {
    await writeFile(
      join(dir, 'green.test.mjs'),
      `import { it } from 'node:test';\nit('passes', () => {});\n`,
    );
    const run = await runNodeTest([...reporterArgs, 'green.test.mjs'], dir);
    assert.equal(run.code, 0);
    assert.match(run.stdout.trimEnd().split('\n').at(-1) ?? '', /^# duration_ms /);
    assert.doesNotMatch(run.stdout, /failed test/);
  });
});
