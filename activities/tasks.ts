import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { selectTasks, type PoolSelection } from '../tasks/loaders.js';
import { upsertTask } from '../store/tasks.js';

/** Task pool activities: load and validate the run's tasks and record them in Postgres. */
export function createTaskActivities(pool: pg.Pool) {
  return {
    async loadTaskPool(sel: PoolSelection): Promise<{ taskIds: string[]; badRows: string[]; images: string[] }> {
      let loaded;
      try {
        loaded = selectTasks(sel);
      } catch (err) {
        // A bad dataset or selection will not fix itself on retry.
        throw ApplicationFailure.nonRetryable((err as Error).message, 'BadTaskPool');
      }
      const { tasks, errors } = loaded;
      if (tasks.length === 0) throw ApplicationFailure.nonRetryable(`the task pool is empty (tasks.source=${sel.source}); check tasks.include / tasks.limit`, 'BadTaskPool');
      for (const t of tasks) await upsertTask(pool, t);
      return {
        taskIds: tasks.map((t) => t.instanceId),
        badRows: errors.map((e) => e.message),
        // the images the pool runs in (directory sources run in floe's own)
        images: [...new Set(tasks.flatMap((t) => (t.source.kind === 'image' ? [t.source.image] : [])))].sort(),
      };
    },
  };
}

export type TaskActivities = ReturnType<typeof createTaskActivities>;
