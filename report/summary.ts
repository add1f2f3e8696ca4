import { countBatchMembersByStaleness, listBatchRewards, listPolicyVersions } from '../store/batches.js';
import { countPlacementsPerUpdate, countResubmittedRequests, engineLoadTotals, inFlightUpdateCosts } from '../store/engines.js';
import { listEvictions, listTaskStats } from '../store/evictions.js';
import type { Queryable } from '../store/pool.js';
import { countGateDecisions, countRolloutsByStaleness, listRecheckRewards } from '../store/rollouts.js';
import { getRun } from '../store/runs.js';
import { listEvaluations } from '../store/evaluations.js';
import { countTrainGroups, listEvaluationSummaries, trainRewardsPerUpdate, trainRolloutTimes, trainShortcutsPerUpdate, trainTurnFormatPerUpdate } from '../store/timeline.js';
import type { ShortcutFlag } from '../core/shortcuts.js';
import { poolRewardSeries, type EvictionDecision, type PoolTask, type RecheckReward, type TrainReward } from './poolReward.js';
import { SMOOTHING_ALPHA, ema, epochsOverPool, histogram, keyNumbers, seconds, timeBreakdown } from './stats.js';
import type { EngineLoad, EvaluationSummary, EvictionRow, GateCount, InFlightCost, RunSummary, UpdateRow } from './types.js';

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
  const [staleness, engines, inFlight, gates, evictions, poolReward, evaluations, evaluationTasks, groups, times] = await Promise.all([
    loadStaleness(pool, runId),
    loadEngines(pool, runId, updates.length, runRow.config as EnginesConfig | null),
    loadInFlight(pool, runId, updates.length, runRow.config as EnginesConfig | null),
    loadGates(pool, runId),
    loadEvictions(pool, runId),
    loadPoolReward(pool, runId, updates.map((u) => u.version)),
    loadEvaluations(pool, runId),
    listEvaluations(pool, runId),
    countTrainGroups(pool, runId),
    trainRolloutTimes(pool, runId),
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
    inFlight,
    gates,
    evictions,
    poolReward,
    evaluations,
    evaluationTasks,
    epochs: epochsOverPool(groups, evaluations),
    timeBreakdown: timeBreakdown(times, updates),
    keyNumbers: keyNumbers(updates, smoothedReward),
  };
}

/** One row per update; the window columns (runReward, formatValidity) count what ended or was
 *  written between the previous update and this one (store/timeline.ts buckets). */
async function loadUpdates(pool: Queryable, runId: string, startedAt: Date): Promise<UpdateRow[]> {
  const [rows, rewards, format, shortcuts] = await Promise.all([
    listPolicyVersions(pool, runId, { fromVersion: 1 }),
    trainRewardsPerUpdate(pool, runId),
    trainTurnFormatPerUpdate(pool, runId),
    trainShortcutsPerUpdate(pool, runId),
  ]);
  const rewardIn = new Map(rewards.map((r) => [r.bucket, r]));
  const formatIn = new Map(format.map((r) => [r.bucket, r]));
  const shortcutsIn = new Map(shortcuts.map((r) => [r.bucket, r]));
  let prev = startedAt;
  return rows.map((r, i) => {
    const createdAt = r.createdAt;
    const won = rewardIn.get(i);
    const turns = formatIn.get(i);
    const tried = shortcutsIn.get(i);
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
      runReward: won?.meanReward ?? null,
      runRollouts: won?.rollouts ?? 0,
      formatValidity: turns && turns.turns ? turns.formatOk / turns.turns : null,
      turns: turns?.turns ?? 0,
      shortcutShare: tried && tried.rollouts ? Object.fromEntries(Object.entries(tried.flags).map(([f, n]) => [f, n / tried.rollouts])) as Record<ShortcutFlag, number> : null,
    };
    prev = createdAt;
    return row;
  });
}

async function loadEvaluations(pool: Queryable, runId: string): Promise<EvaluationSummary[]> {
  return (await listEvaluationSummaries(pool, runId)).map((e) => ({
    label: e.label, version: e.version, k: e.k, tasks: e.tasks, poolTasks: e.poolTasks, pass1: e.pass1, passK: e.passK, poolPass1: e.poolPass1,
  }));
}

async function loadStaleness(pool: Queryable, runId: string): Promise<RunSummary['staleness']> {
  const [batch, discarded] = await Promise.all([
    countBatchMembersByStaleness(pool, runId),
    countRolloutsByStaleness(pool, runId, 'discarded'),
  ]);
  return { batch: histogram(batch), discarded: histogram(discarded) };
}

type EnginesConfig = { engines?: { endpoints?: { id: string; kind?: string }[]; updateMode?: string } };

/** The in-flight cost of the run's updates, per update (per load for the stall). */
async function loadInFlight(pool: Queryable, runId: string, updates: number, config: EnginesConfig | null): Promise<InFlightCost> {
  const c = await inFlightUpdateCosts(pool, runId);
  const per = (x: number) => (updates ? x / updates : null);
  return {
    updateMode: config?.engines?.updateMode ?? 'abort',
    updates,
    droppedTokensPerUpdate: per(c.droppedTokens),
    recomputedTokensPerUpdate: per(c.recomputedTokens),
    spanningTurnsPerUpdate: per(c.spanningTurns),
    stallSecondsPerLoad: c.pausedLoads ? c.stallMs / c.pausedLoads / 1000 : null,
  };
}

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
