import fs from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, describe, expect, it } from 'vitest';

/** The layering rules: no TypeScript module imports from a layer above its own (eslint.config.js
 *  LAYERS, checked for the whole tree by `npm run lint`), and no import cycle inside the Python
 *  packages. Each rule is shown to fire on a planted violation. */

const root = path.join(import.meta.dirname, '..', '..');
const planted: string[] = [];

afterAll(() => {
  for (const f of planted) fs.rmSync(f, { force: true });
});

async function lintPlanted(rel: string, source: string): Promise<string[]> {
  const file = path.join(root, rel);
  planted.push(file);
  fs.writeFileSync(file, source);
  const [result] = await new ESLint({ cwd: root }).lintFiles([file]);
  return result.messages.filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports').map((m) => m.message);
}

describe('TypeScript layers', () => {
  it('a module importing from a layer above it fails lint, naming the layers; the same import from above passes', async () => {
    const up = "import type { RunStatus } from '../workflows/messages.js';\nexport type Seen = RunStatus;\n";
    expect(await lintPlanted('activities/zz_planted_layer_violation.ts', up)).toEqual([expect.stringMatching(/activities\/ is below workflows/)]);
    expect(await lintPlanted('core/zz_planted_layer_violation.ts', "import { loadSettings } from '../infra/settings.js';\nexport const seen = loadSettings;\n"))
      .toEqual([expect.stringMatching(/core\/ is below .*infra/)]);
    // the control: a client may import workflow messages
    expect(await lintPlanted('client/zz_planted_layer_violation.ts', up)).toEqual([]);
  }, 120_000);

  it('the viewer\'s pages import no Node API (its server may)', async () => {
    const nodeImport = "import fs from 'node:fs';\nexport const seen = fs;\n";
    expect(await lintPlanted('report/viewer/zz_planted_layer_violation.ts', nodeImport)).toEqual([expect.stringMatching(/report\/viewer\/ renders pages from plain data/)]);
    // the layer rule still holds there
    expect(await lintPlanted('report/viewer/zz_planted_layer_violation.ts', "import { UsageError } from '../../cli/args.js';\nexport const seen = UsageError;\n"))
      .toEqual([expect.stringMatching(/report\/ is below .*cli/)]);
    // the control: the same import elsewhere in report/ passes
    expect(await lintPlanted('report/zz_planted_layer_violation.ts', nodeImport)).toEqual([]);
  }, 120_000);

  it('workflows may import activities for their types only', async () => {
    expect(await lintPlanted('workflows/zz_planted_layer_violation.ts', "import type { DbActivities } from '../activities/db.js';\nexport type Seen = DbActivities;\n")).toEqual([]);
    expect(await lintPlanted('workflows/zz_planted_layer_violation.ts', "import { createDbActivities } from '../activities/db.js';\nexport const seen = createDbActivities;\n"))
      .toEqual([expect.stringMatching(/workflows import their types only/)]);
  }, 120_000);
});

/** The package-internal imports of each module of a Python package: `from .x import`, `from . import
 *  x`, `from pkg.x import`, `import pkg.x`, wherever they stand (an import inside a function is a
 *  dependency too). */
export function pythonImports(pkg: string, modules: Record<string, string>): Record<string, string[]> {
  const names = new Set(Object.keys(modules));
  const out: Record<string, string[]> = {};
  for (const [mod, src] of Object.entries(modules)) {
    const deps = new Set<string>();
    const base = mod.includes('.') ? mod.slice(0, mod.lastIndexOf('.')) : '';
    const resolve = (dotted: string) => { for (let d = dotted; d; d = d.includes('.') ? d.slice(0, d.lastIndexOf('.')) : '') if (names.has(d) && d !== mod) { deps.add(d); return; } };
    const names_ = (list: string) => list.replace(/[()]/g, '').split(',').map((x) => x.trim().split(/\s+/)[0]).filter((x) => x && x !== '*');
    const each = (at: string, list: string) => { for (const n of names_(list)) resolve(at ? `${at}.${n}` : n); if (at) resolve(at); };
    for (const m of src.matchAll(/^\s*from\s+(\.+)([\w.]*)\s+import\s+(\([^)]*\)|[^\n#;]+)/gm)) {
      const parts = base.split('.').filter(Boolean);
      each([...parts.slice(0, Math.max(0, parts.length - (m[1].length - 1))), ...(m[2] ? [m[2]] : [])].join('.'), m[3]);
    }
    for (const m of src.matchAll(new RegExp(`^\\s*from\\s+${pkg}((?:\\.[\\w]+)*)\\s+import\\s+(\\([^)]*\\)|[^\\n#;]+)`, 'gm'))) each(m[1].slice(1), m[2]);
    for (const m of src.matchAll(new RegExp(`^\\s*import\\s+${pkg}\\.([\\w.]+)`, 'gm'))) resolve(m[1]);
    out[mod] = [...deps].sort();
  }
  return out;
}

/** One cycle of the import graph, as a path that ends where it starts (null: none). */
export function findCycle(graph: Record<string, string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string): string[] | null => {
    if (state.get(n) === 'done') return null;
    if (state.get(n) === 'open') return [...stack.slice(stack.indexOf(n)), n];
    state.set(n, 'open');
    stack.push(n);
    for (const d of graph[n] ?? []) {
      const c = visit(d);
      if (c) return c;
    }
    stack.pop();
    state.set(n, 'done');
    return null;
  };
  for (const n of Object.keys(graph).sort()) {
    const c = visit(n);
    if (c) return c;
  }
  return null;
}

function packageModules(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = path.join(rel, e.name);
      if (e.isDirectory() && e.name !== '__pycache__') walk(r);
      else if (e.name.endsWith('.py')) out[r.replace(/\.py$/, '').replace(/\/__init__$/, '').split(path.sep).join('.') || '__init__'] = fs.readFileSync(path.join(dir, r), 'utf8');
    }
  };
  walk('');
  return out;
}

describe('Python packages', () => {
  for (const [pkg, dir] of [['floe_engine', 'engine/floe_engine'], ['floe_harness', 'harness/floe_harness']] as const) {
    it(`${pkg} has no import cycle`, () => {
      const graph = pythonImports(pkg, packageModules(path.join(root, dir)));
      expect(Object.keys(graph).length).toBeGreaterThan(3);
      expect(findCycle(graph)).toBeNull();
    });
  }

  it('negative control: a planted cycle is found, whatever the import form (relative, absolute, inside a function)', () => {
    const graph = pythonImports('pkg', {
      a: 'from . import d\nfrom .b import (\n    thing,\n    other,\n)\n',
      b: 'def later():\n    from pkg.sub import c\n',
      'sub.c': 'from .. import a\n',
      d: 'import os\n',
    });
    expect(graph).toEqual({ a: ['b', 'd'], b: ['sub.c'], 'sub.c': ['a'], d: [] });
    expect(findCycle(graph)).toEqual(['a', 'b', 'sub.c', 'a']);
    expect(findCycle({ a: ['b'], b: [] })).toBeNull();
  });
});
