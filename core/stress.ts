/** The stress test's verdict on a training-reward curve (one value per update): the reward
 *  must climb to at least 0.9 and hold it — over the last fifth of the updates it never falls
 *  more than 0.1 below its peak. Measured on smoothed-free raw batch means. */
export interface StressVerdict { pass: boolean; start: number; peak: number; lastFifthMin: number; updates: number; reason: string }

export function stressVerdict(rewards: readonly number[], target = 0.9, tolerance = 0.1): StressVerdict {
  if (rewards.length === 0) return { pass: false, start: 0, peak: 0, lastFifthMin: 0, updates: 0, reason: 'no updates' };
  const peak = Math.max(...rewards);
  const tail = rewards.slice(Math.floor(rewards.length * 0.8));
  const lastFifthMin = Math.min(...tail);
  const reached = peak >= target;
  const held = lastFifthMin >= peak - tolerance;
  return {
    pass: reached && held,
    start: rewards[0],
    peak,
    lastFifthMin,
    updates: rewards.length,
    reason: !reached ? `peak ${peak.toFixed(2)} < ${target}` : !held ? `last fifth fell to ${lastFifthMin.toFixed(2)}, more than ${tolerance} below the peak` : 'reached and held',
  };
}
