/** The shape of a run report: everything the HTML page and `summary.json` show, computed
 *  once from Postgres so scripts and CI can check a run without scraping the page. */

/** `metrics` jsonb of a policy version; the trainer may omit any field. */
export interface UpdateMetrics {
  loss?: number;
  grad_norm?: number;
  entropy?: number;
  clip_fraction?: number;
  mismatch_mean_abs_logprob?: number;
  mismatch_kl?: number;
  [other: string]: unknown;
}

/** `pool` jsonb of a policy version: task pool sizes after the update's eviction pass. */
export interface PoolSizes {
  active?: number;
  retired_mastered?: number;
  retired_hopeless?: number;
  revived?: number;
}

export interface UpdateRow {
  version: number;
  createdAt: string;
  secondsSinceStart: number;
  /** Wall time since the previous update (since run start for the first one). */
  secondsPerUpdate: number;
  batchRollouts: number | null;
  meanReward: number | null;
  discardedStale: number | null;
  updateMs: number | null;
  trainMs: number | null;
  publishMs: number | null;
  loadMs: Record<string, number> | null;
  metrics: UpdateMetrics | null;
  pool: PoolSizes | null;
}

/** staleness value → rollouts; key "unknown" for rollouts with no recorded staleness. */
export type Histogram = Record<string, number>;

export interface EngineLoad {
  engineId: string;
  /** The server kind (reference | vllm | sglang) from the run's config. */
  kind: string;
  placements: number;
  /** Requests aborted by a weight update (or whose ids could not be attributed to one
   *  version) and resubmitted from their exact prefix. */
  resubmitted: number;
  failures: number;
  maxRunning: number | null;
  maxWaiting: number | null;
  /** Placements between update k-1 and update k, aligned with `updates`. */
  placementsPerUpdate: number[];
  /** Placements after the last update (the window still filling). */
  placementsSinceLastUpdate: number;
}

export interface GateCount {
  gate: string;
  rollouts: number;
  meanReward: number | null;
}

export interface EvictionRow {
  taskId: string;
  atVersion: number;
  decision: string;
  evidence: unknown;
  decidedAt: string;
}

/** Pool-wide reward after update `version` (definition in report/poolReward.ts). */
export interface PoolRewardPoint {
  version: number;
  reward: number | null;
  /** Tasks that contributed a score. */
  tasksScored: number;
  /** Of those, retired tasks scored by their latest recheck. */
  retiredScored: number;
  /** Tasks left out: no train attempt yet, or retired and not rechecked since retiring. */
  tasksSkipped: number;
}

export interface ComparisonRow {
  label: string;
  runId: string;
  discardedPerUpdate: number;
  secondsPerUpdate: number;
  meanReward: number;
}

/** Headline figures; rewards on the smoothed (EMA) series unless named raw. */
export interface KeyNumbers {
  updates: number;
  finalReward: number | null;
  finalRewardSmoothed: number | null;
  peakRewardSmoothed: number | null;
  peakVersion: number | null;
  /** Lowest smoothed reward over the last fifth of updates: does the run hold its peak? */
  lastFifthMinSmoothed: number | null;
  totalDiscarded: number;
  meanSecondsPerUpdate: number | null;
}

export interface RunSummary {
  generatedAt: string;
  run: {
    id: string;
    name: string;
    status: string;
    config: unknown;
    startedAt: string;
    endedAt: string | null;
    /** ended_at − started_at, or up to `generatedAt` while the run is live. */
    durationSeconds: number;
  };
  updates: UpdateRow[];
  /** EMA (alpha = SMOOTHING_ALPHA) of `updates[i].meanReward`, aligned with `updates`. */
  smoothedReward: (number | null)[];
  smoothingAlpha: number;
  staleness: { batch: Histogram; discarded: Histogram };
  engines: EngineLoad[];
  gates: GateCount[];
  evictions: EvictionRow[];
  /** Null when the run has no task_stats rows (nothing to define the pool by). */
  poolReward: PoolRewardPoint[] | null;
  keyNumbers: KeyNumbers;
  /** Filled by callers that compare runs (e.g. router policies); rendered when present. */
  comparison?: ComparisonRow[];
}
