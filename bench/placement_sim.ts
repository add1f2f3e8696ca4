/** Placement at the published scale, simulated: floe's real router (core/router.ts pickEngine,
 *  fed the load view activities/router.ts builds) and floe's real training loop (core/runLoop.ts:
 *  planGroups, rolloutFinished, discardStale, chooseBatch, updateLanded — the staleness bound and
 *  the batch rule exactly as the trainingRun workflow applies them) drive a model of six
 *  inference engines serving several hundred long-horizon rollouts. No services, pure TS:
 *
 *    npx tsx bench/placement_sim.ts [--quick] [--out bench/results/placement_sim.json]
 *
 *  The engine model (one per engine, stepped every TICK_S of simulated time):
 *  - continuous batching: a decode step of b sequences holding C context tokens takes
 *    t0 + t1·b + t2·C seconds and yields one token per sequence, so batching helps until the
 *    per-sequence terms dominate; at most `maxSeqs` sequences run, the rest wait (FIFO);
 *  - a KV pool of `kvTokens`: a request is admitted only when its whole context fits beside the
 *    running ones; a running request that outgrows the pool is preempted and recomputed (vLLM's
 *    recompute preemption), the latest admitted first;
 *  - prefix cache: a finished turn's conversation stays in the pool's free part (LRU) and the
 *    rollout's next turn on that engine prefills only the tokens after it; elsewhere, or once
 *    evicted, the whole conversation is prefilled at `prefillTokS` (engine time that no decode
 *    step gets);
 *  - a weight update (train `trainS` beside generation, then every engine paused `loadS` to
 *    load) empties every cache (recipe.cacheRebuild) and running requests are recomputed.
 *  Rollouts: 10–100 turns, 200–4,000 tokens a turn (log-uniform; `genShare` of them generated,
 *  the rest the observation after it), a tool call between turns, a context cap; groups of 8, 128 rollouts an update,
 *  floe's default staleness bound (training.maxOffPolicySteps). The load the router sees is
 *  what LiveRouter gives it: each engine's running/waiting as scraped (refreshed every 250 ms,
 *  activities/router.ts LOAD_TTL_MS) plus floe's own in-flight count, live. */
import fs from 'node:fs';
import path from 'node:path';
import { newRouterState, pickEngine, releaseRollout, type EngineLoad, type RouterPolicy } from '../core/router.js';
import { chooseBatch, discardStale, newInFlight, newLoopState, planGroups, rolloutFinished, setPool, updateLanded, type Finished, type LoopConfig } from '../core/runLoop.js';
import { rng } from '../test/helpers/rng.js';
import { parseArgs, flag } from '../cli/args.js';

const TICK_S = 0.25; // also the router's load-scrape interval (activities/router.ts LOAD_TTL_MS)

export interface SimParams {
  engines: number;
  inFlight: number;
  groupSize: number;
  groupsPerUpdate: number;
  maxOffPolicySteps: number;
  updates: number;
  /** updates not measured (the start-up burst: every rollout starts at once) */
  warmupUpdates: number;
  /** a task's turn count (uniform); each attempt at it takes that ± `attemptSpread` (a share) */
  turns: [number, number];
  attemptSpread: number;
  /** tokens a turn adds to the conversation (the model's output and the tool's observation) */
  turnTokens: [number, number];
  /** the share of a turn's tokens the model generates (the rest is the observation) */
  genShare: number;
  promptTokens: number;
  contextCap: number;
  toolS: [number, number];
  gradeS: number;
  maxSeqs: number;
  kvTokens: number;
  prefillTokS: number;
  t0: number; t1: number; t2: number;
  trainS: number;
  loadS: number;
  cacheSlack?: number;
  seed: number;
}

export const PUBLISHED_SCALE: SimParams = {
  engines: 6, inFlight: 256, groupSize: 8, groupsPerUpdate: 16, maxOffPolicySteps: 2, updates: 10, warmupUpdates: 2,
  turns: [10, 100], attemptSpread: 0.25, turnTokens: [200, 4000], genShare: 0.35, promptTokens: 2000, contextCap: 131072,
  toolS: [1, 15], gradeS: 20,
  maxSeqs: 256, kvTokens: 3_000_000, prefillTokS: 40_000, t0: 0.010, t1: 0.00015, t2: 3e-9,
  trainS: 180, loadS: 30, seed: 1,
};

