import type { Queryable } from './pool.js';
import type { TaskScore } from '../core/passAtK.js';
import type { EvaluationLabel } from '../core/evaluationLabels.js';

/** Frozen-weight evaluations of a run's tasks (table evaluations, view v_evaluations:
 *  db/migrations/007_evaluations.sql). Written once per (run, label, version, task); a retried
 *  write replaces its own row. */

/** The labels (core/evaluationLabels.ts); 'periodic' and 'retired' came with db/migrations/011. */
export type { EvaluationLabel };

export interface EvaluationRow extends TaskScore { runId: string; label: EvaluationLabel; version: number; k: number; inPool: boolean }

export async function recordEvaluation(db: Queryable, e: { runId: string; label: EvaluationLabel; version: number; k: number; scores: TaskScore[]; pool: string[] }): Promise<void> {
  const pool = new Set(e.pool);
  for (const s of e.scores) {
    await db.query(
      `insert into evaluations (run_id, label, version, task_id, k, attempts, solved, failed, pass_at_1, pass_at_k, in_pool)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       on conflict (run_id, label, version, task_id) do update set k = excluded.k, attempts = excluded.attempts,
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

// ---- checkpoint_evaluations: `floe eval` (db/migrations/010_checkpoint_evaluations.sql)

export interface TaskList { name: string; taskIds: string[] }

export interface CheckpointEvaluationRow {
  evalId: string;
  sessionId: string;
  policy: string;
  checkpointPath: string;
  version: number;
  sourceRunId: string | null;
  taskLists: TaskList[];
  k: number;
  state: 'running' | 'completed' | 'failed';
  pass1: number | null;
  passK: number | null;
  failedAttempts: number | null;
  versionsSeen: number[] | null;
  error: string | null;
}

/** A new evaluation of one checkpoint (its runs row must exist). */
export async function insertCheckpointEvaluation(db: Queryable, e: { evalId: string; sessionId: string; policy: string; checkpointPath: string; version: number; sourceRunId: string | null; taskLists: TaskList[]; k: number }): Promise<void> {
  await db.query(
    `insert into checkpoint_evaluations (eval_id, session_id, policy, checkpoint_path, version, source_run_id, task_lists, k)
     values ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [e.evalId, e.sessionId, e.policy, e.checkpointPath, e.version, e.sourceRunId, JSON.stringify(e.taskLists), e.k],
  );
}

export async function finishCheckpointEvaluation(db: Queryable, e: { evalId: string; state: 'completed' | 'failed'; pass1?: number | null; passK?: number | null; failedAttempts?: number; versionsSeen?: number[]; error?: string }): Promise<void> {
  await db.query(
    `update checkpoint_evaluations set state = $2, pass_at_1 = $3, pass_at_k = $4, failed_attempts = $5, versions_seen = $6, error = $7, finished_at = now()
     where eval_id = $1`,
    [e.evalId, e.state, e.pass1 ?? null, e.passK ?? null, e.failedAttempts ?? null, e.versionsSeen ?? null, e.error ?? null],
  );
}

export async function listCheckpointEvaluations(db: Queryable, sessionId: string): Promise<CheckpointEvaluationRow[]> {
  const r = await db.query<{ eval_id: string; session_id: string; policy: string; checkpoint_path: string; version: number; source_run_id: string | null; task_lists: TaskList[]; k: number; state: CheckpointEvaluationRow['state']; pass_at_1: number | null; pass_at_k: number | null; failed_attempts: number | null; versions_seen: number[] | null; error: string | null }>(
    `select eval_id, session_id, policy, checkpoint_path, version, source_run_id, task_lists, k, state, pass_at_1, pass_at_k, failed_attempts, versions_seen, error
     from checkpoint_evaluations where session_id = $1 order by started_at, eval_id`, [sessionId]);
  return r.rows.map((x) => ({ evalId: x.eval_id, sessionId: x.session_id, policy: x.policy, checkpointPath: x.checkpoint_path, version: x.version, sourceRunId: x.source_run_id, taskLists: x.task_lists, k: x.k, state: x.state, pass1: x.pass_at_1, passK: x.pass_at_k, failedAttempts: x.failed_attempts, versionsSeen: x.versions_seen, error: x.error }));
}

/** How far an evaluation is: its rollouts finished (or failed) and started so far. */
export async function evaluationProgress(db: Queryable, evalId: string): Promise<{ started: number; done: number; solved: number }> {
  const r = await db.query<{ started: number; done: number; solved: number }>(
    `select count(*)::int as started, count(*) filter (where status in ('finished', 'failed'))::int as done,
            count(*) filter (where status = 'finished' and reward >= 1)::int as solved
     from rollouts where run_id = $1 and purpose = 'eval'`, [evalId]);
  return r.rows[0];
}

/** The weight versions an evaluation's rollouts were generated with (first and last token of
 *  each rollout), ascending: one version when the weights stayed frozen. */
export async function evaluationVersions(db: Queryable, evalId: string): Promise<number[]> {
  const r = await db.query<{ v: number }>(
    `select distinct v from (select version_start as v from rollouts where run_id = $1 and purpose = 'eval'
                              union all select version_end from rollouts where run_id = $1 and purpose = 'eval') x
     where v is not null order by v`, [evalId]);
  return r.rows.map((x) => x.v);
}
