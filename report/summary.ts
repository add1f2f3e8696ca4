import { countBatchMembersByStaleness, listBatchRewards, listPolicyVersions } from '../store/batches.js';
import { countPlacementsPerUpdate, countResubmittedRequests, engineLoadTotals } from '../store/engines.js';
import { listEvictions, listTaskStats } from '../store/evictions.js';
import type { Queryable } from '../store/pool.js';
import { countGateDecisions, countRolloutsByStaleness, listRecheckRewards } from '../store/rollouts.js';
import { getRun } from '../store/runs.js';
import { poolRewardSeries, type EvictionDecision, type PoolTask, type RecheckReward, type TrainReward } from './poolReward.js';
import { SMOOTHING_ALPHA, ema, histogram, keyNumbers, seconds } from './stats.js';
import type { EngineLoad, EvictionRow, GateCount, RunSummary, UpdateRow } from './types.js';

export type { RunSummary } from './types.js';
export { summarizeForComparison } from './stats.js';

/** Reads one run's audit history from Postgres into a RunSummary. Read-only; every query
 *  is scoped to the run, so it is safe against a live run (it reports what is there). */
export async function buildRunSummary(pool: Queryable, runId: string): Promise<RunSummary> {
  const runRow = await getRun(pool, runId);
  if (!runRow) throw new Error(`no run '${runId}' in the runs table; list runs with: select run_id, status from runs order by started_at desc`);
  const generatedAt = new Date();
  const startedAt = runRow.startedAt;

  const updates = await loadUpdates(pool, runId, startedAt);
  const smoothedReward = ema(updates.map((u) => u.meanReward));
  const [staleness, engines, gates, evictions, poolReward] = await Promise.all([
    loadStaleness(pool, runId),
    loadEngines(pool, runId, updates.length, runRow.config as EnginesConfig | null),
    loadGates(pool, runId),
    loadEvictions(pool, runId),
    loadPoolReward(pool, runId, updates.map((u) => u.version)),
  ]);

  return {
    generatedAt: generatedAt.toISOString(),
    run: {
      id: runRow.runId,
      name: runRow.name,
      status: runRow.status,
      config: runRow.config,
      startedAt: startedAt.toISOString(),
      endedAt: runRow.endedAt ? runRow.endedAt.toISOString() : null,
      durationSeconds: seconds(startedAt, runRow.endedAt ?? generatedAt),
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

async function loadUpdates(pool: Queryable, runId: string, startedAt: Date): Promise<UpdateRow[]> {
  const rows = await listPolicyVersions(pool, runId, { fromVersion: 1 });
  let prev = startedAt;
  return rows.map((r) => {
    const createdAt = r.createdAt;
    const row: UpdateRow = {
      version: r.version,
      createdAt: createdAt.toISOString(),
      secondsSinceStart: seconds(startedAt, createdAt),
      secondsPerUpdate: seconds(prev, createdAt),
      batchRollouts: r.batchRollouts,
      meanReward: r.batchMeanReward,
      discardedStale: r.discardedStale,
      updateMs: r.updateMs,
      trainMs: r.trainMs,
      publishMs: r.publishMs,
      loadMs: r.loadMs,
      metrics: r.metrics,
      pool: r.pool,
    };
    prev = createdAt;
    return row;
  });
}

async function loadStaleness(pool: Queryable, runId: string): Promise<RunSummary['staleness']> {
  const [batch, discarded] = await Promise.all([
    countBatchMembersByStaleness(pool, runId),
    countRolloutsByStaleness(pool, runId, 'discarded'),
  ]);
  return { batch: histogram(batch), discarded: histogram(discarded) };
}

type EnginesConfig = { engines?: { endpoints?: { id: string; kind?: string }[] } };

/** Placements per engine, bucketed by update window (store/engines.ts countPlacementsPerUpdate):
 *  bucket k-1 holds the placements that fed update k, bucket N the ones after the last update. */
async function loadEngines(pool: Queryable, runId: string, nUpdates: number, config: EnginesConfig | null): Promise<EngineLoad[]> {
  const kinds = new Map((config?.engines?.endpoints ?? []).map((e) => [e.id, e.kind ?? 'reference']));
  const [totals, buckets, resubmitted] = await Promise.all([
    engineLoadTotals(pool, runId),
    countPlacementsPerUpdate(pool, runId),
    countResubmittedRequests(pool, runId),
  ]);
  const engines = new Map<string, EngineLoad>();
  for (const r of totals) {
    engines.set(r.engineId, {
      engineId: r.engineId, kind: kinds.get(r.engineId) ?? 'reference', placements: r.placements, resubmitted: resubmitted.get(r.engineId) ?? 0, failures: r.failures,
      maxRunning: r.maxRunning, maxWaiting: r.maxWaiting,
      placementsPerUpdate: new Array<number>(nUpdates).fill(0), placementsSinceLastUpdate: 0,
    });
  }
  for (const r of buckets) {
    const e = engines.get(r.engineId);
    if (!e) continue;
    if (r.bucket < nUpdates) e.placementsPerUpdate[r.bucket] += r.n;
    else e.placementsSinceLastUpdate += r.n;
  }
  return [...engines.values()];
}

async function loadGates(pool: Queryable, runId: string): Promise<GateCount[]> {
  return countGateDecisions(pool, runId, 'train');
}

async function loadEvictions(pool: Queryable, runId: string): Promise<EvictionRow[]> {
  return (await listEvictions(pool, runId)).map((r) => ({
    taskId: r.taskId, atVersion: r.atVersion, decision: r.decision, evidence: r.evidence, decidedAt: r.decidedAt.toISOString(),
  }));
}

async function loadPoolReward(pool: Queryable, runId: string, versions: number[]): Promise<RunSummary['poolReward']> {
  const tasks = await listTaskStats(pool, runId);
  if (!tasks.length) return null;
  const [train, rechecks, evictions] = await Promise.all([
    listBatchRewards(pool, runId),
    listRecheckRewards(pool, runId),
    listEvictions(pool, runId),
  ]);
  return poolRewardSeries(
    versions,
    tasks.map((t): PoolTask => ({ taskId: t.taskId, lastRecheckVersion: t.lastRecheckVersion, lastRecheckReward: t.lastRecheckReward })),
    train.map((r): TrainReward => ({ taskId: r.taskId, version: r.version, reward: r.reward })),
    rechecks.map((r): RecheckReward => ({ taskId: r.taskId, version: r.version, reward: r.reward })),
    evictions.map((r): EvictionDecision => ({ taskId: r.taskId, atVersion: r.atVersion, decision: r.decision })),
  );
}
