import type { ComparisonRow, EvaluationSummary, Histogram, KeyNumbers, RunSummary, StressLayerRow, TimeBreakdown, UpdateRow } from './types.js';

/** Pure arithmetic over report data; no I/O, so tests can pin every number. */

export const SMOOTHING_ALPHA = 0.2;

/** Exponential moving average. A missing value carries the previous average forward so
 *  one update without a reward (e.g. an empty batch) does not break the curve. */
export function ema(values: (number | null)[], alpha = SMOOTHING_ALPHA): (number | null)[] {
  let prev: number | null = null;
  return values.map((v) => {
    if (v !== null && Number.isFinite(v)) prev = prev === null ? v : alpha * v + (1 - alpha) * prev;
    return prev;
  });
}

export function mean(values: (number | null | undefined)[]): number | null {
  const xs = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

export function histogram(rows: { staleness: number | null; n: number }[]): Histogram {
  const h: Histogram = {};
  for (const r of rows) {
    const key = r.staleness === null ? 'unknown' : String(r.staleness);
    h[key] = (h[key] ?? 0) + r.n;
  }
  return h;
}

/** Histogram keys in plotting order: numeric ascending, "unknown" last. */
export function histogramKeys(...hs: Histogram[]): string[] {
  const keys = new Set(hs.flatMap((h) => Object.keys(h)));
  return [...keys].sort((a, b) => (a === 'unknown' ? 1 : b === 'unknown' ? -1 : Number(a) - Number(b)));
}

export function seconds(from: Date, to: Date): number {
  return (to.getTime() - from.getTime()) / 1000;
}

export function keyNumbers(updates: UpdateRow[], smoothed: (number | null)[]): KeyNumbers {
  let peak: number | null = null;
  let peakVersion: number | null = null;
  smoothed.forEach((s, i) => {
    if (s !== null && (peak === null || s > peak)) { peak = s; peakVersion = updates[i].version; }
  });
  const fifth = Math.max(1, Math.ceil(updates.length / 5));
  const tail = smoothed.slice(-fifth).filter((s): s is number => s !== null);
  return {
    updates: updates.length,
    finalReward: updates.length ? updates[updates.length - 1].meanReward : null,
    finalRewardSmoothed: smoothed.length ? smoothed[smoothed.length - 1] : null,
    peakRewardSmoothed: peak,
    peakVersion,
    lastFifthMinSmoothed: tail.length ? Math.min(...tail) : null,
    totalDiscarded: updates.reduce((a, u) => a + (u.discardedStale ?? 0), 0),
    meanSecondsPerUpdate: mean(updates.map((u) => u.secondsPerUpdate)),
  };
}

/** One row of a run comparison (e.g. least-loaded vs pinned routing): per-update means.
 *  An update with no recorded discard count counts as 0 discarded; rewards skip nulls. */
export function summarizeForComparison(summary: RunSummary, label: string): ComparisonRow {
  const u = summary.updates;
  return {
    label,
    runId: summary.run.id,
    discardedPerUpdate: mean(u.map((x) => x.discardedStale ?? 0)) ?? 0,
    secondsPerUpdate: mean(u.map((x) => x.secondsPerUpdate)) ?? 0,
    meanReward: mean(u.map((x) => x.meanReward)) ?? 0,
  };
}

/** Train groups started per pool task. The pool: the 'start' evaluation's in-pool tasks when
 *  the run has one (the stress pool picked by the starting policy), else the distinct tasks the
 *  train rollouts attempted. Null with no train rollouts. */
export function epochsOverPool(train: { groups: number; tasks: number }, evaluations: EvaluationSummary[]): number | null {
  if (!train.groups) return null;
  const start = evaluations.find((e) => e.label === 'start');
  const poolTasks = start && start.poolTasks > 0 ? start.poolTasks : train.tasks;
  return poolTasks ? train.groups / poolTasks : null;
}

export const OTHER_TIME_LABEL = 'sandbox preparation, diff, Temporal and Postgres waits (not measured apart)';

/** The time breakdown from the measured means (milliseconds, store/timeline.ts
 *  trainRolloutTimes) and the updates' stage timings. Nothing is estimated: the remainder of a
 *  rollout's wall time is reported as one figure under OTHER_TIME_LABEL. */
export function timeBreakdown(
  t: { rollouts: number; wallMs: number | null; genMs: number | null; toolMs: number | null; gradeMs: number | null; graded: number },
  updates: UpdateRow[],
): TimeBreakdown {
  const sec = (ms: number | null | undefined) => (typeof ms === 'number' && Number.isFinite(ms) ? ms / 1000 : null);
  const measured = t.rollouts > 0;
  const wall = measured ? sec(t.wallMs) : null;
  const gen = measured ? sec(t.genMs) : null;
  const tool = measured ? sec(t.toolMs) : null;
  const grading = measured && t.graded > 0 ? sec(t.gradeMs) : null;
  const perUpdate = updates.map((u) => {
    const loads = Object.values(u.loadMs ?? {}).filter((v) => typeof v === 'number' && Number.isFinite(v));
    return {
      version: u.version,
      trainSeconds: sec(u.trainMs),
      weightLoadSeconds: loads.length ? sec(loads.reduce((a, b) => a + b, 0) / loads.length) : null,
      slowestLoadSeconds: loads.length ? sec(Math.max(...loads)) : null,
      updateSeconds: sec(u.updateMs),
    };
  });
  return {
    rollouts: t.rollouts,
    wallSeconds: wall,
    generationSeconds: gen,
    toolSeconds: tool,
    gradingSeconds: grading,
    graded: t.graded,
    otherSeconds: wall === null ? null : wall - (gen ?? 0) - (tool ?? 0) - (grading ?? 0),
    otherLabel: OTHER_TIME_LABEL,
    perUpdate,
    meanTrainSeconds: mean(perUpdate.map((p) => p.trainSeconds)),
    meanWeightLoadSeconds: mean(perUpdate.map((p) => p.weightLoadSeconds)),
    meanUpdateSeconds: mean(perUpdate.map((p) => p.updateSeconds)),
  };
}

/** Mean of the last third of a series (its last ceil(n / 3) entries), skipping missing ones. */
export function lastThirdMean(values: (number | null)[]): number | null {
  if (!values.length) return null;
  return mean(values.slice(values.length - Math.max(1, Math.ceil(values.length / 3))));
}

/** The frozen-weight pass@1 of the training pool for one evaluation label (over every evaluated
 *  task when none is marked in the pool); null without that evaluation. */
export function poolPass1(s: RunSummary, label: 'start' | 'end'): number | null {
  const e = (s.evaluations ?? []).find((x) => x.label === label);
  if (!e) return null;
  return e.poolTasks > 0 ? e.poolPass1 : e.pass1;
}

/** One layer of a `floe stress` comparison, from that layer's run summary. */
export function stressLayerRow(s: RunSummary, label: string): StressLayerRow {
  const u = s.updates;
  const rewards = u.map((x) => x.meanReward);
  return {
    label,
    runId: s.run.id,
    rewards,
    runRewards: u.map((x) => x.runReward ?? null),
    formatValidity: u.map((x) => x.formatValidity ?? null),
    discarded: u.map((x) => x.discardedStale ?? 0),
    secondsPerUpdate: u.map((x) => x.secondsPerUpdate),
    lastThirdMean: lastThirdMean(rewards),
    startPass1: poolPass1(s, 'start'),
    endPass1: poolPass1(s, 'end'),
  };
}

/** Below this difference in last-third mean reward, two layers are called indistinguishable. */
export const NO_DIFFERENCE = 0.02;

export interface LayerDifference { from: string; to: string; delta: number | null; measurable: boolean; sentence: string }

/** What each layer adds over the one before it (the ladder is cumulative: naive → gate → raw →
 *  full), by last-third mean reward; |Δ| < NO_DIFFERENCE says "no measurable difference". */
export function layerDifferences(rows: StressLayerRow[], threshold = NO_DIFFERENCE): LayerDifference[] {
  const f = (v: number | null) => (v === null ? '–' : v.toFixed(3));
  return rows.slice(1).map((b, i) => {
    const a = rows[i];
    if (a.lastThirdMean === null || b.lastThirdMean === null) {
      return { from: a.label, to: b.label, delta: null, measurable: false, sentence: `layer ${b.label} vs ${a.label}: not comparable (no last-third reward: ${f(a.lastThirdMean)} vs ${f(b.lastThirdMean)})` };
    }
    const delta = b.lastThirdMean - a.lastThirdMean;
    const measurable = Math.abs(delta) >= threshold;
    const sentence = measurable
      ? `layer ${b.label} ${delta > 0 ? 'raises' : 'lowers'} the last-third mean reward over ${a.label}: ${f(a.lastThirdMean)} → ${f(b.lastThirdMean)} (${delta > 0 ? '+' : '−'}${Math.abs(delta).toFixed(3)})`
      : `layer ${b.label} makes no measurable difference on this policy: ${f(a.lastThirdMean)} vs ${f(b.lastThirdMean)} (last-third mean reward, ${a.label} vs ${b.label}; |Δ| < ${threshold})`;
    return { from: a.label, to: b.label, delta, measurable, sentence };
  });
}
