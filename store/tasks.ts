import type { Task } from '../core/taskModel.js';
import type { Queryable } from './pool.js';

/** Tasks known to floe, with their validated rows. Table: tasks
 *  (db/migrations/001_audit_history.sql). A task's state in one run's pool is task_stats
 *  (store/evictions.ts). */

/** Insert or refresh a task's row; a known loose_tests verdict (the data audit's) is kept
 *  when the new row does not know it. */
export async function upsertTask(db: Queryable, t: Task): Promise<void> {
  await db.query(
    `insert into tasks (task_id, source, repo, loose_tests, instance) values ($1, $2, $3, $4, $5)
     on conflict (task_id) do update set instance = excluded.instance, loose_tests = coalesce(excluded.loose_tests, tasks.loose_tests)`,
    [t.instanceId, t.dataset, t.repo, t.looseTests, JSON.stringify(t)],
  );
}

/** The validated task row (null: not in the tasks table). */
export async function getTask(db: Queryable, taskId: string): Promise<Task | null> {
  const r = await db.query<{ instance: Task }>('select instance from tasks where task_id = $1', [taskId]);
  return r.rows[0]?.instance ?? null;
}

/** Only the issue text of a task, without reading the whole row (null: unknown task). */
export async function getProblemStatement(db: Queryable, taskId: string): Promise<string | null> {
  const r = await db.query<{ problem: string }>(`select instance->>'problemStatement' as problem from tasks where task_id = $1`, [taskId]);
  return r.rowCount ? r.rows[0].problem : null;
}
