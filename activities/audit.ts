import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import type { Task } from '../core/taskModel.js';
import { pgSafeJson, pgSafeText } from './generate.js';

/** Audit rows of rollouts: start, each tool result, the submission, the gate decision and
 *  the end. Every write is idempotent (activities may be retried). */

export interface RolloutStart { runId: string; rolloutId: string; taskId: string; groupId: string; attempt: number; purpose: 'train' | 'recheck' | 'eval' | 'test'; workflowId: string }

export interface RolloutEnd {
  rolloutId: string;
  reward: number;
  gate: string;
  nTurns: number;
  promptTokens: number;
  completionTokens: number;
  versionStart: number | null;
  versionEnd: number | null;
  shortcutFlags: string[];
  status: 'finished' | 'failed';
}

export function createAuditActivities(pool: pg.Pool) {
  return {
    async getTask(taskId: string): Promise<Task> {
      const r = await pool.query<{ instance: Task }>('select instance from tasks where task_id = $1', [taskId]);
      if (!r.rowCount) throw ApplicationFailure.nonRetryable(`task ${taskId} is not in the tasks table; load the pool first`, 'UnknownTask');
      return r.rows[0].instance;
    },

    async recordRolloutStart(s: RolloutStart): Promise<void> {
      await pool.query(
        `insert into rollouts (rollout_id, run_id, task_id, group_id, attempt, purpose, workflow_id) values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (rollout_id) do nothing`,
        [s.rolloutId, s.runId, s.taskId, s.groupId, s.attempt, s.purpose, s.workflowId],
      );
    },

    async recordToolResult(r: { rolloutId: string; turnIndex: number; observation: string; exitCode: number | null; shortcutFlags: string[]; toolMs: number }): Promise<void> {
      await pool.query('update turns set observation = $3, exit_code = $4, shortcut_flags = $5, tool_ms = $6 where rollout_id = $1 and turn_index = $2',
        [r.rolloutId, r.turnIndex, pgSafeText(r.observation), r.exitCode, r.shortcutFlags, r.toolMs]);
    },

    async recordSubmission(s: { rolloutId: string; diff: string; bytes: number; truncated: boolean }): Promise<void> {
      await pool.query(
        `insert into submissions (rollout_id, diff, bytes, truncated) values ($1, $2, $3, $4)
         on conflict (rollout_id) do update set diff = excluded.diff, bytes = excluded.bytes, truncated = excluded.truncated`,
        [s.rolloutId, pgSafeText(s.diff), s.bytes, s.truncated],
      );
    },

    async recordGateDecision(d: { rolloutId: string; gate: string; reward: number; detail: unknown; grade?: unknown }): Promise<void> {
      await pool.query(
        `insert into gate_decisions (rollout_id, gate, reward, detail) values ($1, $2, $3, $4)
         on conflict (rollout_id) do update set gate = excluded.gate, reward = excluded.reward, detail = excluded.detail`,
        [d.rolloutId, d.gate, d.reward, pgSafeJson(d.detail ?? {})],
      );
      if (d.grade !== undefined) await pool.query('update submissions set grade = $2 where rollout_id = $1', [d.rolloutId, pgSafeJson(d.grade)]);
    },

    async recordRolloutEnd(e: RolloutEnd): Promise<void> {
      await pool.query(
        `update rollouts set status = case when status = 'discarded' then status else $2 end, reward = $3, gate = $4, n_turns = $5,
           prompt_tokens = $6, completion_tokens = $7, version_start = $8, version_end = $9, shortcut_flags = $10, ended_at = now()
         where rollout_id = $1`,
        [e.rolloutId, e.status, e.reward, e.gate, e.nTurns, e.promptTokens, e.completionTokens, e.versionStart, e.versionEnd, e.shortcutFlags],
      );
    },
  };
}

export type AuditActivities = ReturnType<typeof createAuditActivities>;
