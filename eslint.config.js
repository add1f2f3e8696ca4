import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  { ignores: ['node_modules/**', '.floe/**', 'engine/**', 'test/out/**', 'bench/out/**', 'runs/**', 'tasks/toy/**/repo/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflow code is bundled into Temporal's deterministic sandbox: no Node APIs, no I/O.
    files: ['workflows/**/*.ts', 'core/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: nodeBuiltins.map((name) => ({ name, message: 'Workflow and core code must not import Node APIs (determinism); do the work in an activity.' })),
        // activities may be imported for their types only (proxyActivities<typeof …>)
        patterns: [{ group: ['pg', 'dockerode', '**/activities/*', '**/infra/*'], allowTypeImports: true, message: 'side effects belong in activities; import their types only' }],
      }],
      'no-restricted-globals': ['error', 'process', 'Buffer', 'setImmediate', '__dirname', 'require'],
    },
  },
  {
    // The store (all Postgres access) is below activities, the CLI and the report: it knows
    // tables and core's types, nothing above it.
    files: ['store/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        patterns: [{ group: ['**/activities/**', '**/workflows/**', '**/cli/**', '**/report/**', '**/workers/**', '**/client/**', '**/infra/**', '**/bench/**'], message: 'store/ is below activities, workflows, the CLI and the report: it may import core/ (types) and pg only' }],
      }],
    },
  },
);