interface Rollout {
  id: string; groupId: string; taskId: string;
  turns: { gen: number; obs: number; toolS: number }[];
  turn: number; ctx: number; versionStart: number | null; nextAt: number; finishAt: number | null;
}
interface Req { r: Rollout; engine: number; prompt: number; gen: number; prefillLeft: number; generated: number; seq: number }
interface Engine { running: Req[]; waiting: Req[]; cache: Map<string, number>; cacheUsed: number; runningKv: number; version: number; scraped: { running: number; waiting: number }; floeInflight: number }

const logUniform = (u: () => number, [lo, hi]: [number, number]): number => Math.round(Math.exp(Math.log(lo) + u() * (Math.log(hi) - Math.log(lo))));
const uniformInt = (u: () => number, [lo, hi]: [number, number]): number => lo + Math.floor(u() * (hi - lo + 1));

export interface SimResult {
  policy: RouterPolicy; params: SimParams;
  updatesMeasured: number; minutesPerUpdate: number; discardedPerUpdate: number; discardedPerUpdateEach: number[];
  /** outstanding requests (running + waiting) per engine: time-averaged busiest and idlest engine, and the widest moment */
  requestsPerEngine: { meanMax: number; meanMin: number; peak: { max: number; othersMedian: number; atMinute: number } };
  cacheHitTokenShare: number; preemptions: number; genTokensPerS: number; simulatedMinutes: number;
}

