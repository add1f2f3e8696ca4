import { describe, expect, it } from 'vitest';
import { parseRunConfig } from '../../core/config.js';
import { lrAt } from '../../core/lrSchedule.js';

describe('lrAt: the trainer lr of each update', () => {
  it('constant (the default) is the configured lr at every update', () => {
    const t = parseRunConfig({}, 'test').trainer;
    expect(t.lrSchedule).toBe('constant');
    for (const v of [1, 7, 40, 99]) expect(lrAt(t, v, 40)).toBe(t.lr);
  });

  it('linear: lr at update 1, lr × final at the last, a straight line between', () => {
    const t = { lr: 1e-4, lrSchedule: 'linear' as const, lrFinal: 0.3 };
    expect(lrAt(t, 1, 40)).toBeCloseTo(1e-4, 15);
    expect(lrAt(t, 40, 40)).toBeCloseTo(3e-5, 15);
    expect(lrAt(t, 20.5, 40)).toBeCloseTo(6.5e-5, 15);
    const steps = Array.from({ length: 39 }, (_, i) => lrAt(t, i + 1, 40) - lrAt(t, i + 2, 40));
    for (const d of steps) expect(d).toBeCloseTo(steps[0]!, 15);
  });

  it('cosine: the same ends, flat at both ends and steepest in the middle', () => {
    const t = { lr: 1e-4, lrSchedule: 'cosine' as const, lrFinal: 0.1 };
    expect(lrAt(t, 1, 41)).toBeCloseTo(1e-4, 15);
    expect(lrAt(t, 41, 41)).toBeCloseTo(1e-5, 15);
    expect(lrAt(t, 21, 41)).toBeCloseTo(5.5e-5, 15);
    expect(lrAt(t, 1, 41) - lrAt(t, 2, 41)).toBeLessThan(lrAt(t, 20, 41) - lrAt(t, 21, 41));
  });

  it('an update past the planned last one keeps the final lr; a one-update run uses lr', () => {
    const t = { lr: 1e-4, lrSchedule: 'linear' as const, lrFinal: 0.5 };
    expect(lrAt(t, 60, 40)).toBeCloseTo(5e-5, 15);
    expect(lrAt(t, 1, 1)).toBe(1e-4);
  });

  it('the config refuses an unknown schedule and a final fraction above 1', () => {
    expect(() => parseRunConfig({ trainer: { lrSchedule: 'step' } }, 'test')).toThrow(/lrSchedule/);
    expect(() => parseRunConfig({ trainer: { lrFinal: 1.5 } }, 'test')).toThrow(/lrFinal/);
  });
});
