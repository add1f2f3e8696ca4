import type pg from 'pg';
import { poolRewardSeries, type EvictionDecision, type PoolTask, type RecheckReward, type TrainReward } from './poolReward.js';
import { SMOOTHING_ALPHA, ema, histogram, keyNumbers, seconds } from './stats.js';
import type { EngineLoad, EvictionRow, GateCount, RunSummary, UpdateRow } from './types.js';

export type { RunSummary } from './types.js';
export { summarizeForComparison } from './stats.js';

/** Reads one run's audit history from Postgres into a RunSummary. Read-only; every query
 *  is scoped to the run, so it is safe against a live run (it reports what is there). */
export async function buildRunSummary(pool: pg.Pool, runId: string): Promise<RunSummary> {
  const runRow = (await pool.query(
    'select run_id, name, status, config, started_at, ended_at from runs where run_id = $1', [runId])).rows[0];
  if (!runRow) throw new Error(`no run '${runId}' in the runs table; list runs with: select run_id, status from runs order by started_at desc`);
  const generatedAt = new Date();
  const startedAt: Date = runRow.started_at;

  const updates = await loadUpdates(pool, runId, startedAt);
  const smoothedReward = ema(updates.map((u) => u.meanReward));
  const [staleness, engines, gates, evictions, poolReward] = await Promise.all([
    loadStaleness(pool, runId),
    loadEngines(pool, runId, updates.length, runRow.config),
    loadGates(pool, runId),
    loadEvictions(pool, runId),
    loadPoolReward(pool, runId, updates.map((u) => u.version)),
  ]);

  return {
    generatedAt: generatedAt.toISOString(),
    run: {
      id: runRow.run_id,
      name: runRow.name,
      status: runRow.status,
      config: runRow.config,
      startedAt: startedAt.toISOString(),
      endedAt: runRow.ended_at ? (runRow.ended_at as Date).toISOString() : null,
      durationSeconds: seconds(startedAt, runRow.ended_at ?? generatedAt),
    },
    updates,
    smoothedReward,
    smoothingAlpha: SMOOTHING_ALPHA,
    staleness,
    engines,
    gates,
    evictions,
    poolReward,
    keyNumbers: keyNumbers(updates, smoothedReward),
  };
}

async function loadUpdates(pool: pg.Pool, runId: string, startedAt: Date): Promise<UpdateRow[]> {
  const { rows } = await pool.query(
    `select version, created_at, batch_rollouts, batch_mean_reward, discarded_stale, update_ms,
            train_ms, publish_ms, load_ms, metrics, pool
     from policy_versions where run_id = $1 and version >= 1 order by version`, [runId]);
  let prev = startedAt;
  return rows.map((r) => {
    const createdAt: Date = r.created_at;
    const row: UpdateRow = {
      version: r.version,
      createdAt: createdAt.toISOString(),
      secondsSinceStart: seconds(startedAt, createdAt),
      secondsPerUpdate: seconds(prev, createdAt),
      batchRollouts: r.batch_rollouts,
      meanReward: r.batch_mean_reward,
      discardedStale: r.discarded_stale,
      updateMs: r.update_ms,
      trainMs: r.train_ms,
      publishMs: r.publish_ms,
      loadMs: r.load_ms,
      metrics: r.metrics,
      pool: r.pool,
    };
    prev = createdAt;
    return row;
  });
}

async function loadStaleness(pool: pg.Pool, runId: string): Promise<RunSummary['staleness']> {
  const [batch, discarded] = await Promise.all([
    pool.query(`select r.staleness, count(*)::int as n from batch_members b join rollouts r using (rollout_id)
                where b.run_id = $1 group by r.staleness`, [runId]),
    pool.query(`select staleness, count(*)::int as n from rollouts
                where run_id = $1 and status = 'discarded' group by staleness`, [runId]),
  ]);
  return { batch: histogram(batch.rows), discarded: histogram(discarded.rows) };
}

/** Placements are bucketed in SQL by the update timestamps (width_bucket over the sorted
 *  created_at array): bucket k-1 holds the placements that fed update k, bucket N the
 *  ones after the last update. Done in SQL because a long run has a placement per turn. */
