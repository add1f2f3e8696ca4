/** Activity timing for the benchmarks (bench/throughput.ts, bench/scale.ts): each activity's
 *  wall time and its scheduling latency, per rollout. */
import { Context } from '@temporalio/activity';
import { round } from './procCpu.js';

interface Stat { n: number; totalMs: number }
export class Stats {
  readonly m = new Map<string, Stat>();
  add(key: string, ms: number): void {
    const s = this.m.get(key) ?? { n: 0, totalMs: 0 };
    s.n++;
    s.totalMs += ms;
    this.m.set(key, s);
  }
  perRollout(rollouts: number): Record<string, { calls: number; msEach: number; msPerRollout: number }> {
    const out: Record<string, { calls: number; msEach: number; msPerRollout: number }> = {};
    for (const [k, s] of [...this.m].sort((a, b) => b[1].totalMs - a[1].totalMs)) {
      out[k] = { calls: round(s.n / rollouts, 2), msEach: round(s.totalMs / s.n, 1), msPerRollout: round(s.totalMs / rollouts, 1) };
    }
    return out;
  }
}

/** Time every activity, and its scheduling latency (start minus this attempt's scheduled time). */
export function timed<T extends Record<string, unknown>>(acts: T, current: () => { activities: Stats; latency: Stats } | null): T {
  const out: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(acts)) {
    if (typeof f !== 'function') { out[name] = f; continue; }
    out[name] = async (...a: unknown[]) => {
      const t0 = Date.now();
      const stats = current();
      try {
        const info = Context.current().info;
        stats?.latency.add(name, Math.max(0, t0 - info.currentAttemptScheduledTimestampMs));
      } catch { /* a local activity has no schedule-to-start of its own here */ }
      try {
        return await (f as (...x: unknown[]) => Promise<unknown>)(...a);
      } finally {
        stats?.activities.add(name, Date.now() - t0);
      }
    };
  }
  return out as T;
}

