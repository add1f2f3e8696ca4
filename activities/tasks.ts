import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { selectTasks, type PoolSelection } from '../tasks/loaders.js';
import { upsertTask } from '../store/tasks.js';
import { listTaskAudits } from '../store/dataAudits.js';
import { applyAudit } from '../core/dataAudit.js';

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
      const { errors } = loaded;
      let { tasks } = loaded;
      if (sel.audit) {
        const rows = await listTaskAudits(pool, sel.audit.id);
        if (!rows.length) throw ApplicationFailure.nonRetryable(`tasks.audit: no audit ${sel.audit.id} in Postgres (\`floe audit\` prints the id of the audit it runs)`, 'BadTaskPool');
        try {
          tasks = applyAudit(tasks, new Map(rows.map((r) => [r.taskId, r])), sel.audit.use, sel.audit.id);
        } catch (err) {
          throw ApplicationFailure.nonRetryable((err as Error).message, 'BadTaskPool');
        }
      }
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