export function simulate(policy: RouterPolicy, p: SimParams): SimResult {
  const u = rng(p.seed);
  const cfg: LoopConfig = {
    seed: p.seed, rollout: { groupSize: p.groupSize, maxInFlight: p.inFlight },
    training: { updates: p.updates, groupsPerUpdate: p.groupsPerUpdate, maxOffPolicySteps: p.maxOffPolicySteps },
    trainer: { advantage: 'group', negativeScale: 1 }, eviction: { enabled: false, masteredK: 4, hopelessM: 4 },
  };
  const s = newLoopState<Finished>('sim', 'placement', p.updates);
  const f = newInFlight<Finished>();
  setPool(s, Array.from({ length: 500 }, (_, i) => `task-${i}`));
  const router = newRouterState();
  const engines: Engine[] = Array.from({ length: p.engines }, () => ({ running: [], waiting: [], cache: new Map(), cacheUsed: 0, runningKv: 0, version: 0, scraped: { running: 0, waiting: 0 }, floeInflight: 0 }));
  const active: Rollout[] = [];
  let seq = 0; let t = 0; let preemptions = 0; let prefillHit = 0; let prefillAll = 0; let genTotal = 0;
  let training: { endsAt: number; loadEndsAt: number; version: number; claimed: string[] } | null = null;
  const landings: { at: number; discarded: number }[] = [];
  let sumMax = 0; let sumMin = 0; let samples = 0;
  let peak = { max: -1, othersMedian: 0, atMinute: 0 };

  const evict = (e: Engine, need: number): void => {
    // LRU: Map keeps insertion order and a hit re-inserts
    for (const [id, n] of e.cache) {
      if (p.kvTokens - e.runningKv - e.cacheUsed >= need) return;
      e.cache.delete(id); e.cacheUsed -= n;
    }
  };
  const sendTurn = (r: Rollout): void => {
    const loads: EngineLoad[] = engines.map((e, i) => ({ id: String(i), healthy: true, running: e.scraped.running, waiting: e.scraped.waiting, inflight: e.floeInflight }));
    const id = pickEngine(policy, loads, { rolloutId: r.id, affinityKey: r.groupId }, router, p.cacheSlack);
    if (id === null) throw new Error('no engine: the simulation keeps every engine healthy');
    const turn = r.turns[r.turn];
    const req: Req = { r, engine: Number(id), prompt: r.ctx, gen: turn.gen, prefillLeft: 0, generated: 0, seq: 0 };
    engines[req.engine].waiting.push(req);
    engines[req.engine].floeInflight++;
  };
  const loadPaused = (): boolean => training !== null && t >= training.endsAt && t < training.loadEndsAt;

  const stepEngine = (e: Engine): Req[] => {
    if (loadPaused()) return [];
    // admission: FIFO, while a sequence slot and the KV pool allow
    while (e.waiting.length && e.running.length < p.maxSeqs) {
      const req = e.waiting[0];
      const cached = e.cache.get(req.r.id) ?? 0;
      if (cached) { e.cache.delete(req.r.id); e.cacheUsed -= cached; }
      evict(e, req.prompt);
      if (p.kvTokens - e.runningKv - e.cacheUsed < req.prompt) {
        if (cached) { e.cache.set(req.r.id, cached); e.cacheUsed += cached; }
        break;
      }
      e.waiting.shift();
      const hit = Math.min(cached, req.prompt);
      req.prefillLeft = req.prompt - hit; req.seq = seq++;
      prefillHit += hit; prefillAll += req.prompt;
      e.running.push(req); e.runningKv += req.prompt;
    }
    let budget = TICK_S;
    for (const req of e.running) {
      if (budget <= 0) break;
      if (req.prefillLeft <= 0) continue;
      const n = Math.min(req.prefillLeft, budget * p.prefillTokS);
      req.prefillLeft -= n; budget -= n / p.prefillTokS;
    }
    const decoding = e.running.filter((q) => q.prefillLeft <= 0);
    if (decoding.length && budget > 0) {
      const ctx = decoding.reduce((a, q) => a + q.prompt + q.generated, 0);
      const steps = budget / (p.t0 + p.t1 * decoding.length + p.t2 * ctx);
      for (const q of decoding) {
        if (q.generated === 0 && q.r.versionStart === null) q.r.versionStart = e.version; // the first token's version
        const n = Math.min(steps, q.gen - q.generated);
        q.generated += n; e.runningKv += n; genTotal += n;
      }
    }
    // the pool outgrown: cached prefixes go first, then the latest admitted request is recomputed
    evict(e, 0);
    while (e.runningKv > p.kvTokens && e.running.length > 1) {
      const victim = e.running.reduce((a, q) => (q.seq > a.seq ? q : a));
      e.running.splice(e.running.indexOf(victim), 1);
      e.runningKv -= victim.prompt + victim.generated;
      genTotal -= victim.generated; victim.generated = 0;
      e.waiting.unshift(victim); preemptions++;
    }
    const done = e.running.filter((q) => q.generated >= q.gen);
    for (const q of done) {
      e.running.splice(e.running.indexOf(q), 1);
      const ctx = q.prompt + q.gen;
      e.runningKv -= ctx;
      e.cache.set(q.r.id, ctx); e.cacheUsed += ctx;
      e.floeInflight--;
    }
    return done;
  };

  const startGroups = (): void => {
    for (const g of planGroups(s, f, cfg)) {
      const taskTurns = uniformInt(u, p.turns);
      for (const x of g.rollouts) {
        const nTurns = Math.min(p.turns[1], Math.max(p.turns[0], Math.round(taskTurns * (1 + p.attemptSpread * (2 * u() - 1)))));
        const turns = Array.from({ length: nTurns }, () => {
          const total = logUniform(u, p.turnTokens);
          const gen = Math.max(1, Math.round(total * p.genShare));
          return { gen, obs: total - gen, toolS: Math.exp(Math.log(p.toolS[0]) + u() * Math.log(p.toolS[1] / p.toolS[0])) };
        });
        const r: Rollout = { id: x.rolloutId, groupId: g.groupId, taskId: g.taskId, turns, turn: 0, ctx: p.promptTokens, versionStart: null, nextAt: t, finishAt: null };
        active.push(r); // its first turn is sent at the next tick
      }
    }
  };

  startGroups();
  const maxT = 48 * 3600;
  while (s.status.updatesDone < p.updates) {
    if (t > maxT) throw new Error(`no progress: ${s.status.updatesDone} of ${p.updates} updates after ${maxT / 3600} simulated hours; the engine parameters cannot carry this load`);
    for (const e of engines) e.scraped = { running: e.running.length, waiting: e.waiting.length };
    for (const r of active) {
      if (r.nextAt >= 0 && r.nextAt <= t && r.finishAt === null) { r.nextAt = -1; sendTurn(r); }
    }
    for (const e of engines) {
      for (const q of stepEngine(e)) {
        const r = q.r;
        r.ctx = q.prompt + q.gen;
        const turn = r.turns[r.turn++];
        if (r.turn < r.turns.length && r.ctx + turn.obs + r.turns[r.turn].gen <= p.contextCap) {
          r.ctx += turn.obs;
          r.nextAt = t + turn.toolS;
        } else r.finishAt = t + p.gradeS;
      }
    }
    const outstanding = engines.map((e) => e.running.length + e.waiting.length).sort((a, b) => a - b);
    if (s.status.updatesDone >= p.warmupUpdates) {
      sumMax += outstanding.at(-1)!; sumMin += outstanding[0]; samples++;
      if (outstanding.at(-1)! > peak.max) peak = { max: outstanding.at(-1)!, othersMedian: outstanding[Math.floor((outstanding.length - 1) / 2)], atMinute: t / 60 };
    }
    t += TICK_S;
    // the training run's wake: finished rollouts, a landed update, stale discards, the next batch, new groups
    for (let i = active.length - 1; i >= 0; i--) {
      const r = active[i];
      if (r.finishAt === null || r.finishAt > t) continue;
      active.splice(i, 1);
      releaseRollout(router, r.id);
      for (const e of engines) { const n = e.cache.get(r.id); if (n) { e.cache.delete(r.id); e.cacheUsed -= n; } }
      rolloutFinished(s, f, cfg, { rolloutId: r.id, taskId: r.taskId, groupId: r.groupId, reward: u() < 0.5 ? 1 : 0, gate: 'tests_failed', versionStart: r.versionStart });
    }
    if (training && t >= training.loadEndsAt) {
      const landed = updateLanded(s, f, cfg, { version: training.version, claimed: training.claimed });
      landings.push({ at: t, discarded: landed.discardedStale });
      for (const e of engines) {
        // recipe.cacheRebuild: the new weights invalidate every cached prefix; running requests are recomputed
        e.version = training.version; e.cache.clear(); e.cacheUsed = 0;
        for (const q of e.running) q.prefillLeft = q.prompt + q.generated;
      }
      training = null;
    }
    discardStale(s, f, cfg);
    if (!training) {
      const plan = chooseBatch(s, f, cfg);
      if (plan) training = { endsAt: t + p.trainS, loadEndsAt: t + p.trainS + p.loadS, version: plan.version, claimed: plan.batch.map((r) => r.rolloutId) };
    }
    startGroups();
  }
  const measured = landings.slice(p.warmupUpdates);
  const start = landings[p.warmupUpdates - 1]?.at ?? 0;
  const each = measured.map((l) => l.discarded);
  return {
    policy, params: p, updatesMeasured: measured.length,
    minutesPerUpdate: (measured.at(-1)!.at - start) / 60 / measured.length,
    discardedPerUpdate: each.reduce((a, b) => a + b, 0) / each.length, discardedPerUpdateEach: each,
    requestsPerEngine: { meanMax: sumMax / samples, meanMin: sumMin / samples, peak },
    cacheHitTokenShare: prefillAll ? prefillHit / prefillAll : 0, preemptions, genTokensPerS: genTotal / t, simulatedMinutes: t / 60,
  };
}

