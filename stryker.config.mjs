// Mutation testing of the modules that decide what istiods receive. `npm run mutants` runs them
// all; `MUTATE=src/merge/source-rules.ts npm run mutants` runs one (a comma-separated list works
// too). Each module names the compiled test files that exercise it, so a mutant costs only those.
// Results are incremental (reports/stryker-incremental.json): a rerun only tests changed code.

/** Module → the test files (compiled, run with node's test runner, which emits TAP) that cover it. */
const MODULES = {
  'src/merge/source-rules.ts': ['dist/test/merge/*.test.js'],
  'src/merge/source-ledger.ts': ['dist/test/merge/*.test.js'],
  // The ledger's parts: their own specifications (a lower bound: the merge tests use them too).
  'src/merge/provenance.ts': [
    'dist/test/merge/provenance.test.js',
    'dist/test/merge/source-ledger.test.js',
    'dist/test/merge/source-ledger-identity.test.js',
    'dist/test/merge/source-ledger-admission.test.js',
    'dist/test/merge/creation-times.test.js',
  ],
  'src/merge/kind-state-view.ts': [
    'dist/test/merge/source-ledger.test.js',
    'dist/test/merge/source-ledger-admission.test.js',
  ],
  'src/merge/identity-diff.ts': [
    'dist/test/merge/ledger-parts.test.js',
    'dist/test/merge/source-ledger-identity.test.js',
    'dist/test/merge/source-ledger-admission.test.js',
  ],
  'src/merge/update-fold.ts': ['dist/test/merge/ledger-parts.test.js'],
  'src/merge/update-guards.ts': ['dist/test/merge/ledger-parts.test.js'],
  'src/merge/source-readiness.ts': ['dist/test/merge/ledger-parts.test.js'],
  // The table's own tests first (the model test kills most mutants in a few seconds); the merge
  // engine's tests reach it through the engine.
  'src/merge/kind-table.ts': [
    'dist/test/merge/kind-table-model.test.js',
    'dist/test/merge/kind-table-semantic.test.js',
    'dist/test/merge/kind-table-bulk.test.js',
    'dist/test/merge/semantic-conflicts.test.js',
    'dist/test/merge/merge-engine.test.js',
  ],
  'src/merge/merge-engine.ts': ['dist/test/merge/*.test.js'],
  'src/downstream/policy/client-policy.ts': [
    'dist/test/downstream/client-policy.test.js',
    'dist/test/downstream/policy-set.test.js',
    'dist/test/downstream/policy-views.test.js',
    'dist/test/e2e/policies.test.js',
  ],
  'src/downstream/policy/policy-set.ts': [
    'dist/test/downstream/policy-set.test.js',
    'dist/test/downstream/policy-views.test.js',
    'dist/test/e2e/policies.test.js',
  ],
  'src/downstream/view-contents.ts': [
    'dist/test/downstream/view-contents.test.js',
    'dist/test/downstream/policy-views.test.js',
  ],
  'src/downstream/resource-encoder.ts': [
    'dist/test/downstream/resource-encoder.test.js',
    'dist/test/downstream/policy-views.test.js',
    'dist/test/downstream/framed-bytes-memory.test.js',
  ],
  // The blocks a response's objects are concatenated in, built whole or spliced from kept ones.
  'src/downstream/frame-blocks.ts': [
    'dist/test/downstream/frame-blocks.test.js',
    'dist/test/downstream/framed-bytes-memory.test.js',
  ],
  // Whether an upstream's response is its kept state sent again, and the bytes it hands on if not.
  'src/upstream/xds/resent-response-matcher.ts': ['dist/test/upstream/resent-response-matcher.test.js'],
  // The bytes kept responses are made of: its own properties, then the layouts read from it.
  'src/upstream/xds/byte-rope.ts': [
    'dist/test/upstream/byte-rope.test.js',
    'dist/test/upstream/discovery-response.test.js',
  ],
};

const selected = (process.env.MUTATE ?? Object.keys(MODULES).join(','))
  .split(',')
  .map((m) => m.trim())
  .filter((m) => m !== '');
for (const m of selected) {
  if (!(m in MODULES)) throw new Error(`MUTATE: ${m} is not one of ${Object.keys(MODULES).join(', ')}`);
}

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  plugins: ['@stryker-mutator/tap-runner'],
  testRunner: 'tap',
  tap: { testFiles: [...new Set(selected.flatMap((m) => MODULES[m]))], forceBail: true },
  // The sandbox is compiled once with the instrumented sources; tests run from dist/.
  buildCommand: 'tsc -p tsconfig.json',
  mutate: selected,
  ignorePatterns: ['dist', 'reports', '.tmp'],
  coverageAnalysis: 'perTest',
  // Static mutants (module-level constants) would need every test file for each: not worth the time.
  ignoreStatic: true,
  concurrency: 2,
  timeoutMS: 30_000,
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  thresholds: { high: 90, low: 80, break: null },
};
