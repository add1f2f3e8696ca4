import type { RunConfig } from './config.js';
import { groupAdvantages } from './advantages.js';
import { applyDecision, newTaskRecord, poolCounts, recordAttempt, type EvictionDecision, type TaskRecord } from './eviction.js';
import { staleness } from './staleness.js';
import type { Gate } from './contracts.js';

/** The training run's bookkeeping as a pure state machine (no Temporal, no I/O). The
 *  trainingRun workflow owns the handlers, the waiting and the effects; every decision about
 *  what to start, what a finished rollout changes, what is stale, which groups make a batch,
 *  what a landed update or eviction changes, and when to continue-as-new, is made here.
 *
 *  Accounting: every rollout started ends in exactly one of — still in flight, untrainable
 *  (sandbox/engine/workflow failure or no tokens), dropped with its group (fewer than two
 *  trainable attempts: no relative signal), waiting in a ready group, discarded as stale
 *  (counted), or trained in exactly one batch. */

export type LoopRunState = 'running' | 'paused' | 'stopping' | 'stopped' | 'completed' | 'failed';

export interface LoopStatus {
  runId: string;
  name: string;
  state: LoopRunState;
  policyVersion: number;
  updatesDone: number;
  updatesTarget: number;
  rolloutsFinished: number;
  rolloutsInFlight: number;
  discardedStale: number;
  lastMeanReward: number | null;
  pool: { active: number; retiredMastered: number; retiredHopeless: number; revived: number };
  continuedAsNew: number;
  /** Why the run was stopped (set by a stop). */
  stopReason?: string;
  /** Frozen-weight evaluations so far. */
  evaluations?: { label: 'start' | 'end' | 'periodic' | 'retired'; version: number; k: number; tasks: number; pass1: number | null; passK: number | null; pool: number }[];
}

/** A finished rollout as the loop sees it. */
export interface Finished {
  rolloutId: string;
  taskId: string;
  groupId: string;
  reward: number;
  gate: Gate;
  versionStart: number | null;
}

/** What survives continue-as-new (which happens only when nothing is in flight). */
export interface LoopState<R extends Finished = Finished> {
  status: LoopStatus;
  tasks: Record<string, TaskRecord>;
  retiredAt: Record<string, number>;
  /** The version at which each task was first retired as mastered, kept when it is revived. */
  masteredAt: Record<string, number>;
  order: string[];
  cursor: number;
  groupSeq: number;
  /** Finished groups waiting for a batch: groupId → trainable results. */
  ready: Record<string, R[]>;
  readyOrder: string[];
}

/** What lives only between continue-as-news. */
export interface InFlight<R extends Finished = Finished> {
  groups: Record<string, { taskId: string; pending: number; results: R[] }>;
  /** The batch of the weight update in progress (null: none). */
  updating: { version: number; batch: R[] } | null;
  evicting: boolean;
  discardedSinceUpdate: number;
  draining: boolean;
}

export type LoopConfig = Pick<RunConfig, 'seed'> & {
  rollout: Pick<RunConfig['rollout'], 'groupSize' | 'maxInFlight'>;
  training: Pick<RunConfig['training'], 'updates' | 'groupsPerUpdate' | 'maxOffPolicySteps'>;
  trainer: Pick<RunConfig['trainer'], 'advantage' | 'negativeScale'>;
  eviction: Pick<RunConfig['eviction'], 'enabled' | 'masteredK' | 'hopelessM'>;
};

export function newLoopState<R extends Finished>(runId: string, name: string, updatesTarget: number): LoopState<R> {
  return {
    status: {
      runId, name, state: 'running', policyVersion: 0, updatesDone: 0, updatesTarget,
      rolloutsFinished: 0, rolloutsInFlight: 0, discardedStale: 0, lastMeanReward: null,
      pool: { active: 0, retiredMastered: 0, retiredHopeless: 0, revived: 0 }, continuedAsNew: 0,
    },
    tasks: {}, retiredAt: {}, masteredAt: {}, order: [], cursor: 0, groupSeq: 0, ready: {}, readyOrder: [],
  };
}

