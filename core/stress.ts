/** The stress test's verdict (issue 12's acceptance, the published bar): from a weak start —
 *  pass@1 with frozen weights at most `maxStartPass1` — the training reward (batch means, one
 *  per update) reaches `target`; over the last third of the updates its 3-update moving average
 *  never falls more than `tolerance` below its peak; at least `minEpochs` passes over the pool;
 *  and the final frozen pass@1 is at least `target`. Every rule is checked and named. */

export interface StressInput {
  /** Batch mean reward per update, in order. */
  rewards: readonly number[];
  /** Frozen-weight pass@1 of the pool with the starting and the final weights (null: not measured). */
  startPass1: number | null;
  endPass1: number | null;
  /** Train groups started per pool task (a pass over the pool = one group per task). */
  epochs: number;
  minutes: number;
}

export interface StressRules { target: number; tolerance: number; maxStartPass1: number; minEpochs: number; maxMinutes: number }

export const STRESS_RULES: StressRules = { target: 0.9, tolerance: 0.05, maxStartPass1: 0.6, minEpochs: 20, maxMinutes: 30 };

export interface StressCheck { rule: string; ok: boolean; value: number | null }

export interface StressVerdict {
  pass: boolean;
  start: number;
  peak: number;
  /** Peak of the 3-update moving average, and its lowest point over the last third. */
  peakAvg3: number;
  lastThirdMinAvg3: number;
  lastThirdMean: number;
  updates: number;
  checks: StressCheck[];
  reason: string;
}

/** Trailing moving average over `w` values (shorter at the start). */
export function movingAverage(xs: readonly number[], w = 3): number[] {
  return xs.map((_, i) => {
    const win = xs.slice(Math.max(0, i - w + 1), i + 1);
    return win.reduce((a, b) => a + b, 0) / win.length;
  });
}

export function stressVerdict(input: StressInput, rules: StressRules = STRESS_RULES): StressVerdict {
  const r = input.rewards;
  const avg = movingAverage(r);
  const third = r.length ? Math.max(1, Math.ceil(r.length / 3)) : 0;
  const tail = avg.slice(avg.length - third);
  const peak = r.length ? Math.max(...r) : 0;
  const peakAvg3 = avg.length ? Math.max(...avg) : 0;
  const lastThirdMinAvg3 = tail.length ? Math.min(...tail) : 0;
  const lastThirdRaw = r.slice(r.length - third);
  const lastThirdMean = lastThirdRaw.length ? lastThirdRaw.reduce((a, b) => a + b, 0) / lastThirdRaw.length : 0;
  const checks: StressCheck[] = [
    { rule: `starting pass@1 (frozen) ≤ ${rules.maxStartPass1}`, ok: input.startPass1 !== null && input.startPass1 <= rules.maxStartPass1, value: input.startPass1 },
    { rule: `training reward reaches ≥ ${rules.target}`, ok: peak >= rules.target, value: r.length ? peak : null },
    { rule: `last third: 3-update average within ${rules.tolerance} of its peak`, ok: r.length > 0 && lastThirdMinAvg3 >= peakAvg3 - rules.tolerance - 1e-12, value: r.length ? lastThirdMinAvg3 : null },
    { rule: `≥ ${rules.minEpochs} epochs over the pool`, ok: input.epochs >= rules.minEpochs, value: input.epochs },
    { rule: `final pass@1 (frozen) ≥ ${rules.target}`, ok: input.endPass1 !== null && input.endPass1 >= rules.target, value: input.endPass1 },
    { rule: `within ${rules.maxMinutes} minutes`, ok: input.minutes <= rules.maxMinutes, value: input.minutes },
  ];
  const failed = checks.filter((c) => !c.ok);
  return {
    pass: failed.length === 0,
    start: r.length ? r[0] : 0,
    peak,
    peakAvg3,
    lastThirdMinAvg3,
    lastThirdMean,
    updates: r.length,
    checks,
    reason: failed.length ? failed.map((c) => `${c.rule}: ${c.value === null ? 'not measured' : c.value.toFixed(3)}`).join('; ') : 'every rule holds',
  };
}
