import { poolPass, type TaskScore } from './passAtK.js';

/** The task lists of `floe eval` (cli/eval.ts): a named list of task ids, as the published
 *  recipe scores a fixed subset. A file holds one id per line (blank lines and `#` comments
 *  skipped) or a JSON array of ids. */

export class TaskListError extends Error {}

/** The ids a task-list file holds, in order. Errors name the file and what to fix. */
export function parseTaskList(text: string, source: string): string[] {
  const trimmed = text.trim();
  let ids: unknown[];
  if (trimmed.startsWith('[')) {
    try {
      ids = JSON.parse(trimmed) as unknown[];
    } catch (err) {
      throw new TaskListError(`${source}: not a JSON array of task ids (${(err as Error).message}); write one id per line, or a JSON array of strings`);
    }
    if (!Array.isArray(ids)) throw new TaskListError(`${source}: not a JSON array of task ids`);
    const bad = ids.filter((x) => typeof x !== 'string' || !x.trim());
    if (bad.length) throw new TaskListError(`${source}: every entry must be a task id string (got ${JSON.stringify(bad[0])})`);
    ids = ids.map((x) => (x as string).trim());
  } else {
    ids = trimmed.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
  }
  const out = ids as string[];
  if (!out.length) throw new TaskListError(`${source}: no task ids in it; write one id per line (e.g. toy__c_to_f), or a JSON array`);
  const seen = new Set<string>();
  const dup = out.find((id) => (seen.has(id) ? true : (seen.add(id), false)));
  if (dup) throw new TaskListError(`${source}: task id ${dup} is listed twice; each task is attempted k times once, so list it once`);
  return out;
}

/** The union of several lists' ids, each once, in first-seen order. */
export function unionOfLists(lists: readonly { taskIds: readonly string[] }[]): string[] {
  return [...new Set(lists.flatMap((l) => l.taskIds))];
}

/** pass@1 and pass@k of each list: the mean over its tasks of the per-task scores. */
export function listPass(scores: readonly TaskScore[], lists: readonly { name: string; taskIds: readonly string[] }[]): { name: string; tasks: number; pass1: number | null; passK: number | null; failed: number }[] {
  const byId = new Map(scores.map((s) => [s.taskId, s]));
  return lists.map((l) => {
    const mine = l.taskIds.map((id) => byId.get(id)).filter((s): s is TaskScore => s !== undefined);
    return { name: l.name, tasks: l.taskIds.length, ...poolPass(mine), failed: mine.reduce((a, s) => a + s.failed, 0) };
  });
}
