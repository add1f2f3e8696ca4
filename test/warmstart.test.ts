import { describe, expect, it } from 'vitest';
import { selectTasks } from '../tasks/loaders.js';
import { solvablePool } from '../infra/warmstart.js';
import { settings } from './helpers/platform.js';

describe('the stress pool', () => {
  it('keeps only tasks whose gold trajectory fits the context and the reply budget, up to the limit', async () => {
    const pick = (ids: string[]) => selectTasks({ source: 'toy', include: ids, limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
    // ini_keys: a gold trajectory longer than the 1024-token context; duration_days: a 124-byte gold reply
    const candidates = pick(['toy__ini_keys', 'toy__duration_days', 'toy__bucket_refill', 'toy__caesar_wrap', 'toy__hex_pad']);
    const pool = await solvablePool(settings, candidates, 0, 120);
    expect(pool.tasks.map((t) => t.instanceId)).toEqual(['toy__bucket_refill', 'toy__caesar_wrap', 'toy__hex_pad']);
    expect(pool.tooLong).toEqual(['toy__duration_days', 'toy__ini_keys']);
    expect(new Set(pool.trajectories.map((t) => t.taskId))).toEqual(new Set(['toy__bucket_refill', 'toy__caesar_wrap', 'toy__hex_pad']));
    // the limit stops the search once enough tasks are kept
    expect((await solvablePool(settings, candidates, 2, 120)).tasks.map((t) => t.instanceId)).toEqual(['toy__bucket_refill', 'toy__caesar_wrap']);
    for (const t of pool.trajectories) {
      // one sequence per trajectory: within the context, masked over the replies, each reply ending with EOS (256)
      expect(t.ids.length).toBeLessThanOrEqual(1024);
      expect(t.lossMask.length).toBe(t.ids.length);
      expect(t.lossMask.filter((m) => m === 1).length).toBe(t.replies.reduce((a, b) => a + b, 0));
      expect(t.ids.filter((id) => id === 256).length).toBe(t.replies.length);
      expect(t.replies.every((n) => n <= 120)).toBe(true);
    }
    // a larger reply budget lets duration_days in
    const roomy = await solvablePool(settings, pick(['toy__duration_days']), 0, 160);
    expect(roomy.tasks.map((t) => t.instanceId)).toEqual(['toy__duration_days']);
  }, 120_000);
});
