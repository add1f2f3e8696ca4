import { describe, expect, it } from 'vitest';
import {
  carried, chooseBatch, discardStale, evictionLanded, idle, loopGoesOn, masteredTasks, meanReward, newInFlight, newLoopState, noteContinueAsNewSuggested,
  periodicEvaluationDue, planGroups, readyToContinueAsNew, rolloutFinished, setPool, trainingWindowProblem, transition, updateLanded,
  type Finished, type InFlight, type LoopConfig, type LoopState,
} from '../../core/runLoop.js';
import { groupAdvantages } from '../../core/advantages.js';
import { retireDecisions, type EvictionDecision } from '../../core/eviction.js';
import { staleness } from '../../core/staleness.js';
import type { Gate } from '../../core/contracts.js';
import { rng } from '../helpers/rng.js';

/** The training run's state machine (core/runLoop.ts), driven without Temporal by random
 *  event orders: rollouts finish in any order with any outcome, updates and evictions land
 *  whenever, and after every event the run's accounting must hold — every rollout started is
 *  in exactly one place, none is trained twice, nothing stale is trained, the window is
 *  respected, and the same events give the same state. */

function configFor(rand: () => number): LoopConfig {
  const G = 2 + Math.floor(rand() * 3);
  return {
    seed: Math.floor(rand() * 100),
    rollout: { groupSize: G, maxInFlight: G * (1 + Math.floor(rand() * 4)) + Math.floor(rand() * G) },
    training: { updates: 2 + Math.floor(rand() * 7), groupsPerUpdate: 1 + Math.floor(rand() * 3), maxOffPolicySteps: Math.floor(rand() * 3) },
    trainer: { advantage: (['group', 'group-std', 'reward'] as const)[Math.floor(rand() * 3)], negativeScale: rand() < 0.5 ? 1 : 0 },
    eviction: { enabled: rand() < 0.5, masteredK: 2 + Math.floor(rand() * 3), hopelessM: 2 + Math.floor(rand() * 4) },
  };
}

interface Trace { events: string[]; state: LoopState; f: InFlight; trained: string[][]; stale: string[] }

