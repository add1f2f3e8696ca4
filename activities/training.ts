import type pg from 'pg';
import type { EvictionDecision, TaskRecord } from '../core/eviction.js';

/** Audit rows of the training loop: batches (exactly once), policy versions, discards,
 *  eviction decisions and task state. */

export interface PolicyVersionRow {
  runId: string;
  version: number;
  checkpointPath: string | null;
  batchRollouts: number;
  batchMeanReward: number | null;
  discardedStale: number;
  trainMs: number | null;
  publishMs: number | null;
  loadMs: Record<string, number>;
  updateMs: number | null;
  metrics: Record<string, number>;
  pool: Record<string, number>;
}

export function createTrainingActivities(pool: pg.Pool) {
  return {
    /** Claim rollouts for the batch that produces `version`. A rollout can belong to one
     *  batch only (primary key); a retry returns the same claim. Returns the claimed ids. */
    async claimBatch(input: { runId: string; version: number; advantages: Record<string, number> }): Promise<string[]> {
      const client = await pool.connect();
      try {
        await client.query('begin');
        for (const [rolloutId, advantage] of Object.entries(input.advantages)) {
          await client.query(`insert into batch_members (rollout_id, run_id, version, advantage) values ($1, $2, $3, $4) on conflict (rollout_id) do nothing`,
            [rolloutId, input.runId, input.version, advantage]);
        }
        const claimed = await client.query<{ rollout_id: string }>('select rollout_id from batch_members where run_id = $1 and version = $2', [input.runId, input.version]);
        await client.query('commit');
        return claimed.rows.map((r) => r.rollout_id);
      } catch (err) {
        await client.query('rollback');
        throw err;
      } finally {
        client.release();
      }
    },

    async recordPolicyVersion(r: PolicyVersionRow): Promise<void> {
      await pool.query(
        `insert into policy_versions (run_id, version, checkpoint_path, batch_rollouts, batch_mean_reward, discarded_stale, train_ms, publish_ms, load_ms, update_ms, metrics, pool)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         on conflict (run_id, version) do update set checkpoint_path = excluded.checkpoint_path, batch_rollouts = excluded.batch_rollouts,
           batch_mean_reward = excluded.batch_mean_reward, discarded_stale = excluded.discarded_stale, train_ms = excluded.train_ms,
           publish_ms = excluded.publish_ms, load_ms = excluded.load_ms, update_ms = excluded.update_ms, metrics = excluded.metrics, pool = excluded.pool`,
        [r.runId, r.version, r.checkpointPath, r.batchRollouts, r.batchMeanReward, r.discardedStale, r.trainMs, r.publishMs, JSON.stringify(r.loadMs), r.updateMs, JSON.stringify(r.metrics), JSON.stringify(r.pool)],
      );
    },

    async markDiscarded(input: { rolloutIds: string[]; reason: string; staleness: Record<string, number> }): Promise<void> {
      for (const id of input.rolloutIds) {
        await pool.query(`update rollouts set status = 'discarded', discard_reason = $2, staleness = $3 where rollout_id = $1 and status <> 'discarded'`,
          [id, input.reason, input.staleness[id] ?? null]);
      }
    },

    async recordStaleness(input: { staleness: Record<string, number> }): Promise<void> {
      for (const [id, s] of Object.entries(input.staleness)) await pool.query('update rollouts set staleness = $2 where rollout_id = $1', [id, s]);
    },

    async recordEvictions(input: { runId: string; version: number; decisions: EvictionDecision[]; tasks: Record<string, TaskRecord> }): Promise<void> {
      for (const d of input.decisions) {
        await pool.query('insert into evictions (run_id, task_id, at_version, decision, evidence) values ($1, $2, $3, $4, $5)',
          [input.runId, d.taskId, input.version, d.decision, JSON.stringify(d.evidence)]);
      }
      for (const [taskId, t] of Object.entries(input.tasks)) {
        await pool.query(
          `insert into task_stats (run_id, task_id, state, attempts, solved, recent_rewards, last_recheck_version, last_recheck_reward, updated_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, now())
           on conflict (run_id, task_id) do update set state = excluded.state, recent_rewards = excluded.recent_rewards,
             last_recheck_version = excluded.last_recheck_version, last_recheck_reward = excluded.last_recheck_reward, updated_at = now(),
             attempts = (select count(*) from rollouts where run_id = $1 and task_id = $2 and purpose = 'train' and status = 'finished'),
             solved = (select count(*) from rollouts where run_id = $1 and task_id = $2 and purpose = 'train' and status = 'finished' and reward = 1)`,
          [input.runId, taskId, t.state, t.recent.length, t.recent.filter((r) => r >= 1).length, t.recent, t.lastRecheckVersion, t.lastRecheckReward],
        );
      }
    },
  };
}

export type TrainingActivities = ReturnType<typeof createTrainingActivities>;
