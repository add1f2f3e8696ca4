import type { Queryable } from './pool.js';
import type { TaskScore } from '../core/passAtK.js';

/** Frozen-weight evaluations of a run's tasks (table evaluations, view v_evaluations:
 *  db/migrations/007_evaluations.sql). Written once per (run, label, task); a retried write
 *  replaces its own row. */

export type EvaluationLabel = 'start' | 'end';

export interface EvaluationRow extends TaskScore { runId: string; label: EvaluationLabel; version: number; k: number; inPool: boolean }

export async function recordEvaluation(db: Queryable, e: { runId: string; label: EvaluationLabel; version: number; k: number; scores: TaskScore[]; pool: string[] }): Promise<void> {
  const pool = new Set(e.pool);
  for (const s of e.scores) {
    await db.query(
      `insert into evaluations (run_id, label, version, task_id, k, attempts, solved, failed, pass_at_1, pass_at_k, in_pool)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       on conflict (run_id, label, task_id) do update set version = excluded.version, k = excluded.k, attempts = excluded.attempts,
         solved = excluded.solved, failed = excluded.failed, pass_at_1 = excluded.pass_at_1, pass_at_k = excluded.pass_at_k, in_pool = excluded.in_pool`,
      [e.runId, e.label, e.version, s.taskId, e.k, s.attempts, s.solved, s.failed, s.pass1, s.passK, pool.has(s.taskId)],
    );
  }
}

export async function listEvaluations(db: Queryable, runId: string): Promise<EvaluationRow[]> {
  const r = await db.query<{ run_id: string; label: EvaluationLabel; version: number; task_id: string; k: number; attempts: number; solved: number; failed: number; pass_at_1: number; pass_at_k: number; in_pool: boolean }>(
    `select run_id, label, version, task_id, k, attempts, solved, failed, pass_at_1, pass_at_k, in_pool
     from evaluations where run_id = $1 order by label desc, task_id`, [runId]);
  return r.rows.map((x) => ({ runId: x.run_id, label: x.label, version: x.version, taskId: x.task_id, k: x.k, attempts: x.attempts, solved: x.solved, failed: x.failed, pass1: x.pass_at_1, passK: x.pass_at_k, inPool: x.in_pool }));
}
