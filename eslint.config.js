import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      '.tmp/**',
      '.stryker-tmp/**',
      'reports/**',
      '*.cjs',
      'eslint.config.js',
      'stryker.config.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['bundle.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          // Each spread item is an argument on the stack: some 125,000 overflow it.
          selector: "CallExpression[callee.property.name='push'] > SpreadElement",
          message: 'A list of any length goes in with appendAll (src/core/append-all.ts), not push(...list).',
        },
      ],
      'no-restricted-imports': [
        'error',
        {
          name: 'rxjs',
          message: "Import RxJS from src/core/rx.ts: the package's index loads every operator at start.",
        },
      ],
    },
  },
  {
    files: ['src/core/rx.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] },
          ],
        },
      ],
    },
  },
);