/** Drive one run to its end (or 3000 events) in a random order; check invariants throughout. */
function drive(seed: number): Trace {
  const rand = rng(seed);
  const cfg = configFor(rand);
  const s = newLoopState('run', 'test', cfg.training.updates);
  const f = newInFlight();
  const taskIds = Array.from({ length: 1 + Math.floor(rand() * 5) }, (_, i) => `t${i}`);
  setPool(s, taskIds);
  const skill: Record<string, number> = Object.fromEntries(taskIds.map((t) => [t, rand()]));

  const pending = new Map<string, { taskId: string; groupId: string; versionStart: number | null }>();
  const started = new Set<string>();
  const untrainable = new Set<string>();
  const dropped = new Set<string>();
  const staleIds = new Set<string>();
  const trainedOnce = new Set<string>();
  const trained: string[][] = [];
  const members = new Map<string, { ids: string[]; trainable: string[]; left: number }>();
  const events: string[] = [];
  let evictionDue = false;

  const check = (where: string) => {
    const inFlight = [...Object.values(f.groups)].reduce((a, g) => a + g.pending, 0);
    expect(s.status.rolloutsInFlight, where).toBe(inFlight);
    expect(inFlight, where).toBe(pending.size);
    expect(inFlight, where).toBeLessThanOrEqual(cfg.rollout.maxInFlight);
    expect(new Set(s.readyOrder).size, where).toBe(s.readyOrder.length);
    expect([...s.readyOrder].sort(), where).toEqual(Object.keys(s.ready).sort());
    const waiting = Object.values(s.ready).flat().map((r) => r.rolloutId);
    const inUpdate = f.updating ? f.updating.batch.map((r) => r.rolloutId) : [];
    const inGroups = Object.values(f.groups).flatMap((g) => g.results.map((r) => r.rolloutId));
    // every rollout started is in exactly one place
    const places = [...pending.keys(), ...untrainable, ...dropped, ...staleIds, ...trainedOnce, ...waiting, ...inUpdate, ...inGroups];
    expect(places.length, where).toBe(started.size);
    expect(new Set(places).size, where).toBe(started.size);
    expect(s.status.discardedStale, where).toBe(staleIds.size);
    expect(s.status.policyVersion, where).toBe(s.status.updatesDone);
    expect(s.status.updatesDone, where).toBeLessThanOrEqual(cfg.training.updates);
    const pool = s.status.pool;
    expect(pool.active + pool.retiredMastered + pool.retiredHopeless, where).toBe(taskIds.length);
  };

  const afterEvent = () => {
    for (const [id, st] of Object.entries(discardStale(s, f, cfg))) {
      expect(st).toBeGreaterThanOrEqual(0);
      staleIds.add(id);
    }
    const plan = chooseBatch(s, f, cfg);
    if (plan) {
      expect(plan.version).toBe(s.status.policyVersion + 1);
      expect(new Set(plan.batch.map((r) => r.groupId)).size).toBe(cfg.training.groupsPerUpdate);
      for (const r of plan.batch) expect(staleness(s.status.policyVersion, r.versionStart)).toBeLessThanOrEqual(cfg.training.maxOffPolicySteps);
      expect(plan.advantages).toEqual(Object.fromEntries(groupAdvantages(plan.batch, cfg.trainer.advantage, { negativeScale: cfg.trainer.negativeScale })));
      events.push(`batch v${plan.version} ${plan.batch.map((r) => r.rolloutId).join(',')}`);
    }
  };

  for (let step = 0; step < 3000 && loopGoesOn(s, cfg); step++) {
    for (const g of planGroups(s, f, cfg)) {
      members.set(g.groupId, { ids: g.rollouts.map((r) => r.rolloutId), trainable: [], left: g.rollouts.length });
      for (const r of g.rollouts) {
        started.add(r.rolloutId);
        // a rollout's first token comes from the version the engines hold now, or (rarely) none
        pending.set(r.rolloutId, { taskId: g.taskId, groupId: g.groupId, versionStart: rand() < 0.05 ? null : s.status.policyVersion });
      }
      events.push(`start ${g.groupId} ${g.taskId}`);
    }
    check(`after planning, step ${step}`);
    const choices: string[] = [];
    if (pending.size) choices.push('finish', 'finish', 'finish');
    if (f.updating) choices.push('update');
    if (evictionDue) choices.push('evict');
    if (!choices.length) break; // nothing can happen: the pool is exhausted
    const pick = choices[Math.floor(rand() * choices.length)];
    if (pick === 'finish') {
      const ids = [...pending.keys()];
      const id = ids[Math.floor(rand() * ids.length)];
      const p = pending.get(id)!;
      pending.delete(id);
      const roll = rand();
      const gate = roll < 0.06 ? 'sandbox_error' : roll < 0.09 ? 'workflow_failed' : roll < 0.2 ? 'format' : rand() < skill[p.taskId] ? 'passed' : 'tests_failed';
      const r: Finished = { rolloutId: id, taskId: p.taskId, groupId: p.groupId, reward: gate === 'passed' ? 1 : 0, gate, versionStart: gate === 'workflow_failed' ? null : p.versionStart };
      rolloutFinished(s, f, cfg, r);
      const m = members.get(p.groupId)!;
      m.left--;
      if (r.gate === 'sandbox_error' || r.gate === 'workflow_failed' || r.versionStart === null) untrainable.add(id);
      else m.trainable.push(id);
      if (m.left === 0 && m.trainable.length < 2) m.trainable.forEach((x) => dropped.add(x));
      events.push(`finish ${id} ${gate}`);
    } else if (pick === 'update') {
      const batch = f.updating!.batch;
      // the claim is exactly-once in Postgres: a member already claimed elsewhere is left out
      const claimed = batch.filter(() => rand() > 0.05).map((r) => r.rolloutId);
      for (const id of claimed) {
        expect(trainedOnce.has(id), `${id} trained twice`).toBe(false);
        trainedOnce.add(id);
      }
      batch.filter((r) => !claimed.includes(r.rolloutId)).forEach((r) => untrainable.add(r.rolloutId));
      const landed = updateLanded(s, f, cfg, { version: f.updating!.version, claimed });
      expect(landed.trained.map((r) => r.rolloutId)).toEqual(claimed);
      expect(landed.meanReward).toBe(meanReward(landed.trained));
      trained.push(claimed);
      if (landed.startEviction) evictionDue = true;
      events.push(`update v${s.status.policyVersion} ${claimed.length}`);
    } else {
      evictionDue = false;
      const decisions = retireDecisions(s.tasks, { masteredK: cfg.eviction.masteredK, hopelessM: cfg.eviction.hopelessM, recheckEvery: 5, reviveBelow: 0.75 });
      evictionLanded(s, f, decisions);
      expect(Object.values(s.tasks).some((t) => t.state === 'active')).toBe(true);
      events.push(`evict ${decisions.map((d) => `${d.taskId}:${d.decision}`).join(',')}`);
    }
    afterEvent();
    check(`after ${pick}, step ${step}`);
  }
  return { events, state: s, f, trained, stale: [...staleIds] };
}

