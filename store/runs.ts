import type { RunConfig } from '../core/config.js';
import type { Queryable } from './pool.js';

/** Training runs. Table: runs (db/migrations/001_audit_history.sql). */

/** The runs.status check constraint (the run workflow's states). */
export type RunStatusColumn = 'running' | 'paused' | 'stopping' | 'stopped' | 'completed' | 'failed';

export interface RunRow {
  runId: string;
  workflowId: string;
  name: string;
  /** The run's config as recorded: a RunConfig of the floe version that started the run
   *  (fields added since are missing from older runs). */
  config: unknown;
  status: RunStatusColumn;
  startedAt: Date;
  endedAt: Date | null;
  summary: Record<string, unknown> | null;
}

/** Idempotent: a retried activity or a continued-as-new run does not duplicate the row. */
export async function insertRun(db: Queryable, r: { runId: string; workflowId: string; name: string; config: RunConfig }): Promise<void> {
  await db.query(
    `insert into runs (run_id, workflow_id, name, config) values ($1, $2, $3, $4)
     on conflict (run_id) do nothing`,
    [r.runId, r.workflowId, r.name, JSON.stringify(r.config)],
  );
}

/** The run's status; a final one (stopped, completed, failed) also sets ended_at. A summary,
 *  when given, replaces the recorded one. */
export async function setRunStatus(db: Queryable, r: { runId: string; status: RunStatusColumn; summary?: unknown }): Promise<void> {
  const ended = r.status === 'stopped' || r.status === 'completed' || r.status === 'failed';
  await db.query(
    `update runs set status = $2, summary = coalesce($3, summary),
            ended_at = case when $4 then now() else ended_at end
     where run_id = $1`,
    [r.runId, r.status, r.summary === undefined ? null : JSON.stringify(r.summary), ended],
  );
}

export async function getRun(db: Queryable, runId: string): Promise<RunRow | null> {
  const r = await db.query<{ run_id: string; workflow_id: string; name: string; config: unknown; status: RunStatusColumn; started_at: Date; ended_at: Date | null; summary: Record<string, unknown> | null }>(
    'select run_id, workflow_id, name, config, status, started_at, ended_at, summary from runs where run_id = $1', [runId]);
  const row = r.rows[0];
  if (!row) return null;
  return { runId: row.run_id, workflowId: row.workflow_id, name: row.name, config: row.config, status: row.status, startedAt: row.started_at, endedAt: row.ended_at, summary: row.summary };
}

export async function countRuns(db: Queryable): Promise<number> {
  return (await db.query<{ n: number }>('select count(*)::int as n from runs')).rows[0].n;
}