const POLICIES: RouterPolicy[] = ['sticky', 'round-robin', 'least-loaded', 'cache-aware'];

/** One row per policy at the given parameters. */
function compare(p: SimParams): SimResult[] {
  return POLICIES.map((pol) => simulate(pol, p));
}

const brief = (r: SimResult) => ({
  policy: r.policy, minutesPerUpdate: +r.minutesPerUpdate.toFixed(2), discardedPerUpdate: +r.discardedPerUpdate.toFixed(2),
  requestsPerEngine: { meanMax: +r.requestsPerEngine.meanMax.toFixed(1), meanMin: +r.requestsPerEngine.meanMin.toFixed(1), peakMax: r.requestsPerEngine.peak.max, peakOthersMedian: r.requestsPerEngine.peak.othersMedian },
  cacheHitTokenShare: +r.cacheHitTokenShare.toFixed(3), preemptions: r.preemptions, genTokensPerS: Math.round(r.genTokensPerS),
});

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('placement_sim.ts')) {
  const a = parseArgs(process.argv.slice(2), { quick: 'bool', out: 'value', seeds: 'value', set: 'multi', only: 'value' });
  const quick = a.flags.has('quick');
  const out = flag(a, 'out') ?? path.join('bench', 'results', 'placement_sim.json');
  const seeds = Array.from({ length: Number(flag(a, 'seeds') ?? (quick ? 1 : 3)) }, (_, i) => i + 1);
  // --set name=value overrides a numeric parameter of PUBLISHED_SCALE (for exploring; the JSON records them)
  const overrides = Object.fromEntries((a.flags.get('set') ?? []).map((kv) => {
    const [k, v] = kv.split('=');
    if (!(k in PUBLISHED_SCALE) && k !== 'cacheSlack') throw new Error(`--set ${kv}: no parameter ${k} (known: ${Object.keys(PUBLISHED_SCALE).join(', ')}, cacheSlack)`);
    if (!Number.isFinite(Number(v))) throw new Error(`--set ${kv}: ${k} takes a number`);
    return [k, Number(v)];
  }));
  const base: SimParams = { ...PUBLISHED_SCALE, ...(quick ? { updates: 5, warmupUpdates: 1 } : {}), ...overrides };
  const started = Date.now();
  // the headline: the four policies at the published scale, several seeds
  const headline = seeds.flatMap((seed) => compare({ ...base, seed }).map(brief).map((r) => ({ seed, ...r })));
  const mean = POLICIES.map((pol) => {
    const rows = headline.filter((r) => r.policy === pol);
    const avg = (g: (r: (typeof rows)[number]) => number) => +(rows.reduce((x, r) => x + g(r), 0) / rows.length).toFixed(2);
    return { policy: pol, minutesPerUpdate: avg((r) => r.minutesPerUpdate), discardedPerUpdate: avg((r) => r.discardedPerUpdate), requestsMeanMax: avg((r) => r.requestsPerEngine.meanMax), requestsMeanMin: avg((r) => r.requestsPerEngine.meanMin), peakMax: Math.max(...rows.map((r) => r.requestsPerEngine.peakMax)), cacheHitTokenShare: avg((r) => r.cacheHitTokenShare) };
  });
  console.table(mean);
  // what drives it: one parameter at a time, the four policies each (seed 1)
  const sweeps: Record<string, Partial<SimParams>[]> = quick ? {} : {
    prefillTokS: [{ prefillTokS: 10_000 }, { prefillTokS: 160_000 }, { prefillTokS: 1_000_000 }],
    kvTokens: [{ kvTokens: 1_500_000 }, { kvTokens: 12_000_000 }],
    inFlight: [{ inFlight: 128 }, { inFlight: 192 }, { inFlight: 384 }],
    maxOffPolicySteps: [{ maxOffPolicySteps: 1 }, { maxOffPolicySteps: 4 }],
    cacheSlack: [{ cacheSlack: 0 }, { cacheSlack: 8 }, { cacheSlack: 16 }, { cacheSlack: 64 }],
  };
  const sensitivity = Object.entries(sweeps).flatMap(([name, vs]) => vs.map((v) => {
    const rows = (name === 'cacheSlack' ? [simulate('cache-aware', { ...base, ...v })] : compare({ ...base, ...v })).map(brief);
    console.log(name, JSON.stringify(v), rows.map((r) => `${r.policy}: ${r.minutesPerUpdate} min, ${r.discardedPerUpdate} disc, max/min ${r.requestsPerEngine.meanMax}/${r.requestsPerEngine.meanMin}`).join(' | '));
    return { vary: v, rows };
  }));
  const result = { bench: 'placement_sim', date: new Date().toISOString().slice(0, 10), command: `npx tsx bench/placement_sim.ts${quick ? ' --quick' : ''}`, params: base, seeds, mean, headline, sensitivity, wallSeconds: (Date.now() - started) / 1000 };
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`wrote ${out} in ${result.wallSeconds.toFixed(0)} s`);
}