describe('the training run state machine, over random event orders', () => {
  it('keeps every rollout accounted once, trains nothing twice and nothing stale, and respects the window', () => {
    let completed = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const t = drive(seed);
      if (t.state.status.updatesDone === t.state.status.updatesTarget) completed++;
    }
    // most random runs reach their update target (the rest ran out of trainable groups)
    expect(completed).toBeGreaterThan(200);
  });

  it('is deterministic: the same events give the same state', () => {
    for (const seed of [7, 42, 99]) expect(JSON.stringify(drive(seed))).toBe(JSON.stringify(drive(seed)));
    expect(JSON.stringify(drive(7).events)).not.toBe(JSON.stringify(drive(8).events));
  });
});

describe('the training run state machine, rule by rule', () => {
  const cfg: LoopConfig = {
    seed: 3,
    rollout: { groupSize: 2, maxInFlight: 2 },
    training: { updates: 2, groupsPerUpdate: 1, maxOffPolicySteps: 1 },
    trainer: { advantage: 'group', negativeScale: 0.5 },
    eviction: { enabled: true, masteredK: 2, hopelessM: 2 },
  };
  const fin = (rolloutId: string, groupId: string, reward: number, versionStart: number | null = 0, gate: Gate = reward ? 'passed' : 'tests_failed'): Finished => ({ rolloutId, taskId: 'a', groupId, reward, gate, versionStart });

  it('plans whole groups within the window, round-robin over active tasks, with seeds by group and attempt', () => {
    const s = newLoopState('r', 'n', 2);
    const f = newInFlight();
    setPool(s, ['a', 'b', 'c']);
    const wide = { ...cfg, rollout: { groupSize: 2, maxInFlight: 5 } };
    const groups = planGroups(s, f, wide);
    expect(groups.map((g) => [g.groupId, g.taskId])).toEqual([['r-g0', 'a'], ['r-g1', 'b']]);
    expect(groups[1].rollouts).toEqual([{ rolloutId: 'r-g1-0', attempt: 0, seed: 3 * 1_000_003 + 2 * 64 }, { rolloutId: 'r-g1-1', attempt: 1, seed: 3 * 1_000_003 + 2 * 64 + 1 }]);
    expect(planGroups(s, f, wide)).toEqual([]); // the window is full (a third group does not fit in 5)
    s.tasks.c.state = 'retired_mastered';
    rolloutFinished(s, f, wide, fin('r-g0-0', 'r-g0', 1));
    rolloutFinished(s, f, wide, fin('r-g0-1', 'r-g0', 0));
    expect(planGroups(s, f, wide).map((g) => g.taskId)).toEqual(['a']); // c is retired: skipped
  });

  it('a group with fewer than two trainable attempts is dropped; a full one waits; advantages scale negatives', () => {
    const s = newLoopState('r', 'n', 2);
    const f = newInFlight();
    setPool(s, ['a']);
    planGroups(s, f, cfg);
    rolloutFinished(s, f, cfg, fin('r-g0-0', 'r-g0', 1));
    rolloutFinished(s, f, cfg, fin('r-g0-1', 'r-g0', 0, null, 'sandbox_error'));
    expect(s.readyOrder).toEqual([]);
    expect(() => rolloutFinished(s, f, cfg, fin('x', 'r-g9', 1))).toThrow(/not in flight/);
    planGroups(s, f, cfg);
    rolloutFinished(s, f, cfg, fin('r-g1-0', 'r-g1', 1));
    rolloutFinished(s, f, cfg, fin('r-g1-1', 'r-g1', 0));
    expect(s.readyOrder).toEqual(['r-g1']);
    const plan = chooseBatch(s, f, cfg)!;
    expect(plan.advantages).toEqual({ 'r-g1-0': 0.5, 'r-g1-1': -0.25 });
    expect(chooseBatch(s, f, cfg)).toBeNull(); // one update at a time
  });

  it('discards stale members and counts them; a landed update advances the version and asks for eviction once', () => {
    const c5 = { ...cfg, training: { ...cfg.training, updates: 5 } };
    const s = newLoopState('r', 'n', 5);
    const f = newInFlight();
    setPool(s, ['a']);
    s.status.policyVersion = 2;
    s.status.updatesDone = 2;
    planGroups(s, f, c5);
    rolloutFinished(s, f, c5, fin('r-g0-0', 'r-g0', 1, 0)); // 2 versions old: stale (bound 1)
    rolloutFinished(s, f, c5, fin('r-g0-1', 'r-g0', 0, 2));
    expect(discardStale(s, f, c5)).toEqual({ 'r-g0-0': 2, 'r-g0-1': 0 }); // one left: the group goes whole
    expect(s.status.discardedStale).toBe(2);
    planGroups(s, f, c5);
    const [g] = Object.keys(f.groups);
    rolloutFinished(s, f, c5, fin(`${g}-0`, g, 1, 1));
    rolloutFinished(s, f, c5, fin(`${g}-1`, g, 0, 2));
    expect(discardStale(s, f, c5)).toEqual({});
    const plan = chooseBatch(s, f, c5)!;
    const landed = updateLanded(s, f, c5, { version: plan.version, claimed: [`${g}-0`, `${g}-1`] });
    expect(landed).toMatchObject({ meanReward: 0.5, discardedStale: 2, startEviction: true, stalenessAtTrain: { [`${g}-0`]: 1, [`${g}-1`]: 0 } });
    expect(s.status).toMatchObject({ policyVersion: 3, updatesDone: 3, lastMeanReward: 0.5 });
    expect(f.evicting).toBe(true);
    expect(() => updateLanded(s, f, c5, { version: 4, claimed: [] })).toThrow(/none is in progress/);
    evictionLanded(s, f, [{ taskId: 'a', decision: 'retire_mastered', evidence: {} }]);
    expect(s.retiredAt).toEqual({ a: 3 });
    expect(s.status.pool.retiredMastered).toBe(1);
  });

  it('drains before continue-as-new: no new groups once Temporal suggests it, and carries the state when idle', () => {
    const s = newLoopState('r', 'n', 2);
    const f = newInFlight();
    setPool(s, ['a']);
    planGroups(s, f, cfg);
    noteContinueAsNewSuggested(f, true);
    expect(planGroups(s, f, cfg)).toEqual([]);
    expect(readyToContinueAsNew(s, f)).toBe(false);
    rolloutFinished(s, f, cfg, fin('r-g0-0', 'r-g0', 1));
    rolloutFinished(s, f, cfg, fin('r-g0-1', 'r-g0', 1));
    expect(idle(s, f)).toBe(true);
    expect(readyToContinueAsNew(s, f)).toBe(true);
    const next = carried(s);
    expect(next.status.continuedAsNew).toBe(1);
    expect(next.ready).toEqual(s.ready); // waiting groups survive continue-as-new
  });

  it('a window smaller than one group can never start a group: named, with the fix', () => {
    expect(trainingWindowProblem({ rollout: { groupSize: 4, maxInFlight: 4 } })).toBeNull();
    expect(trainingWindowProblem({ rollout: { groupSize: 4, maxInFlight: 2 } })).toMatchObject({ path: 'rollout.maxInFlight', message: expect.stringMatching(/at least 4/) });
    // the rule is real: with that window planGroups starts nothing
    const s = newLoopState('r', 'n', 2);
    setPool(s, ['a']);
    expect(planGroups(s, newInFlight(), { ...cfg, rollout: { groupSize: 4, maxInFlight: 2 } })).toEqual([]);
  });

  it('pause / resume / stop: what a validator accepts, and what is a no-op', () => {
    expect(transition('running', 'pause')).toEqual({ accepted: true, changed: true });
    expect(transition('paused', 'pause')).toEqual({ accepted: true, changed: false });
    expect(transition('paused', 'resume')).toEqual({ accepted: true, changed: true });
    expect(transition('running', 'resume')).toEqual({ accepted: true, changed: false });
    expect(transition('stopping', 'stop')).toEqual({ accepted: true, changed: false });
    expect(transition('stopping', 'resume')).toMatchObject({ accepted: false, reason: expect.stringMatching(/stopping/) });
    expect(transition('completed', 'pause')).toMatchObject({ accepted: false, reason: expect.stringMatching(/new run/) });
  });

  it('one mean reward', () => {
    expect(meanReward([])).toBeNull();
    expect(meanReward([{ reward: 1 }, { reward: 0 }, { reward: 0.5 }])).toBe(0.5);
  });
});

