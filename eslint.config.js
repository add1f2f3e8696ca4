import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

/** floe's layers, lowest first: a module imports only from its own layer and the ones below it
 *  (docs/architecture.md, "Layers"). test/unit/layers.test.ts plants a violation to prove the rule
 *  fires. Workflows may import activities for their types alone (proxyActivities<typeof …>). */
const LAYERS = [
  ['core'],
  ['db', 'tasks', 'store'],
  ['activities'],
  ['workflows'],
  ['infra', 'report'],
  ['client', 'workers'],
  ['cli'],
];
const ABOVE_ALL = ['bench', 'test'];

function layerRule(dir) {
  const at = LAYERS.findIndex((l) => l.includes(dir));
  const above = [...LAYERS.slice(at + 1).flat(), ...ABOVE_ALL];
  // db, tasks and store share a rung but stay apart: each imports only core
  const siblings = at === 1 ? LAYERS[1].filter((d) => d !== dir) : [];
  const forbidden = [...above, ...siblings].filter((d) => !(dir === 'workflows' && d === 'activities'));
  const patterns = [{ group: forbidden.flatMap((d) => [`**/${d}/*`, `**/${d}/**`]), message: `${dir}/ is below ${forbidden.join(', ')}: import from its own layer and the ones below (docs/architecture.md, "Layers")` }];
  if (dir === 'workflows') {
    patterns.push({ group: ['**/activities/*', '**/activities/**'], allowTypeImports: true, message: 'side effects belong in activities; workflows import their types only' });
    patterns.push({ group: ['pg', 'dockerode'], message: 'side effects belong in activities' });
  }
  // Workflow code is bundled into Temporal's deterministic sandbox, and core/ with it: no Node APIs, no I/O.
  const sandboxed = dir === 'workflows' || dir === 'core';
  return {
    files: [`${dir}/**/*.ts`],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        ...(sandboxed ? { paths: nodeBuiltins.map((name) => ({ name, message: 'Workflow and core code must not import Node APIs (determinism); do the work in an activity.' })) } : {}),
        patterns,
      }],
      ...(sandboxed ? { 'no-restricted-globals': ['error', 'process', 'Buffer', 'setImmediate', '__dirname', 'require'] } : {}),
    },
  };
}

/** The viewer's pages (report/viewer/, all but its server) are rendered from plain data and unit
 *  tested without a server: no Node API there either, on top of the report layer's rule (a rule's
 *  options replace the earlier block's, so the layer's patterns are repeated). */
function pureViewerRule() {
  const layer = layerRule('report');
  const [, options] = layer.rules['@typescript-eslint/no-restricted-imports'];
  return {
    files: ['report/viewer/**/*.ts'],
    ignores: ['report/viewer/server.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        ...options,
        paths: nodeBuiltins.map((name) => ({ name, message: 'report/viewer/ renders pages from plain data (unit-tested without a server): no Node APIs; I/O belongs in report/viewer/server.ts.' })),
      }],
    },
  };
}

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
  ...LAYERS.flat().map(layerRule),
  pureViewerRule(),
);
