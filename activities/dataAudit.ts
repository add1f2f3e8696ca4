import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { auditTable, blindTask, type AuditRowSummary } from '../core/dataAudit.js';
import { agentCandidateDiff, auditorTask } from '../core/auditorAgent.js';
import type { Task } from '../core/taskModel.js';
import { getTask, upsertTask } from '../store/tasks.js';
import { listSubmissions } from '../store/rollouts.js';
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
    /** The auditor agent's task for a task (core/auditorAgent.ts), stored for its rollouts. */
    async prepareAuditorTask(taskId: string): Promise<string> {
      const task = await getTask(pool, taskId);
      if (!task) throw ApplicationFailure.nonRetryable(`task ${taskId} is not in the tasks table; \`floe audit\` loads the dataset before it starts`, 'UnknownTask');
      const auditor = auditorTask(task);
      await upsertTask(pool, auditor);
      return auditor.instanceId;
    },
    /** What the auditor rollouts submitted, as candidate diffs without the task's test files
     *  (empty and truncated submissions left out). */
    async auditorCandidates(input: { rolloutIds: string[]; testPatch: string }): Promise<{ rolloutId: string; diff: string }[]> {
      const subs = await listSubmissions(pool, input.rolloutIds);
      return subs.filter((s) => !s.truncated).map((s) => ({ rolloutId: s.rolloutId, diff: agentCandidateDiff(s.diff, input.testPatch) })).filter((s) => s.diff.trim() !== '');
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
