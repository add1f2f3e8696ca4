/** pass@k with frozen weights: the published rule that picks the stress pool (tasks the
 *  starting policy solves at least once in k attempts) and the honest start / end figures of a
 *  run. The unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained
 *  on Code", eq. 1): pass@k = 1 − C(n−c, k) / C(n, k) for n attempts with c solved. Attempts
 *  that never reached a decision (sandbox, engine or workflow failure) are not the policy's:
 *  they are counted apart and left out of n. */

export interface Attempt { taskId: string; reward: number; gate: string }

export interface TaskScore {
  taskId: string;
  /** Attempts that reached a decision (n). */
  attempts: number;
  /** Of those, solved (reward 1): c. */
  solved: number;
  /** Attempts lost to infrastructure (not in n). */
  failed: number;
  pass1: number;
  passK: number;
}

const INFRA = new Set(['sandbox_error', 'engine_error', 'workflow_failed', 'not_frozen']);

/** An evaluation's attempt as scored: one whose tokens carry a weight version other than the
 *  evaluation's frozen `version` is not that policy's attempt (gate 'not_frozen', counted
 *  apart like an infrastructure failure). Null versions: no token was generated. */
export function frozenAttempt(a: Attempt, versions: readonly (number | null)[], version: number): Attempt {
  return versions.every((v) => v === null || v === version) ? a : { taskId: a.taskId, reward: 0, gate: 'not_frozen' };
}

/** Unbiased pass@k for n attempts with c solved (k ≤ n; 0 attempts → 0). */
export function passAtK(n: number, c: number, k: number): number {
  if (!Number.isInteger(n) || !Number.isInteger(c) || !Number.isInteger(k) || n < 0 || c < 0 || c > n || k < 1) throw new Error(`pass@k needs integers 0 ≤ c ≤ n and k ≥ 1 (got n=${n}, c=${c}, k=${k})`);
  if (n === 0) return 0;
  const kk = Math.min(k, n);
  if (n - c < kk) return 1;
  if (kk === 1) return c / n;
  // 1 − Π_{i=n−c+1..n} (1 − kk / i), the numerically stable product form
  let fail = 1;
  for (let i = n - c + 1; i <= n; i++) fail *= 1 - kk / i;
  return 1 - fail;
}

/** Per-task scores over attempts, in the order tasks are listed (tasks with no attempt score 0). */
export function scoreTasks(taskIds: readonly string[], attempts: readonly Attempt[], k: number): TaskScore[] {
  return taskIds.map((taskId) => {
    const mine = attempts.filter((a) => a.taskId === taskId);
    const decided = mine.filter((a) => !INFRA.has(a.gate));
    const solved = decided.filter((a) => a.reward >= 1).length;
    return { taskId, attempts: decided.length, solved, failed: mine.length - decided.length, pass1: passAtK(decided.length, solved, 1), passK: passAtK(decided.length, solved, k) };
  });
}

/** Mean over tasks of pass@1 and pass@k (null for no task). */
export function poolPass(scores: readonly TaskScore[]): { pass1: number | null; passK: number | null } {
  if (!scores.length) return { pass1: null, passK: null };
  return { pass1: scores.reduce((a, s) => a + s.pass1, 0) / scores.length, passK: scores.reduce((a, s) => a + s.passK, 0) / scores.length };
}

/** The stress pool: tasks solved at least once (in the order given). */
export const solvedAtLeastOnce = (scores: readonly TaskScore[]): string[] => scores.filter((s) => s.solved > 0).map((s) => s.taskId);