describe('periodic evaluations (evaluation.every)', () => {
  it('are due when an update lands at a multiple of every, never at version 0 or with every 0', () => {
    expect([1, 2, 3, 4, 5, 6].filter((v) => periodicEvaluationDue(v, 3))).toEqual([3, 6]);
    expect([0, 1, 2].filter((v) => periodicEvaluationDue(v, 1))).toEqual([1, 2]);
    expect([1, 2, 3].some((v) => periodicEvaluationDue(v, 0))).toBe(false);
  });

  it('re-score every task ever retired as mastered, in pool order: the revived ones too, never the hopeless', () => {
    const s = newLoopState('r', 'n', 2);
    const f = newInFlight();
    setPool(s, ['a', 'b', 'c', 'd']);
    expect(masteredTasks(s)).toEqual([]);
    const d = (taskId: string, decision: EvictionDecision['decision']): EvictionDecision => ({ taskId, decision, evidence: {} });
    s.status.policyVersion = 3;
    evictionLanded(s, f, [d('d', 'retire_mastered'), d('b', 'retire_mastered'), d('c', 'retire_hopeless')]);
    expect(masteredTasks(s)).toEqual(['b', 'd']);
    s.status.policyVersion = 6;
    evictionLanded(s, f, [d('d', 'revive')]);
    expect(s.tasks.d.state).toBe('active');
    expect(masteredTasks(s)).toEqual(['b', 'd']); // d was forgotten: it stays in the cohort
    expect(s.masteredAt).toEqual({ b: 3, d: 3 });
  });
});