async function loadEngines(pool: pg.Pool, runId: string, nUpdates: number, config: { engines?: { endpoints?: { id: string; kind?: string }[] } } | null): Promise<EngineLoad[]> {
  const kinds = new Map((config?.engines?.endpoints ?? []).map((e) => [e.id, e.kind ?? 'reference']));
  const [totals, buckets, resubmits] = await Promise.all([
    pool.query(`select engine_id, count(*) filter (where event = 'placed')::int as placements,
                       count(*) filter (where event = 'failed')::int as failures,
                       max(running) as max_running, max(waiting) as max_waiting
                from engine_events where run_id = $1 group by engine_id order by engine_id`, [runId]),
    pool.query(`select engine_id, coalesce(width_bucket(at, (select array_agg(created_at order by created_at)
                         from policy_versions where run_id = $1 and version >= 1)), 0) as bucket,
                       count(*)::int as n
                from engine_events where run_id = $1 and event = 'placed' group by 1, 2`, [runId]),
    pool.query(`select engine_id, count(*)::int as n from engine_requests where run_id = $1 and outcome in ('aborted', 'dropped') group by engine_id`, [runId]),
  ]);
  const resubmitted = new Map(resubmits.rows.map((r) => [r.engine_id as string, r.n as number]));
  const engines = new Map<string, EngineLoad>();
  for (const r of totals.rows) {
    engines.set(r.engine_id, {
      engineId: r.engine_id, kind: kinds.get(r.engine_id) ?? 'reference', placements: r.placements, resubmitted: resubmitted.get(r.engine_id) ?? 0, failures: r.failures,
      maxRunning: r.max_running, maxWaiting: r.max_waiting,
      placementsPerUpdate: new Array<number>(nUpdates).fill(0), placementsSinceLastUpdate: 0,
    });
  }
  for (const r of buckets.rows) {
    const e = engines.get(r.engine_id);
    if (!e) continue;
    if (r.bucket < nUpdates) e.placementsPerUpdate[r.bucket] += r.n;
    else e.placementsSinceLastUpdate += r.n;
  }
  return [...engines.values()];
}

async function loadGates(pool: pg.Pool, runId: string): Promise<GateCount[]> {
  const { rows } = await pool.query(
    `select g.gate, count(*)::int as rollouts, avg(g.reward) as mean_reward
     from gate_decisions g join rollouts r using (rollout_id)
     where r.run_id = $1 and r.purpose = 'train' group by g.gate order by rollouts desc, g.gate`, [runId]);
  return rows.map((r) => ({ gate: r.gate, rollouts: r.rollouts, meanReward: r.mean_reward }));
}

async function loadEvictions(pool: pg.Pool, runId: string): Promise<EvictionRow[]> {
  const { rows } = await pool.query(
    `select task_id, at_version, decision, evidence, decided_at from evictions
     where run_id = $1 order by at_version, id`, [runId]);
  return rows.map((r) => ({
    taskId: r.task_id, atVersion: r.at_version, decision: r.decision, evidence: r.evidence,
    decidedAt: (r.decided_at as Date).toISOString(),
  }));
}

async function loadPoolReward(pool: pg.Pool, runId: string, versions: number[]): Promise<RunSummary['poolReward']> {
  const tasks = (await pool.query(
    `select task_id, last_recheck_version, last_recheck_reward from task_stats where run_id = $1 order by task_id`, [runId])).rows;
  if (!tasks.length) return null;
  const [train, rechecks, evictions] = await Promise.all([
    pool.query(`select r.task_id, b.version, r.reward from batch_members b join rollouts r using (rollout_id)
                where b.run_id = $1 and r.purpose = 'train' and r.reward is not null
                order by b.version, r.ended_at nulls first, r.rollout_id`, [runId]),
    pool.query(`select task_id, coalesce(version_end, version_start) as version, reward from rollouts
                where run_id = $1 and purpose = 'recheck' and status = 'finished' and reward is not null
                  and coalesce(version_end, version_start) is not null`, [runId]),
    pool.query(`select task_id, at_version, decision from evictions where run_id = $1 order by at_version, id`, [runId]),
  ]);
  return poolRewardSeries(
    versions,
    tasks.map((t): PoolTask => ({ taskId: t.task_id, lastRecheckVersion: t.last_recheck_version, lastRecheckReward: t.last_recheck_reward })),
    train.rows.map((r): TrainReward => ({ taskId: r.task_id, version: r.version, reward: r.reward })),
    rechecks.rows.map((r): RecheckReward => ({ taskId: r.task_id, version: r.version, reward: r.reward })),
    evictions.rows.map((r): EvictionDecision => ({ taskId: r.task_id, atVersion: r.at_version, decision: r.decision })),
  );
}