export const newInFlight = <R extends Finished>(): InFlight<R> => ({ groups: {}, updating: null, evicting: false, discardedSinceUpdate: 0, draining: false });

/** The pool the run trains on (a fresh run, before any group starts). */
export function setPool(s: LoopState, taskIds: string[]): void {
  s.order = [...taskIds];
  for (const id of taskIds) s.tasks[id] = newTaskRecord();
  s.status.pool = poolCounts(s.tasks);
}

/** The mean reward of a set of rollouts (null for none): the one definition the run's status,
 *  its policy_versions rows and its report share. */
export function meanReward(rollouts: readonly { reward: number }[]): number | null {
  return rollouts.length ? rollouts.reduce((a, r) => a + r.reward, 0) / rollouts.length : null;
}

/** A finished rollout teaches only when it ran to a decision on tokens of a known version. */
export const isTrainable = (r: Finished): boolean =>
  r.gate !== 'sandbox_error' && r.gate !== 'engine_error' && r.gate !== 'workflow_failed' && r.versionStart !== null;

export interface PlannedGroup { groupId: string; taskId: string; rollouts: { rolloutId: string; attempt: number; seed: number }[] }

/** What makes a config unable to train (null: nothing): groups start whole, so a window of
 *  fewer rollouts than one group would never start any. (A frozen-weight evaluation uses the
 *  same window for attempts, not groups: the rule is the training run's, checked as it starts.) */
export function trainingWindowProblem(cfg: Pick<LoopConfig, 'rollout'>): { path: string; message: string } | null {
  const { groupSize, maxInFlight } = cfg.rollout;
  return maxInFlight < groupSize
    ? { path: 'rollout.maxInFlight', message: `${maxInFlight} rollouts in flight cannot hold one group of rollout.groupSize ${groupSize}: groups start whole, so none would ever start; raise it to at least ${groupSize}` }
    : null;
}

/** Round-robin over active tasks from the cursor (null when none is active). */
function nextTask(s: LoopState): string | null {
  for (let i = 0; i < s.order.length; i++) {
    const id = s.order[s.cursor++ % s.order.length];
    if (s.tasks[id].state === 'active') return id;
  }
  return null;
}

/** Groups to start now: whole groups of G while the in-flight window has room and more
 *  updates are still wanted; none while draining or not running. Counts them in flight. */
export function planGroups(s: LoopState, f: InFlight, cfg: LoopConfig): PlannedGroup[] {
  const G = cfg.rollout.groupSize;
  const out: PlannedGroup[] = [];
  if (f.draining || s.status.state !== 'running') return out;
  while (s.status.rolloutsInFlight + G <= cfg.rollout.maxInFlight && s.status.updatesDone + (f.updating ? 1 : 0) < cfg.training.updates) {
    const taskId = nextTask(s);
    if (taskId === null) break;
    const groupId = `${s.status.runId}-g${s.groupSeq++}`;
    f.groups[groupId] = { taskId, pending: G, results: [] };
    s.status.rolloutsInFlight += G;
    out.push({
      groupId,
      taskId,
      rollouts: Array.from({ length: G }, (_, attempt) => ({ rolloutId: `${groupId}-${attempt}`, attempt, seed: cfg.seed * 1_000_003 + s.groupSeq * 64 + attempt })),
    });
  }
  return out;
}

/** A rollout of a planned group finished (or its workflow failed). */
export function rolloutFinished<R extends Finished>(s: LoopState<R>, f: InFlight<R>, cfg: LoopConfig, r: R): void {
  const g = f.groups[r.groupId];
  if (!g) throw new Error(`rollout ${r.rolloutId} finished for group ${r.groupId}, which is not in flight`);
  s.status.rolloutsInFlight--;
  s.status.rolloutsFinished++;
  g.pending--;
  if (isTrainable(r)) {
    g.results.push(r);
    recordAttempt(s.tasks[r.taskId], r.reward, cfg.eviction);
  }
  if (g.pending === 0) {
    delete f.groups[r.groupId];
    if (g.results.length >= 2) {
      s.ready[r.groupId] = g.results;
      s.readyOrder.push(r.groupId);
    }
  }
}

