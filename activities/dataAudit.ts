import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { auditTable, blindTask, type AuditRowSummary } from '../core/dataAudit.js';
import type { Task } from '../core/taskModel.js';
import { getTask } from '../store/tasks.js';
import { finishAudit, finishedTaskAudits, listTaskAudits, recordTaskAudit, type TaskAuditRecord } from '../store/dataAudits.js';

/** The data audit's Postgres side (control worker): the task row as the audit may see it
 *  (blind: core/dataAudit.ts blindTask), and its records (store/dataAudits.ts). */
export function createDataAuditActivities(pool: pg.Pool) {
  return {
    /** The task's row without the labels that score the audit (they never enter its history). */
    async getAuditTask(taskId: string): Promise<Task> {
      const task = await getTask(pool, taskId);
      if (!task) throw ApplicationFailure.nonRetryable(`task ${taskId} is not in the tasks table; \`floe audit\` loads the dataset before it starts`, 'UnknownTask');
      return blindTask(task);
    },
    async finishedTaskAudits(auditId: string): Promise<string[]> {
      return finishedTaskAudits(pool, auditId);
    },
    async recordTaskAudit(r: TaskAuditRecord): Promise<void> {
      await recordTaskAudit(pool, r);
    },
    /** The published table over every task of the audit (those of earlier, interrupted runs too). */
    async finishAudit(input: { auditId: string }): Promise<ReturnType<typeof auditTable>> {
      const rows: AuditRowSummary[] = (await listTaskAudits(pool, input.auditId)).map((r) => ({ taskId: r.taskId, status: r.status, strengthened: r.strengthened !== null }));
      const table = auditTable(rows);
      await finishAudit(pool, input.auditId, table);
      return table;
    },
  };
}

export type DataAuditActivities = ReturnType<typeof createDataAuditActivities>;
