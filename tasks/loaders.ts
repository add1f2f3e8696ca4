import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseTaskRow, TaskRowError, type Task } from '../core/taskModel.js';
import type { TaskLayout } from '../core/taskLayouts.js';

/** Loaders: JSONL files of dataset rows, and the toy suite (one folder per task). A bad row
 *  is reported with its line number and field; the caller chooses to skip it or fail. */

export const toyDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'toy');
/** The realistic development set: tasks made from real fixes between two PyPI releases
 *  (tasks/real/README.md); its repositories are built from the sdists by tasks/real/build.py. */
export const realDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'real');

/** The task sets kept in folders (one folder per task: task.json and repo/), by the name
 *  `tasks.source` and `floe audit` accept. */
export const FOLDER_SETS: Record<string, { dir: string; build?: string }> = {
  toy: { dir: toyDir },
  real: { dir: realDir, build: 'python3 tasks/real/build.py' },
};

export interface LoadResult { tasks: Task[]; errors: TaskRowError[] }
export type OnBadRow = 'skip' | 'fail';

function finish(tasks: Task[], errors: TaskRowError[], onBadRow: OnBadRow): LoadResult {
  if (errors.length && onBadRow === 'fail') {
    throw new Error(`${errors.length} bad task row(s):\n${errors.map((e) => `  ${e.message}`).join('\n')}\nFix the rows, or load with onBadRow: 'skip' to leave them out.`);
  }
  const seen = new Set<string>();
  for (const t of tasks) {
    if (seen.has(t.instanceId)) throw new Error(`duplicate instance_id ${t.instanceId}`);
    seen.add(t.instanceId);
  }
  return { tasks, errors };
}

export function loadJsonl(file: string, opts: { onBadRow: OnBadRow; dataset?: string; layout?: TaskLayout | 'auto' }): LoadResult {
  const text = fs.readFileSync(file, 'utf8');
  const tasks: Task[] = [];
  const errors: TaskRowError[] = [];
  const name = path.basename(file);
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    const where = `${name}:${i + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      errors.push(new TaskRowError(where, '', `not valid JSON (${(err as Error).message})`));
      return;
    }
    try {
      tasks.push(parseTaskRow(raw, where, opts.dataset ?? name.replace(/\.jsonl$/, ''), undefined, opts.layout ?? 'auto'));
    } catch (err) {
      if (err instanceof TaskRowError) errors.push(err);
      else throw err;
    }
  });
  return finish(tasks, errors, opts.onBadRow);
}

export function loadToySuite(opts: { onBadRow: OnBadRow; dir?: string }): LoadResult {
  return loadTaskFolders(opts.dir ?? toyDir, 'toy', opts.onBadRow);
}

/** One of FOLDER_SETS by name. */
export function loadFolderSet(name: string, onBadRow: OnBadRow): LoadResult {
  const set = FOLDER_SETS[name];
  if (!set) throw new Error(`unknown task set ${name}: the sets kept in folders are ${Object.keys(FOLDER_SETS).join(', ')}`);
  return loadTaskFolders(set.dir, name, onBadRow, set.build);
}

/** Tasks kept one folder each (task.json + repo/); `build` names the command that makes a
 *  missing repo/ (a set whose repositories are not committed). */
export function loadTaskFolders(dir: string, dataset: string, onBadRow: OnBadRow, build?: string): LoadResult {
  const tasks: Task[] = [];
  const errors: TaskRowError[] = [];
  for (const id of fs.readdirSync(dir).sort()) {
    const file = path.join(dir, id, 'task.json');
    if (!fs.existsSync(file)) continue;
    const where = path.relative(process.cwd(), file);
    try {
      if (!fs.existsSync(path.join(dir, id, 'repo'))) throw new TaskRowError(where, 'repo', `folder ${path.join(dir, id, 'repo')} is missing${build ? `: run \`${build}\` to make it` : ''}`);
      const task = parseTaskRow(JSON.parse(fs.readFileSync(file, 'utf8')), where, dataset, path.join(dir, id, 'repo'));
      if (task.instanceId !== id) throw new TaskRowError(where, 'instance_id', `is ${task.instanceId} but the folder is ${id}`);
      tasks.push(task);
    } catch (err) {
      if (err instanceof TaskRowError) errors.push(err);
      else if (err instanceof SyntaxError) errors.push(new TaskRowError(where, '', `not valid JSON (${err.message})`));
      else throw err;
    }
  }
  return finish(tasks, errors, onBadRow);
}

export interface PoolSelection {
  source: string; layout?: TaskLayout | 'auto'; include: string[]; limit: number; excludeLooseTests: boolean; onBadRow: OnBadRow;
  /** Task ids kept out of the pool (a run's held-out evaluation tasks), before the limit. */
  exclude?: string[];
  /** Applied by the loadTaskPool activity (core/dataAudit.ts applyAudit). */ audit?: { id: string; use: 'original' | 'curated' | 'strengthened' };
}

/** The tasks a run trains on, in a stable order. */
export function selectTasks(sel: PoolSelection): LoadResult {
  const loaded = sel.source in FOLDER_SETS ? loadFolderSet(sel.source, sel.onBadRow) : loadJsonl(sel.source, { onBadRow: sel.onBadRow, layout: sel.layout });
  let tasks = loaded.tasks;
  if (sel.include.length) {
    const missing = sel.include.filter((id) => !tasks.some((t) => t.instanceId === id));
    if (missing.length) throw new Error(`tasks.include names unknown task ids: ${missing.join(', ')}`);
    tasks = tasks.filter((t) => sel.include.includes(t.instanceId));
  }
  if (sel.excludeLooseTests) tasks = tasks.filter((t) => t.looseTests !== true);
  if (sel.exclude?.length) {
    const out = new Set(sel.exclude);
    const unknown = sel.exclude.filter((id) => !loaded.tasks.some((t) => t.instanceId === id));
    if (unknown.length) throw new Error(`evaluation.heldOut names unknown task ids: ${unknown.join(', ')}`);
    tasks = tasks.filter((t) => !out.has(t.instanceId));
  }
  if (sel.limit > 0) tasks = tasks.slice(0, sel.limit);
  return { tasks, errors: loaded.errors };
}
