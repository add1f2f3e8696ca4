import type { ComparisonRow, Histogram, KeyNumbers, RunSummary, UpdateRow } from './types.js';

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