/** Drop stale members of waiting groups; a group left with fewer than two goes whole.
 *  Returns rolloutId → staleness of every discarded rollout (counted in the status). */
export function discardStale(s: LoopState, f: InFlight, cfg: LoopConfig): Record<string, number> {
  const bound = cfg.training.maxOffPolicySteps;
  const stale: Record<string, number> = {};
  for (const gid of [...s.readyOrder]) {
    const kept = s.ready[gid].filter((r) => {
      const st = staleness(s.status.policyVersion, r.versionStart);
      if (st > bound) stale[r.rolloutId] = st;
      return st <= bound;
    });
    if (kept.length < 2) {
      kept.forEach((r) => { stale[r.rolloutId] = staleness(s.status.policyVersion, r.versionStart); });
      delete s.ready[gid];
      s.readyOrder.splice(s.readyOrder.indexOf(gid), 1);
    } else s.ready[gid] = kept;
  }
  const n = Object.keys(stale).length;
  f.discardedSinceUpdate += n;
  s.status.discardedStale += n;
  return stale;
}

export interface BatchPlan<R extends Finished = Finished> { version: number; batch: R[]; advantages: Record<string, number> }

/** The next weight update's batch: the oldest groupsPerUpdate ready groups, with their
 *  advantages (computed here and nowhere else), when no update is in progress and more are
 *  wanted. Marks the update in progress. */
export function chooseBatch<R extends Finished>(s: LoopState<R>, f: InFlight<R>, cfg: LoopConfig): BatchPlan<R> | null {
  if (f.updating || s.status.updatesDone >= cfg.training.updates || s.readyOrder.length < cfg.training.groupsPerUpdate) return null;
  const gids = s.readyOrder.splice(0, cfg.training.groupsPerUpdate);
  const batch = gids.flatMap((g) => s.ready[g]);
  gids.forEach((g) => delete s.ready[g]);
  const version = s.status.policyVersion + 1;
  f.updating = { version, batch };
  const adv = groupAdvantages(batch, cfg.trainer.advantage, { negativeScale: cfg.trainer.negativeScale });
  return { version, batch, advantages: Object.fromEntries(adv) };
}

export interface LandedUpdate<R extends Finished = Finished> {
  /** The rollouts the update trained on (the batch members it claimed). */
  trained: R[];
  /** rolloutId → versions between its first token and the weights it was trained from. */
  stalenessAtTrain: Record<string, number>;
  meanReward: number | null;
  /** Rollouts discarded as stale since the previous update. */
  discardedStale: number;
  /** Start an eviction pass at the new version. */
  startEviction: boolean;
}

/** A weight update landed at `version`, having claimed `claimed` of its batch. */
export function updateLanded<R extends Finished>(s: LoopState<R>, f: InFlight<R>, cfg: LoopConfig, u: { version: number; claimed: readonly string[] }): LandedUpdate<R> {
  if (!f.updating) throw new Error(`update v${u.version} landed, but none is in progress`);
  const claimed = new Set(u.claimed);
  const trained = f.updating.batch.filter((r) => claimed.has(r.rolloutId));
  const stalenessAtTrain = Object.fromEntries(trained.map((r) => [r.rolloutId, staleness(s.status.policyVersion, r.versionStart)]));
  f.updating = null;
  s.status.policyVersion = u.version;
  s.status.updatesDone++;
  s.status.lastMeanReward = meanReward(trained);
  s.status.pool = poolCounts(s.tasks);
  const discarded = f.discardedSinceUpdate;
  f.discardedSinceUpdate = 0;
  const startEviction = cfg.eviction.enabled && !f.evicting;
  if (startEviction) f.evicting = true;
  return { trained, stalenessAtTrain, meanReward: s.status.lastMeanReward, discardedStale: discarded, startEviction };
}

