import type { Queryable } from './pool.js';
import { SEQUENCE_COLUMNS, sequenceRow, type RolloutSequenceRow } from './rollouts.js';

/** Training batches and the weight updates they produced. Tables: batch_members (which
 *  rollouts a weight update consumed; a rollout at most once), policy_versions (one row per
 *  weight update; db/migrations/001_audit_history.sql); view v_run_updates. */

/** A weight update as it is recorded. */
export interface NewPolicyVersion {
  runId: string;
  version: number;
  checkpointPath: string | null;
  batchRollouts: number;
  batchMeanReward: number | null;
  /** Rollouts discarded as too old since the previous update. */
  discardedStale: number;
  trainMs: number | null;
  publishMs: number | null;
  /** {engine_id: ms} */
  loadMs: Record<string, number>;
  /** Train step start to every engine serving it. */
  updateMs: number | null;
  /** loss, grad_norm, entropy, clip_fraction, mismatch_* */
  metrics: Record<string, number>;
  /** {active, retired_mastered, retired_hopeless, revived} */
  pool: Record<string, number>;
}

/** A policy_versions row as read (version 0 and rows of older runs have nulls). */
export interface PolicyVersionRow {
  runId: string;
  version: number;
  checkpointPath: string | null;
  batchRollouts: number | null;
  batchMeanReward: number | null;
  discardedStale: number | null;
  trainMs: number | null;
  publishMs: number | null;
  loadMs: Record<string, number> | null;
  updateMs: number | null;
  metrics: Record<string, number> | null;
  pool: Record<string, number> | null;
  createdAt: Date;
}

/** Claim rollouts for the batch that produces `version`, in one statement: a rollout can
 *  belong to one batch only (primary key); a retry returns the same claim. Returns the ids
 *  claimed for `version` (those of an earlier attempt included). */
export async function claimBatch(db: Queryable, input: { runId: string; version: number; advantages: Record<string, number> }): Promise<string[]> {
  const ids = Object.keys(input.advantages);
  const r = await db.query<{ rollout_id: string }>(
    `with claimed as (
       insert into batch_members (rollout_id, run_id, version, advantage)
       select x.rollout_id, $1, $2, x.advantage from unnest($3::text[], $4::double precision[]) as x(rollout_id, advantage)
       on conflict (rollout_id) do nothing
       returning rollout_id)
     select rollout_id from claimed
     union
     select rollout_id from batch_members where run_id = $1 and version = $2`,
    [input.runId, input.version, ids, ids.map((id) => input.advantages[id])]);
  return r.rows.map((x) => x.rollout_id);
}

/** Record a weight update; a retried activity rewrites the same row. */
export async function upsertPolicyVersion(db: Queryable, r: NewPolicyVersion): Promise<void> {
  await db.query(
    `insert into policy_versions (run_id, version, checkpoint_path, batch_rollouts, batch_mean_reward, discarded_stale, train_ms, publish_ms, load_ms, update_ms, metrics, pool)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     on conflict (run_id, version) do update set checkpoint_path = excluded.checkpoint_path, batch_rollouts = excluded.batch_rollouts,
       batch_mean_reward = excluded.batch_mean_reward, discarded_stale = excluded.discarded_stale, train_ms = excluded.train_ms,
       publish_ms = excluded.publish_ms, load_ms = excluded.load_ms, update_ms = excluded.update_ms, metrics = excluded.metrics, pool = excluded.pool`,
    [r.runId, r.version, r.checkpointPath, r.batchRollouts, r.batchMeanReward, r.discardedStale, r.trainMs, r.publishMs, JSON.stringify(r.loadMs), r.updateMs, JSON.stringify(r.metrics), JSON.stringify(r.pool)],
  );
}

/** A run's policy versions from `fromVersion` on (default: all, version 0 included when recorded), in order. */
export async function listPolicyVersions(db: Queryable, runId: string, opts: { fromVersion?: number } = {}): Promise<PolicyVersionRow[]> {
  const r = await db.query<{ version: number; checkpoint_path: string | null; created_at: Date; batch_rollouts: number | null; batch_mean_reward: number | null; discarded_stale: number | null; train_ms: number | null; publish_ms: number | null; load_ms: Record<string, number> | null; update_ms: number | null; metrics: Record<string, number> | null; pool: Record<string, number> | null }>(
    `select version, checkpoint_path, created_at, batch_rollouts, batch_mean_reward, discarded_stale, update_ms,
            train_ms, publish_ms, load_ms, metrics, pool
     from policy_versions where run_id = $1 and version >= $2 order by version`, [runId, opts.fromVersion ?? 0]);
  return r.rows.map((x) => ({
    runId, version: x.version, checkpointPath: x.checkpoint_path, createdAt: x.created_at, batchRollouts: x.batch_rollouts, batchMeanReward: x.batch_mean_reward,
    discardedStale: x.discarded_stale, trainMs: x.train_ms, publishMs: x.publish_ms, loadMs: x.load_ms, updateMs: x.update_ms, metrics: x.metrics, pool: x.pool,
  }));
}

/** The rollouts each weight update of a run consumed: rollout, version it produced, advantage. */
export async function listBatchMembers(db: Queryable, runId: string): Promise<{ rolloutId: string; version: number; advantage: number | null }[]> {
  const r = await db.query<{ rollout_id: string; version: number; advantage: number | null }>(
    'select rollout_id, version, advantage from batch_members where run_id = $1 order by version, rollout_id', [runId]);
  return r.rows.map((x) => ({ rolloutId: x.rollout_id, version: x.version, advantage: x.advantage }));
}

/** How many of a run's trained rollouts had each staleness (null: not recorded). */
export async function countBatchMembersByStaleness(db: Queryable, runId: string): Promise<{ staleness: number | null; n: number }[]> {
  const r = await db.query<{ staleness: number | null; n: number }>(
    `select r.staleness, count(*)::int as n from batch_members b join rollouts r using (rollout_id)
     where b.run_id = $1 group by r.staleness`, [runId]);
  return r.rows;
}

/** Rewards of the train rollouts each batch of a run consumed, by version, then in the order they ended. */
export async function listBatchRewards(db: Queryable, runId: string): Promise<{ taskId: string; version: number; reward: number }[]> {
  const r = await db.query<{ task_id: string; version: number; reward: number }>(
    `select r.task_id, b.version, r.reward from batch_members b join rollouts r using (rollout_id)
     where b.run_id = $1 and r.purpose = 'train' and r.reward is not null
     order by b.version, r.ended_at nulls first, r.rollout_id`, [runId]);
  return r.rows.map((x) => ({ taskId: x.task_id, version: x.version, reward: x.reward }));
}

/** The token sequences (v_rollout_sequences) of the rollouts a run trained on. The view
 *  aggregates per rollout; the run's rollout ids are given to it as a filter on its group key,
 *  which Postgres pushes down to turn_tokens' index (a join alone aggregates every rollout of
 *  the database first). */
export async function listTrainedSequences(db: Queryable, runId: string): Promise<(RolloutSequenceRow & { version: number })[]> {
  const r = await db.query<Parameters<typeof sequenceRow>[0] & { version: number }>(
    `select ${SEQUENCE_COLUMNS}, b.version from v_rollout_sequences s join batch_members b using (rollout_id)
      where b.run_id = $1 and s.rollout_id = any(array(select rollout_id from batch_members where run_id = $1))
      order by b.version, s.rollout_id`, [runId]);
  return r.rows.map((x) => ({ ...sequenceRow(x), version: x.version }));
}
