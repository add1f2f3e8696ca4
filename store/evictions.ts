import type { EvictionDecision, TaskRecord } from '../core/eviction.js';
import type { Queryable } from './pool.js';

/** A run's task pool: retire / revive decisions with their evidence, and each task's state
 *  in the pool. Tables: evictions, task_stats (db/migrations/001_audit_history.sql). */

export interface EvictionRow { taskId: string; atVersion: number; decision: string; evidence: unknown; decidedAt: Date }

export interface TaskStatsRow {
  taskId: string;
  state: 'active' | 'retired_mastered' | 'retired_hopeless';
  attempts: number;
  solved: number;
  recentRewards: number[];
  lastRecheckVersion: number | null;
  lastRecheckReward: number | null;
  updatedAt: Date;
}

/** The decisions an eviction pass took at `version` (appended: every decision is kept). */
export async function insertEvictions(db: Queryable, runId: string, version: number, decisions: EvictionDecision[]): Promise<void> {
  for (const d of decisions) {
    await db.query('insert into evictions (run_id, task_id, at_version, decision, evidence) values ($1, $2, $3, $4, $5)',
      [runId, d.taskId, version, d.decision, JSON.stringify(d.evidence)]);
  }
}

/** Each task's state in the run's pool. attempts and solved are counted from the run's
 *  finished train rollouts, not taken from the (bounded) record. */
export async function upsertTaskStats(db: Queryable, runId: string, tasks: Record<string, TaskRecord>): Promise<void> {
  for (const [taskId, t] of Object.entries(tasks)) {
    await db.query(
      `insert into task_stats (run_id, task_id, state, attempts, solved, recent_rewards, last_recheck_version, last_recheck_reward, updated_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, now())
       on conflict (run_id, task_id) do update set state = excluded.state, recent_rewards = excluded.recent_rewards,
         last_recheck_version = excluded.last_recheck_version, last_recheck_reward = excluded.last_recheck_reward, updated_at = now(),
         attempts = (select count(*) from rollouts where run_id = $1 and task_id = $2 and purpose = 'train' and status = 'finished'),
         solved = (select count(*) from rollouts where run_id = $1 and task_id = $2 and purpose = 'train' and status = 'finished' and reward = 1)`,
      [runId, taskId, t.state, t.recent.length, t.recent.filter((r) => r >= 1).length, t.recent, t.lastRecheckVersion, t.lastRecheckReward],
    );
  }
}

/** A run's eviction decisions, in the order they were taken. */
export async function listEvictions(db: Queryable, runId: string): Promise<EvictionRow[]> {
  const r = await db.query<{ task_id: string; at_version: number; decision: string; evidence: unknown; decided_at: Date }>(
    `select task_id, at_version, decision, evidence, decided_at from evictions
     where run_id = $1 order by at_version, id`, [runId]);
  return r.rows.map((x) => ({ taskId: x.task_id, atVersion: x.at_version, decision: x.decision, evidence: x.evidence, decidedAt: x.decided_at }));
}

/** The tasks of a run's pool, by task id. */
export async function listTaskStats(db: Queryable, runId: string): Promise<TaskStatsRow[]> {
  const r = await db.query<{ task_id: string; state: TaskStatsRow['state']; attempts: number; solved: number; recent_rewards: number[]; last_recheck_version: number | null; last_recheck_reward: number | null; updated_at: Date }>(
    `select task_id, state, attempts, solved, recent_rewards, last_recheck_version, last_recheck_reward, updated_at from task_stats where run_id = $1 order by task_id`, [runId]);
  return r.rows.map((x) => ({
    taskId: x.task_id, state: x.state, attempts: x.attempts, solved: x.solved, recentRewards: x.recent_rewards,
    lastRecheckVersion: x.last_recheck_version, lastRecheckReward: x.last_recheck_reward, updatedAt: x.updated_at,
  }));
}