/** An eviction pass ended with these decisions. */
export function evictionLanded(s: LoopState, f: InFlight, decisions: readonly EvictionDecision[]): void {
  f.evicting = false;
  for (const d of decisions) {
    if (d.decision === 'retire_mastered' || d.decision === 'retire_hopeless') s.retiredAt[d.taskId] = s.status.policyVersion;
    if (d.decision === 'retire_mastered') s.masteredAt[d.taskId] ??= s.status.policyVersion;
    applyDecision(s.tasks[d.taskId], d, Number(d.evidence.version ?? s.status.policyVersion));
  }
  s.status.pool = poolCounts(s.tasks);
}

/** The periodic evaluation (config evaluation.every) is due once an update lands at a version
 *  that is a multiple of `every` (never before the first update, never when 0). */
export function periodicEvaluationDue(version: number, every: number): boolean {
  return every > 0 && version > 0 && version % every === 0;
}

/** Every task eviction has retired as mastered so far, in pool order, whatever its state now:
 *  the forgetting check re-scores them with frozen weights. A revived one stays in (its
 *  recheck regressed: it is the forgotten kind), so the cohort of update U is scored again at
 *  every later evaluation. */
export function masteredTasks(s: LoopState): string[] {
  return s.order.filter((id) => s.masteredAt[id] !== undefined);
}

/** Start draining once Temporal suggests continue-as-new (the server's own measure of the
 *  history's events and bytes): no new groups until everything in flight ends. */
export function noteContinueAsNewSuggested(f: InFlight, suggested: boolean): void {
  f.draining ||= suggested;
}

/** Nothing in flight: no rollouts, no update, no eviction. */
export const idle = (s: LoopState, f: InFlight): boolean => s.status.rolloutsInFlight === 0 && !f.updating && !f.evicting;

/** Continue-as-new now: draining and idle. */
export const readyToContinueAsNew = (s: LoopState, f: InFlight): boolean => f.draining && idle(s, f);

/** The loop goes on while the run is not stopping and more updates are wanted. */
export const loopGoesOn = (s: LoopState, cfg: LoopConfig): boolean => s.status.state !== 'stopping' && s.status.updatesDone < cfg.training.updates;

/** The state handed to the next run of the workflow. */
export function carried<R extends Finished>(s: LoopState<R>): LoopState<R> {
  return { ...s, status: { ...s.status, continuedAsNew: s.status.continuedAsNew + 1 } };
}

/** Run-state transitions asked for by pause / resume / stop. `accepted: false` with a reason
 *  when the run cannot make it (an update validator rejects it); `changed: false` when it is
 *  already there (pausing a paused run is a no-op). */
export type Transition = { accepted: true; changed: boolean } | { accepted: false; reason: string };

export type Ask = 'pause' | 'resume' | 'stop';

export function transition(state: LoopRunState, ask: Ask): Transition {
  const over = state === 'stopped' || state === 'completed' || state === 'failed';
  if (over) return { accepted: false, reason: `the run has ${state}; start a new run instead` };
  if (state === 'stopping') return ask === 'stop' ? { accepted: true, changed: false } : { accepted: false, reason: `the run is stopping; it cannot ${ask}` };
  if (ask === 'pause') return { accepted: true, changed: state === 'running' };
  if (ask === 'resume') return { accepted: true, changed: state === 'paused' };
  return { accepted: true, changed: true };
}

/** The validator of a pause / resume / stop update: throws why the run cannot make it. */
export function validateAsk(state: LoopRunState, what: Ask, reason?: unknown): void {
  if (what === 'stop' && (typeof reason !== 'string' || reason.length > 1000)) throw new Error('the stop reason must be a string of at most 1000 characters');
  const t = transition(state, what);
  if (!t.accepted) throw new Error(t.reason);
}

/** A pause / resume / stop asked for from outside, applied to the run's status (a no-op when
 *  the run is already there). Returns the status the caller sees. */
export function ask(s: LoopState, what: Ask, reason = ''): LoopStatus {
  const t = transition(s.status.state, what);
  if (t.accepted && t.changed) {
    s.status.state = what === 'pause' ? 'paused' : what === 'resume' ? 'running' : 'stopping';
    if (what === 'stop') s.status.stopReason = reason || 'stopped by user';
  }
  return s.status;
}
