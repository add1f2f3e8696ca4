import { mean } from './stats.js';
import type { PoolRewardPoint } from './types.js';

/**
 * Pool-wide reward: how well the policy does on the whole task pool, retired tasks
 * included. Training reward only covers the rollouts actually run, so once solved tasks
 * are retired it stops seeing them; this figure is the one that shows forgetting.
 *
 * After update v, for every task of the run's pool (its task_stats rows):
 *  - its state at v is replayed from the evictions log (retire_* / recheck_keep_retired
 *    → retired, revive → active, no decision yet → active);
 *  - an active task scores the mean reward of its last ATTEMPT_WINDOW train rollouts
 *    consumed by batches of version ≤ v;
 *  - a retired task scores the mean reward of its latest recheck round (recheck rollouts
 *    at one policy version ≤ v, taken since it was last retired); without recheck
 *    rollouts, task_stats.last_recheck_reward if its version fits;
 *  - a task with neither (never attempted, or retired and not rechecked yet) is skipped,
 *    never assumed solved, and counted in `tasksSkipped`.
 * The figure is the mean over the scored tasks; null when none is scored.
 */
export const ATTEMPT_WINDOW = 8;

export interface PoolTask { taskId: string; lastRecheckVersion: number | null; lastRecheckReward: number | null }
/** A train rollout consumed by the batch of `version`; ordered oldest first per task. */
export interface TrainReward { taskId: string; version: number; reward: number }
/** A finished recheck rollout run under policy `version`. */
export interface RecheckReward { taskId: string; version: number; reward: number }
export interface EvictionDecision { taskId: string; atVersion: number; decision: string }

export function poolRewardSeries(
  versions: number[],
  tasks: PoolTask[],
  train: TrainReward[],
  rechecks: RecheckReward[],
  evictions: EvictionDecision[],
): PoolRewardPoint[] {
  const byTask = <T extends { taskId: string }>(rows: T[]) => {
    const m = new Map<string, T[]>();
    for (const r of rows) {
      const list = m.get(r.taskId);
      if (list) list.push(r); else m.set(r.taskId, [r]);
    }
    return m;
  };
  const trainOf = byTask(train);
  const rechecksOf = byTask(rechecks);
  const evictionsOf = byTask([...evictions].sort((a, b) => a.atVersion - b.atVersion));

  return versions.map((v) => {
    let retiredScored = 0;
    let skipped = 0;
    const scores: number[] = [];
    for (const t of tasks) {
      const score = taskScoreAt(v, t, trainOf.get(t.taskId) ?? [], rechecksOf.get(t.taskId) ?? [], evictionsOf.get(t.taskId) ?? []);
      if (score === null) { skipped++; continue; }
      scores.push(score.value);
      if (score.retired) retiredScored++;
    }
    return { version: v, reward: mean(scores), tasksScored: scores.length, retiredScored, tasksSkipped: skipped };
  });
}

function taskScoreAt(v: number, task: PoolTask, train: TrainReward[], rechecks: RecheckReward[], evictions: EvictionDecision[]): { value: number; retired: boolean } | null {
  // Replay the task's state; remember when the current retirement began so a recheck
  // from an earlier retirement (before a revive) is not taken as current.
  let retiredSince: number | null = null;
  for (const e of evictions) {
    if (e.atVersion > v) break;
    if (e.decision === 'revive') retiredSince = null;
    else if (retiredSince === null) retiredSince = e.atVersion;
  }
  if (retiredSince === null) {
    const seen = train.filter((r) => r.version <= v).slice(-ATTEMPT_WINDOW);
    const m = mean(seen.map((r) => r.reward));
    return m === null ? null : { value: m, retired: false };
  }
  const since = retiredSince;
  const eligible = rechecks.filter((r) => r.version <= v && r.version >= since);
  if (eligible.length) {
    const latest = Math.max(...eligible.map((r) => r.version));
    return { value: mean(eligible.filter((r) => r.version === latest).map((r) => r.reward)) as number, retired: true };
  }
  const { lastRecheckVersion: lv, lastRecheckReward: lr } = task;
  if (lv !== null && lr !== null && lv <= v && lv >= since) return { value: lr, retired: true };
  return null;
}
