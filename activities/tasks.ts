import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { selectTasks, type PoolSelection } from '../tasks/loaders.js';

/** Task pool activities: load and validate the run's tasks and record them in Postgres. */
export function createTaskActivities(pool: pg.Pool) {
  return {
    async loadTaskPool(sel: PoolSelection): Promise<{ taskIds: string[]; badRows: string[] }> {
      let loaded;
      try {
        loaded = selectTasks(sel);
      } catch (err) {
        // A bad dataset or selection will not fix itself on retry.
        throw ApplicationFailure.nonRetryable((err as Error).message, 'BadTaskPool');
      }
      const { tasks, errors } = loaded;
      if (tasks.length === 0) throw ApplicationFailure.nonRetryable(`the task pool is empty (tasks.source=${sel.source}); check tasks.include / tasks.limit`, 'BadTaskPool');
      for (const t of tasks) {
        await pool.query(
          `insert into tasks (task_id, source, repo, loose_tests, instance) values ($1, $2, $3, $4, $5)
           on conflict (task_id) do update set instance = excluded.instance, loose_tests = coalesce(excluded.loose_tests, tasks.loose_tests)`,
          [t.instanceId, t.dataset, t.repo, t.looseTests, JSON.stringify(t)],
        );
      }
      return { taskIds: tasks.map((t) => t.instanceId), badRows: errors.map((e) => e.message) };
    },
  };
}

export type TaskActivities = ReturnType<typeof createTaskActivities>;
