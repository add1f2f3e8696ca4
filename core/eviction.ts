/** Task eviction with recheck (pure policy). Tasks solved on every recent attempt, or failed
 *  on all, are retired from training so the budget goes where it still teaches; retired
 *  tasks are re-scored every R updates with the current weights and revived if they regress
 *  (eviction otherwise hides forgetting). */

export type TaskState = 'active' | 'retired_mastered' | 'retired_hopeless';

export interface TaskRecord {
  state: TaskState;
  /** Rewards of the latest train attempts, oldest first (bounded). */
  recent: number[];
  lastRecheckVersion: number | null;
  lastRecheckReward: number | null;
  revivals: number;
}

export interface EvictionPolicy {
  masteredK: number;
  hopelessM: number;
  recheckEvery: number;
  reviveBelow: number;
  /** recipe.recheck: false = retired tasks stay retired (never re-scored). Absent = true. */
  recheck?: boolean;
}

export type Decision = 'retire_mastered' | 'retire_hopeless' | 'revive' | 'recheck_keep_retired';

export interface EvictionDecision { taskId: string; decision: Decision; evidence: Record<string, unknown> }

export const newTaskRecord = (): TaskRecord => ({ state: 'active', recent: [], lastRecheckVersion: null, lastRecheckReward: null, revivals: 0 });

/** Remember a train attempt's reward (keeps as many as the longest window needs). */
export function recordAttempt(t: TaskRecord, reward: number, p: Pick<EvictionPolicy, 'masteredK' | 'hopelessM'>): void {
  t.recent.push(reward);
  const keep = Math.max(p.masteredK, p.hopelessM);
  if (t.recent.length > keep) t.recent.splice(0, t.recent.length - keep);
}

/** Active tasks to retire now. At least one task always stays active. */
export function retireDecisions(tasks: Record<string, TaskRecord>, p: EvictionPolicy): EvictionDecision[] {
  const out: EvictionDecision[] = [];
  let active = Object.values(tasks).filter((t) => t.state === 'active').length;
  for (const [taskId, t] of Object.entries(tasks)) {
    if (t.state !== 'active' || active <= 1) continue;
    const lastK = t.recent.slice(-p.masteredK);
    const lastM = t.recent.slice(-p.hopelessM);
    if (lastK.length >= p.masteredK && lastK.every((r) => r >= 1)) {
      out.push({ taskId, decision: 'retire_mastered', evidence: { lastRewards: lastK } });
      active--;
    } else if (lastM.length >= p.hopelessM && lastM.every((r) => r <= 0)) {
      out.push({ taskId, decision: 'retire_hopeless', evidence: { lastRewards: lastM } });
      active--;
    }
  }
  return out;
}

export const recheckDue = (version: number, lastRecheckVersion: number | null, retiredAt: number, p: EvictionPolicy): boolean =>
  p.recheck !== false && version - (lastRecheckVersion ?? retiredAt) >= p.recheckEvery;

/** After re-scoring a retired task with frozen current weights. */
export function recheckDecision(taskId: string, t: TaskRecord, rewards: number[], version: number, p: EvictionPolicy): EvictionDecision {
  const mean = rewards.reduce((a, r) => a + r, 0) / Math.max(rewards.length, 1);
  const regressed = t.state === 'retired_mastered' ? mean < p.reviveBelow : mean > 0; // a hopeless task that now succeeds can teach again
  return { taskId, decision: regressed ? 'revive' : 'recheck_keep_retired', evidence: { rewards, mean, version, was: t.state, reviveBelow: p.reviveBelow } };
}

/** Apply a decision to the record. */
export function applyDecision(t: TaskRecord, d: EvictionDecision, version: number): void {
  if (d.decision === 'retire_mastered') t.state = 'retired_mastered';
  if (d.decision === 'retire_hopeless') t.state = 'retired_hopeless';
  if (d.decision === 'revive' || d.decision === 'recheck_keep_retired') {
    t.lastRecheckVersion = version;
    t.lastRecheckReward = Number(d.evidence.mean);
  }
  if (d.decision === 'revive') {
    t.state = 'active';
    t.recent = [];
    t.revivals++;
  }
}

export function poolCounts(tasks: Record<string, TaskRecord>): { active: number; retiredMastered: number; retiredHopeless: number; revived: number } {
  const v = Object.values(tasks);
  return {
    active: v.filter((t) => t.state === 'active').length,
    retiredMastered: v.filter((t) => t.state === 'retired_mastered').length,
    retiredHopeless: v.filter((t) => t.state === 'retired_hopeless').length,
    revived: v.filter((t) => t.revivals > 0).length,
  };
}
