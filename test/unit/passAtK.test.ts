import { describe, expect, it } from 'vitest';
import { evaluationKey } from '../../core/evaluationLabels.js';
import { passAtK, poolPass, scoreTasks, solvedAtLeastOnce } from '../../core/passAtK.js';

/** pass@k (core/passAtK.ts): the unbiased estimator of Chen et al. 2021, checked against the
 *  direct count over every k-subset of the attempts, and the stress-pool rule built on it. */

function choose(n: number, k: number): number {
  let r = 1;
  for (let i = 0; i < k; i++) r = (r * (n - i)) / (i + 1);
  return r;
}

describe('pass@k', () => {
  it('equals the share of k-subsets with a success, for every n ≤ 10', () => {
    for (let n = 1; n <= 10; n++) for (let c = 0; c <= n; c++) for (let k = 1; k <= n; k++) {
      expect(passAtK(n, c, k)).toBeCloseTo(1 - choose(n - c, k) / choose(n, k), 12);
    }
    expect(passAtK(4, 1, 1)).toBe(0.25);
    expect(passAtK(4, 1, 4)).toBe(1);
    expect(passAtK(4, 0, 4)).toBe(0);
    expect(passAtK(0, 0, 4)).toBe(0);
    expect(passAtK(2, 1, 4)).toBe(1); // k > n: as many as there are
    expect(() => passAtK(3, 4, 1)).toThrow(/0 ≤ c ≤ n/);
  });

  it('scores tasks, leaves infrastructure failures out of n, and picks the tasks solved at least once', () => {
    const attempts = [
      { taskId: 'a', reward: 1, gate: 'passed' }, { taskId: 'a', reward: 0, gate: 'tests_failed' },
      { taskId: 'a', reward: 0, gate: 'format' }, { taskId: 'a', reward: 0, gate: 'sandbox_error' },
      { taskId: 'b', reward: 0, gate: 'tests_failed' }, { taskId: 'b', reward: 0, gate: 'engine_error' },
    ];
    const s = scoreTasks(['a', 'b', 'c'], attempts, 4);
    expect(s).toEqual([
      { taskId: 'a', attempts: 3, solved: 1, failed: 1, pass1: 1 / 3, passK: 1 },
      { taskId: 'b', attempts: 1, solved: 0, failed: 1, pass1: 0, passK: 0 },
      { taskId: 'c', attempts: 0, solved: 0, failed: 0, pass1: 0, passK: 0 },
    ]);
    expect(solvedAtLeastOnce(s)).toEqual(['a']);
    expect(poolPass(s)).toEqual({ pass1: 1 / 9, passK: 1 / 3 });
    expect(poolPass([])).toEqual({ pass1: null, passK: null });
  });
});

describe('evaluation keys', () => {
  it('name start, end and checkpoint evaluations once, periodic and retired ones once per version', () => {
    expect(evaluationKey('start', 7)).toBe('start');
    expect(evaluationKey('end', 7)).toBe('end');
    expect(evaluationKey('checkpoint', 7)).toBe('checkpoint');
    expect(evaluationKey('periodic', 7)).toBe('periodic-v7');
    expect(evaluationKey('retired', 7)).not.toBe(evaluationKey('retired', 8));
  });
});
