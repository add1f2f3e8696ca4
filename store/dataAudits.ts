import type pg from 'pg';
import { pgSafeJson, pgSafeText, type Queryable } from './pool.js';
import type { AuditStatus, BehaviourDifference, Validation } from '../core/dataAudit.js';

/** The data audit's records (tables audits, task_audits, audit_candidates, view
 *  v_audit_progress: db/migrations/008_data_audit.sql). A task's audit is written once, in one
 *  transaction with its candidates, when it ends; a retried write replaces its own rows. */

export interface AuditCandidateRow {
  id: string; kind: string; description: string; diff: string; testsPassed: boolean; failing: string[]; difference: BehaviourDifference | null;
}

export interface TaskAuditRecord {
  auditId: string;
  taskId: string;
  status: AuditStatus;
  validation: Validation;
  candidates: AuditCandidateRow[];
  evidence: (AuditCandidateRow & { confirmedBy: string }) | null;
  note: string | null;
  strengthened: { testPatch: string | null; failToPass: string[]; checks: number; reason: string | null } | null;
  durationMs: number;
}

export interface TaskAuditRow {
  taskId: string; status: AuditStatus; validation: Validation; candidatesTried: number; candidatesPassing: number; wrongFound: number;
  evidence: TaskAuditRecord['evidence']; note: string | null; durationMs: number;
  strengthened: { testPatch: string; failToPass: string[]; checks: number } | null; strengthenNote: string | null;
}

/** Start an audit, or find the one already started with this id (its config and tasks kept). */
export async function ensureAudit(db: Queryable, a: { auditId: string; dataset: string; config: unknown; taskIds: string[] }): Promise<{ created: boolean }> {
  const r = await db.query(
    `insert into audits (audit_id, dataset, config, task_ids) values ($1, $2, $3, $4) on conflict (audit_id) do nothing`,
    [a.auditId, a.dataset, JSON.stringify(a.config), JSON.stringify(a.taskIds)],
  );
  return { created: r.rowCount === 1 };
}

export async function recordTaskAudit(pool: pg.Pool, r: TaskAuditRecord): Promise<void> {
  const db = await pool.connect();
  await db.query('begin');
  try {
    await db.query('delete from audit_candidates where audit_id = $1 and task_id = $2', [r.auditId, r.taskId]);
    for (const c of r.candidates) {
      await db.query(
        `insert into audit_candidates (audit_id, task_id, candidate_id, kind, description, diff, tests_passed, failing, difference)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [r.auditId, r.taskId, c.id, c.kind, pgSafeText(c.description), pgSafeText(c.diff), c.testsPassed, pgSafeJson(c.failing), c.difference === null ? null : pgSafeJson(c.difference)],
      );
    }
    await db.query(
      `insert into task_audits (audit_id, task_id, status, validation, candidates_tried, candidates_passing, wrong_found, evidence, note, duration_ms,
         strengthened_test_patch, strengthened_fail_to_pass, strengthened_checks, strengthen_note)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
       on conflict (audit_id, task_id) do update set status = excluded.status, validation = excluded.validation,
         candidates_tried = excluded.candidates_tried, candidates_passing = excluded.candidates_passing, wrong_found = excluded.wrong_found,
         evidence = excluded.evidence, note = excluded.note, duration_ms = excluded.duration_ms, finished_at = now(),
         strengthened_test_patch = excluded.strengthened_test_patch, strengthened_fail_to_pass = excluded.strengthened_fail_to_pass,
         strengthened_checks = excluded.strengthened_checks, strengthen_note = excluded.strengthen_note`,
      [r.auditId, r.taskId, r.status, pgSafeJson(r.validation), r.candidates.length, r.candidates.filter((c) => c.testsPassed).length,
        r.candidates.filter((c) => c.difference !== null).length, r.evidence === null ? null : pgSafeJson(r.evidence), r.note, r.durationMs,
        r.strengthened?.testPatch ? pgSafeText(r.strengthened.testPatch) : null, r.strengthened?.testPatch ? pgSafeJson(r.strengthened.failToPass) : null,
        r.strengthened?.testPatch ? r.strengthened.checks : null, r.strengthened?.reason ?? null],
    );
    await db.query('commit');
  } catch (err) {
    await db.query('rollback');
    throw err;
  } finally {
    db.release();
  }
}

/** Tasks whose audit has ended (a resumed audit skips them). */
export async function finishedTaskAudits(db: Queryable, auditId: string): Promise<string[]> {
  const r = await db.query<{ task_id: string }>('select task_id from task_audits where audit_id = $1 order by task_id', [auditId]);
  return r.rows.map((x) => x.task_id);
}

export async function listTaskAudits(db: Queryable, auditId: string): Promise<TaskAuditRow[]> {
  const r = await db.query<{ task_id: string; status: AuditStatus; validation: Validation; candidates_tried: number; candidates_passing: number; wrong_found: number; evidence: TaskAuditRecord['evidence']; note: string | null; duration_ms: number; s_patch: string | null; s_f2p: string[] | null; s_checks: number | null; s_note: string | null }>(
    `select task_id, status, validation, candidates_tried, candidates_passing, wrong_found, evidence, note, duration_ms,
            strengthened_test_patch as s_patch, strengthened_fail_to_pass as s_f2p, strengthened_checks as s_checks, strengthen_note as s_note
     from task_audits where audit_id = $1 order by task_id`, [auditId]);
  return r.rows.map((x) => ({
    taskId: x.task_id, status: x.status, validation: x.validation, candidatesTried: x.candidates_tried, candidatesPassing: x.candidates_passing, wrongFound: x.wrong_found,
    evidence: x.evidence, note: x.note, durationMs: x.duration_ms,
    strengthened: x.s_patch === null ? null : { testPatch: x.s_patch, failToPass: x.s_f2p ?? [], checks: x.s_checks ?? 0 }, strengthenNote: x.s_note,
  }));
}

export async function finishAudit(db: Queryable, auditId: string, summary: unknown): Promise<void> {
  await db.query('update audits set finished_at = now(), summary = $2 where audit_id = $1', [auditId, JSON.stringify(summary)]);
}

export async function getAudit(db: Queryable, auditId: string): Promise<{ auditId: string; dataset: string; taskIds: string[]; config: unknown; finishedAt: Date | null; summary: unknown } | null> {
  const r = await db.query<{ audit_id: string; dataset: string; task_ids: string[]; config: unknown; finished_at: Date | null; summary: unknown }>(
    'select audit_id, dataset, task_ids, config, finished_at, summary from audits where audit_id = $1', [auditId]);
  const x = r.rows[0];
  return x ? { auditId: x.audit_id, dataset: x.dataset, taskIds: x.task_ids, config: x.config, finishedAt: x.finished_at, summary: x.summary } : null;
}
