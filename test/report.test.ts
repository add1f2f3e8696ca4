import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportFigures } from '../report/figures.js';
import { renderReportHtml } from '../report/html.js';
import { ATTEMPT_WINDOW } from '../report/poolReward.js';
import { OTHER_TIME_LABEL, ema, stressLayerRow } from '../report/stats.js';
import { buildRunSummary, summarizeForComparison, type RunSummary } from '../report/summary.js';
import { esc, lineChart } from '../report/svg.js';
import { writeReport } from '../report/write.js';
import { settings } from './helpers/platform.js';
import { getRun } from '../store/runs.js';

/** The run report against the real Postgres: a synthetic run with known numbers is
 *  inserted, summarised, rendered, written and opened in headless Chromium. The rows are
 *  inserted with plain SQL (the store writes rows as they happen, with now() timestamps; this
 *  run's timeline is made up); the report reads them through the store. */

const outDir = path.join(import.meta.dirname, 'out', 'report');
const pool = new pg.Pool({ connectionString: settings.postgres.url, max: 4 });
const runId = `report-test-${process.pid}-${Date.now()}`;
const emptyRunId = `${runId}-empty`;
const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (sec: number) => new Date(T0 + sec * 1000).toISOString();
const N = 20;
/** Update k lands at 10k + 2 s (v0 at run start): 12 s for the first, 10 s after. */
const updateAt = (k: number) => (k === 0 ? 0 : 10 * k + 2);
const batchMean = (k: number) => Math.min(1, 0.15 + 0.045 * k + (((k * 37) % 7) - 3) / 40);

interface R { id: string; task: string; purpose: string; status: string; staleness: number | null; reward: number | null; gate: string | null; batch: number | null; version: number; ended: number }
const rollouts: R[] = [];
let seq = 0;
const add = (r: Omit<R, 'id'>) => rollouts.push({ id: `${runId}-r${seq++}`, ...r });

// Train batches: tA always solves, tB alternates, tC solves v1..v4 (then retired), and
// after its revive at v16 fails in v18, v19. tD is in the pool but never attempted.
for (let k = 1; k <= N; k++) {
  const base = { purpose: 'train', status: 'finished', staleness: k % 3, batch: k, version: k - 1, ended: updateAt(k) - 1 };
  add({ ...base, task: 'tA', reward: 1, gate: 'passed' });
  add({ ...base, task: 'tB', reward: k % 2, gate: k % 2 ? 'passed' : k % 4 === 0 ? 'format' : 'tests_failed' });
  if (k <= 4) add({ ...base, task: 'tC', reward: 1, gate: 'passed' });
  if (k === 18 || k === 19) add({ ...base, task: 'tC', reward: 0, gate: 'tests_failed' });
}
// Discarded as stale (not in any batch); one without a recorded staleness. Five of them had run
// to a reward before they were discarded (they count in the reward over rollouts actually run).
for (const [s, rew] of [[3, 1], [3, 0], [3, 1], [4, 0], [4, 1], [null, null]] as const) add({ task: 'tB', purpose: 'train', status: 'discarded', staleness: s, reward: rew, gate: null, batch: null, version: 2, ended: 50 });
// Failed on infrastructure: not the policy's, left out of the reward over rollouts run.
add({ task: 'tB', purpose: 'train', status: 'failed', staleness: null, reward: 0, gate: null, batch: null, version: 5, ended: 55 });
// Rechecks of the retired tC: [1, 1] at v10 (kept retired), [0, 1] at v16 (revived).
for (const [v, rew] of [[10, 1], [10, 1], [16, 0], [16, 1]]) add({ task: 'tC', purpose: 'recheck', status: 'finished', staleness: null, reward: rew, gate: rew ? 'passed' : 'tests_failed', batch: null, version: v, ended: updateAt(v) + 1 });

/** Shortcut attempts: tB digs into git history in odd versions, tA tries the network every
 *  fifth, a failed rollout (left out of the shares) tried the hidden tests. */
const flagsOf = (r: R): string[] => [
  ...(r.task === 'tB' && r.version % 2 === 1 ? ['git_history'] : []),
  ...(r.task === 'tA' && r.version % 5 === 0 ? ['network'] : []),
  ...(r.status === 'failed' ? ['hidden_tests'] : []),
];

/** Two turns per train rollout that ran (finished or discarded): 300 + 250 ms of generation,
 *  100 ms of tool execution; the second turn of a rollout the gate cut off for its format fails
 *  the raw check. A failed rollout got one malformed turn. Each rollout took 1 s of wall time. */
interface T { rollout: R; index: number; at: number; genMs: number; toolMs: number | null; ok: boolean }
const turns: T[] = rollouts.filter((r) => r.purpose === 'train').flatMap((r): T[] => r.status === 'failed'
  ? [{ rollout: r, index: 0, at: r.ended - 0.5, genMs: 300, toolMs: null, ok: false }]
  : [{ rollout: r, index: 0, at: r.ended - 0.8, genMs: 300, toolMs: 100, ok: true }, { rollout: r, index: 1, at: r.ended - 0.3, genMs: 250, toolMs: null, ok: r.gate !== 'format' }]);
/** Grading time: 200 ms in the gate decision's detail for tA and tB, 400 ms only in the
 *  submission's grade for tC, none where the gate ended the rollout for its format. */
const gradeMs = (r: R): number | null => (r.gate === null || r.gate === 'format' ? null : r.task === 'tC' ? 400 : 200);
/** Frozen-weight evaluations: tD solved none at the start and is out of the pool. */
const EVALS = [
  { label: 'start', version: 0, task: 'tA', pass1: 0.5, inPool: true }, { label: 'start', version: 0, task: 'tB', pass1: 0.25, inPool: true },
  { label: 'start', version: 0, task: 'tC', pass1: 0.75, inPool: true }, { label: 'start', version: 0, task: 'tD', pass1: 0, inPool: false },
  { label: 'end', version: N, task: 'tA', pass1: 1, inPool: true }, { label: 'end', version: N, task: 'tB', pass1: 0.5, inPool: true },
  { label: 'end', version: N, task: 'tC', pass1: 1, inPool: true }, { label: 'end', version: N, task: 'tD', pass1: 0.25, inPool: false },
  // every 10 updates: the held-out tH, and the tasks retired as mastered by then (tC at v10; none at v20, revived at v16)
  { label: 'periodic', version: 10, task: 'tH', pass1: 0.25, inPool: false }, { label: 'retired', version: 10, task: 'tC', pass1: 0.75, inPool: false },
  { label: 'periodic', version: 20, task: 'tH', pass1: 0.5, inPool: false },
] as const;
/** Update k's window: [updateAt(k-1), updateAt(k)) (before update 1: everything earlier). */
const inWindow = (k: number, sec: number) => (k === 1 || sec >= updateAt(k - 1)) && sec < updateAt(k);

/** e0 gets (k % 4) + 1 placements before update k, e1 two; e0 three more after v20. */
const e0Per = (k: number) => (k % 4) + 1;

async function insertRun(): Promise<void> {
  const q = (sql: string, params: unknown[]) => pool.query(sql, params);
  await q(`insert into runs (run_id, workflow_id, name, config, status, started_at, ended_at) values ($1, $2, $3, $4, 'completed', $5, $6)`,
    [runId, `wf-${runId}`, 'report <synthetic> & test', JSON.stringify({ lr: 3e-4, groupSize: 8, note: '<b>not bold</b>' }), at(0), at(updateAt(N) + 30)]);
  for (let k = 0; k <= N; k++) {
    const metrics = k === 0 || k === 5 ? null : {
      loss: 1 / k, grad_norm: 0.5, entropy: 2 - k / 20, clip_fraction: 0.1, mismatch_mean_abs_logprob: 1e-3 * (1 + k / 10), mismatch_kl: 1e-6 * k,
      // numerics on the trainer's own version's tokens (none measured at v3), the off-policy gap apart (none when k % 3 == 0)
      mismatch_current_mean_abs_logprob: k === 3 ? -1 : 1e-7 * k, mismatch_current_tokens: k === 3 ? 0 : 100,
      offpolicy_mean_abs_logprob: k % 3 === 0 ? -1 : 2e-3 * k, offpolicy_tokens: k % 3 === 0 ? 0 : 50,
    };
    const retired = k >= 4 && k < 16 ? 1 : 0;
    await q(`insert into policy_versions (run_id, version, created_at, batch_rollouts, batch_mean_reward, discarded_stale, train_ms, publish_ms, load_ms, update_ms, metrics, pool)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [runId, k, at(updateAt(k)), k ? rollouts.filter((r) => r.batch === k).length : null, k ? batchMean(k) : null, k ? k % 3 : null,
        k ? 3000 : null, k ? 500 : null, k ? JSON.stringify({ e0: 400, e1: 450 }) : null, k ? 4200 : null,
        metrics && JSON.stringify(metrics), k ? JSON.stringify({ active: 4 - retired, retired_mastered: retired, retired_hopeless: 0, revived: k >= 16 ? 1 : 0 }) : null]);
  }
  for (const r of rollouts) {
    await q(`insert into rollouts (rollout_id, run_id, task_id, group_id, attempt, purpose, status, version_start, version_end, reward, gate, staleness, started_at, ended_at, shortcut_flags)
             values ($1, $2, $3, $4, 0, $5, $6, $7, $7, $8, $9, $10, $11, $12, $13)`,
      [r.id, runId, r.task, `${r.task}-v${r.version}`, r.purpose, r.status, r.version, r.reward, r.gate, r.staleness, at(r.ended - 1), at(r.ended), flagsOf(r)]);
    const g = gradeMs(r);
    if (r.gate) await q('insert into gate_decisions (rollout_id, gate, reward, detail) values ($1, $2, $3, $4)', [r.id, r.gate, r.reward, JSON.stringify(g !== null && r.task !== 'tC' ? { failing: [], durationMs: g } : { failing: [] })]);
    if (g !== null) await q('insert into submissions (rollout_id, diff, bytes, grade) values ($1, $2, 1, $3)', [r.id, '+x', JSON.stringify(r.task === 'tC' ? { passed: r.reward === 1, durationMs: g } : { passed: r.reward === 1 })]);
    if (r.batch) await q('insert into batch_members (rollout_id, run_id, version) values ($1, $2, $3)', [r.id, runId, r.batch]);
  }
  for (const t of turns) {
    await q(`insert into turns (rollout_id, turn_index, raw_text, format_ok, gen_ms, tool_ms, created_at) values ($1, $2, 'x', $3, $4, $5, $6)`,
      [t.rollout.id, t.index, t.ok, t.genMs, t.toolMs, at(t.at)]);
  }
  for (const e of EVALS) {
    await q(`insert into evaluations (run_id, label, version, task_id, k, attempts, solved, failed, pass_at_1, pass_at_k, in_pool) values ($1, $2, $3, $4, 4, 4, $5, 0, $6, $7, $8)`,
      [runId, e.label, e.version, e.task, Math.round(e.pass1 * 4), e.pass1, e.pass1 > 0 ? 1 : 0, e.inPool]);
  }
  for (const [task, v, decision] of [['tC', 4, 'retire_mastered'], ['tC', 10, 'recheck_keep_retired'], ['tC', 16, 'revive']] as const) {
    await q('insert into evictions (run_id, task_id, at_version, decision, evidence) values ($1, $2, $3, $4, $5)',
      [runId, task, v, decision, JSON.stringify({ rewards: v === 4 ? [1, 1, 1, 1] : v === 10 ? [1, 1] : [0, 1] })]);
  }
  for (const [task, attempts, lrv, lrr] of [['tA', 20, null, null], ['tB', 26, null, null], ['tC', 6, 16, 0.5], ['tD', 0, null, null]] as const) {
    await q('insert into task_stats (run_id, task_id, attempts, last_recheck_version, last_recheck_reward) values ($1, $2, $3, $4, $5)', [runId, task, attempts, lrv, lrr]);
  }
  const placed = (engine: string, sec: number, running: number, waiting: number) =>
    q(`insert into engine_events (run_id, engine_id, event, running, waiting, at) values ($1, $2, 'placed', $3, $4, $5)`, [runId, engine, running, waiting, at(sec)]);
  for (let k = 1; k <= N; k++) {
    const from = updateAt(k - 1) + 1;
    for (let j = 0; j < e0Per(k); j++) await placed('e0', from + j * 0.1, j + (k === 7 ? 4 : 0), k === 7 ? 3 : 0);
    for (let j = 0; j < 2; j++) await placed('e1', from + 0.05 + j * 0.1, 1, 0);
  }
  for (let j = 0; j < 3; j++) await placed('e0', updateAt(N) + 1 + j, 1, 0);
  for (let j = 0; j < 2; j++) await q(`insert into engine_events (run_id, engine_id, event, at) values ($1, 'e1', 'failed', $2)`, [runId, at(30 + j)]);
  // An event of another run must not leak in.
  await q(`insert into engine_events (run_id, engine_id, event, at) values ($1, 'e0', 'placed', $2)`, [emptyRunId, at(15)]);
  await q(`insert into runs (run_id, workflow_id, name, config, started_at) values ($1, $2, 'just started', '{}', $3)`, [emptyRunId, `wf-${emptyRunId}`, at(0)]);
  await q(`insert into policy_versions (run_id, version, created_at) values ($1, 0, $2)`, [emptyRunId, at(0)]);
}

async function deleteRuns(): Promise<void> {
  const ids = [runId, emptyRunId];
  const inRuns = 'rollout_id in (select rollout_id from rollouts where run_id = any($1))';
  // FK order: rows that reference rollouts, then rollouts, then rows that reference runs.
  for (const t of ['gate_decisions', 'batch_members', 'turns', 'submissions']) await pool.query(`delete from ${t} where ${inRuns}`, [ids]);
  for (const t of ['rollouts', 'evictions', 'evaluations', 'task_stats', 'engine_events', 'policy_versions', 'runs']) {
    await pool.query(`delete from ${t} where run_id = any($1)`, [ids]);
  }
}

let summary: RunSummary;

beforeAll(async () => {
  await deleteRuns();
  await insertRun();
  summary = await buildRunSummary(pool, runId);
});
afterAll(async () => {
  await deleteRuns();
  const left = await Promise.all([runId, emptyRunId].map((id) => getRun(pool, id)));
  await pool.end();
  expect(left).toEqual([null, null]);
});

describe('run summary from Postgres', () => {
  it('reads the run and one row per update with timings', () => {
    expect(summary.run).toMatchObject({ id: runId, status: 'completed', startedAt: at(0), endedAt: at(updateAt(N) + 30), durationSeconds: updateAt(N) + 30 });
    expect(summary.run.config).toMatchObject({ lr: 3e-4, groupSize: 8 });
    expect(summary.updates.map((u) => u.version)).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    expect(summary.updates[0]).toMatchObject({ secondsPerUpdate: 12, secondsSinceStart: 12, batchRollouts: 3, discardedStale: 1, updateMs: 4200, trainMs: 3000, publishMs: 500, loadMs: { e0: 400, e1: 450 } });
    expect(summary.updates.slice(1).every((u) => u.secondsPerUpdate === 10)).toBe(true);
    expect(summary.updates[4].metrics).toBeNull();
    expect(summary.updates[9].metrics?.mismatch_kl).toBeCloseTo(1e-5, 12);
    expect(summary.updates[19].pool).toEqual({ active: 4, retired_mastered: 0, retired_hopeless: 0, revived: 1 });
  });

  it('smooths the reward with an EMA of alpha 0.2 and derives the key numbers', () => {
    const r = summary.updates.map((u) => u.meanReward as number);
    expect(r[0]).toBeCloseTo(batchMean(1), 12);
    expect(summary.smoothedReward[0]).toBeCloseTo(r[0], 12);
    expect(summary.smoothedReward[1]).toBeCloseTo(0.2 * r[1] + 0.8 * r[0], 12);
    expect(ema([null, 1, null, 0])).toEqual([null, 1, 1, 0.8]);
    const k = summary.keyNumbers;
    expect(k.updates).toBe(N);
    expect(k.totalDiscarded).toBe(Array.from({ length: N }, (_, i) => (i + 1) % 3).reduce((a, b) => a + b, 0));
    expect(k.meanSecondsPerUpdate).toBeCloseTo((12 + 19 * 10) / 20, 12);
    expect(k.finalReward).toBeCloseTo(batchMean(N), 12);
    expect(k.peakRewardSmoothed).toBe(Math.max(...(summary.smoothedReward as number[])));
    expect(k.lastFifthMinSmoothed).toBe(Math.min(...(summary.smoothedReward.slice(-4) as number[])));
  });

  it('histograms staleness of batch members and of discarded rollouts', () => {
    // k % 3 over k = 1..20: six 0s, seven 1s, seven 2s; two train rollouts per update + tC's six.
    const expected: Record<string, number> = {};
    for (const r of rollouts.filter((x) => x.batch)) expected[String(r.staleness)] = (expected[String(r.staleness)] ?? 0) + 1;
    expect(summary.staleness.batch).toEqual(expected);
    expect(Object.values(summary.staleness.batch).reduce((a, b) => a + b, 0)).toBe(2 * N + 6);
    expect(summary.staleness.discarded).toEqual({ 3: 3, 4: 2, unknown: 1 });
  });

  it('counts placements and failures per engine, bucketed by update window', () => {
    const [e0, e1] = summary.engines;
    expect(e0.engineId).toBe('e0');
    expect(e0.placementsPerUpdate).toEqual(Array.from({ length: N }, (_, i) => e0Per(i + 1)));
    expect(e0.placementsSinceLastUpdate).toBe(3);
    expect(e0.placements).toBe(e0.placementsPerUpdate.reduce((a, b) => a + b, 0) + 3);
    expect(e0).toMatchObject({ failures: 0, maxRunning: e0Per(7) - 1 + 4, maxWaiting: 3 });
    expect(e1).toMatchObject({ engineId: 'e1', placements: 2 * N, failures: 2, placementsSinceLastUpdate: 0 });
    expect(e1.placementsPerUpdate.every((n) => n === 2)).toBe(true);
  });

  it('counts gate reasons over train rollouts only, and lists evictions', () => {
    const train = rollouts.filter((r) => r.purpose === 'train' && r.gate);
    const count = (g: string) => train.filter((r) => r.gate === g).length;
    expect(Object.fromEntries(summary.gates.map((g) => [g.gate, g.rollouts]))).toEqual({ passed: count('passed'), tests_failed: count('tests_failed'), format: count('format') });
    expect(summary.gates[0].gate).toBe('passed'); // most frequent first
    expect(summary.gates.find((g) => g.gate === 'passed')?.meanReward).toBe(1);
    expect(summary.evictions.map((e) => [e.taskId, e.atVersion, e.decision])).toEqual([['tC', 4, 'retire_mastered'], ['tC', 10, 'recheck_keep_retired'], ['tC', 16, 'revive']]);
    expect(summary.evictions[2].evidence).toEqual({ rewards: [0, 1] });
  });

  it('computes the pool-wide reward with retired tasks scored by their latest recheck', () => {
    expect(ATTEMPT_WINDOW).toBe(8);
    const p = (v: number) => summary.poolReward?.find((x) => x.version === v);
    // v3: tA 1, tB [1,0,1], tC [1,1,1]; tD never attempted → skipped.
    expect(p(3)?.reward).toBeCloseTo((1 + 2 / 3 + 1) / 3, 12);
    expect(p(3)).toMatchObject({ tasksScored: 3, retiredScored: 0, tasksSkipped: 1 });
    // v8: tC retired at v4 and not rechecked yet → skipped, not counted as solved.
    expect(p(8)).toMatchObject({ reward: 0.75, tasksScored: 2, tasksSkipped: 2 });
    // v12: tC scored by its v10 recheck [1, 1].
    expect(p(12)?.reward).toBeCloseTo((1 + 0.5 + 1) / 3, 12);
    expect(p(12)?.retiredScored).toBe(1);
    // v19: tC revived at v16; last attempts [1,1,1,1,0,0].
    expect(p(19)?.reward).toBeCloseTo((1 + 0.5 + 4 / 6) / 3, 12);
    expect(p(19)?.retiredScored).toBe(0);
  });

  it('summarizes a run for a comparison table', () => {
    const row = summarizeForComparison(summary, 'least-loaded');
    expect(row.label).toBe('least-loaded');
    expect(row.runId).toBe(runId);
    expect(row.secondsPerUpdate).toBeCloseTo(summary.keyNumbers.meanSecondsPerUpdate as number, 12);
    expect(row.discardedPerUpdate).toBeCloseTo(summary.keyNumbers.totalDiscarded / N, 12);
    expect(row.meanReward).toBeCloseTo(Array.from({ length: N }, (_, i) => batchMean(i + 1)).reduce((a, b) => a + b, 0) / N, 12);
  });

  it('reads the frozen-weight evaluations, per label and per task', () => {
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const of = (label: string, pool?: boolean) => EVALS.filter((e) => e.label === label && (pool === undefined || e.inPool === pool)).map((e) => e.pass1);
    expect(summary.evaluations.filter((e) => e.label === 'start' || e.label === 'end').map((e) => e.label)).toEqual(['start', 'end']);
    const [start, end] = summary.evaluations.filter((e) => e.label === 'start' || e.label === 'end');
    expect(start).toMatchObject({ label: 'start', version: 0, k: 4, tasks: 4, poolTasks: 3 });
    expect(start.pass1).toBeCloseTo(mean(of('start')), 12);
    expect(start.poolPass1).toBeCloseTo(mean(of('start', true)), 12);
    expect(start.passK).toBeCloseTo(0.75, 12);
    expect(end).toMatchObject({ label: 'end', version: N, tasks: 4, poolTasks: 3, passK: 1 });
    expect(end.poolPass1).toBeCloseTo(mean(of('end', true)), 12);
    expect(summary.evaluationTasks).toHaveLength(EVALS.length);
    expect(summary.evaluationTasks.find((e) => e.label === 'end' && e.taskId === 'tD')).toMatchObject({ pass1: 0.25, inPool: false, k: 4 });
  });

  it('reads the periodic evaluations (held-out tasks, and the retired ones: the forgetting check) and plots them by version', () => {
    const at = (label: string) => summary.evaluations.filter((e) => e.label === label).map((e) => [e.version, e.pass1]);
    expect(at('periodic')).toEqual([[10, 0.25], [20, 0.5]]);
    expect(at('retired')).toEqual([[10, 0.75]]);
    const figs = reportFigures(summary);
    expect(figs.map((f) => f.id)).toContain('periodic-evaluation');
    // the start-vs-end figure keeps to the tasks those two scored
    expect(figs.find((f) => f.id === 'evaluation')!.body).not.toContain('<code>tH</code>');
  });

  it('counts epochs as train groups started per pool task (the start evaluation\'s pool)', () => {
    const groups = new Set(rollouts.filter((r) => r.purpose === 'train').map((r) => `${r.task}-v${r.version}`));
    expect(groups.size).toBe(46);
    expect(summary.epochs).toBeCloseTo(groups.size / 3, 12);
  });

  it('gives each update the reward over every train rollout run in its window, and the raw-format validity of its turns', () => {
    for (let k = 1; k <= N; k++) {
      const u = summary.updates[k - 1];
      const ran = rollouts.filter((r) => r.purpose === 'train' && (r.status === 'finished' || r.status === 'discarded') && r.reward !== null && inWindow(k, r.ended));
      expect(u.runRollouts, `v${k}`).toBe(ran.length);
      expect(u.runReward, `v${k}`).toBeCloseTo(ran.reduce((a, r) => a + (r.reward ?? 0), 0) / ran.length, 12);
      const mine = turns.filter((t) => inWindow(k, t.at));
      expect(u.turns, `v${k}`).toBe(mine.length);
      expect(u.formatValidity, `v${k}`).toBeCloseTo(mine.filter((t) => t.ok).length / mine.length, 12);
    }
    // v5's window holds five rollouts discarded after they ran (3 of 5 solved) besides its batch; the failed one (v6) is left out
    expect(summary.updates[4].runRollouts).toBe(2 + 5);
    expect(summary.updates[4].runReward).toBeCloseTo((1 + 1 + 3) / 7, 12);
    expect(summary.updates[5].runRollouts).toBe(2);
    // v4: tB was cut off for its format, so one of its turns fails the raw check; v6 has the failed rollout's malformed turn
    expect(summary.updates[3].formatValidity).toBeCloseTo(5 / 6, 12);
    expect(summary.updates[5].formatValidity).toBeCloseTo(4 / 5, 12);
  });

  it('gives each update the share of its window\'s train rollouts that attempted each kind of shortcut, and plots it', () => {
    for (let k = 1; k <= N; k++) {
      const ran = rollouts.filter((r) => r.purpose === 'train' && (r.status === 'finished' || r.status === 'discarded') && r.reward !== null && inWindow(k, r.ended));
      const share = (flag: string) => ran.filter((r) => flagsOf(r).includes(flag)).length / ran.length;
      expect(summary.updates[k - 1].shortcutShare, `v${k}`).toEqual({ git_history: share('git_history'), network: share('network'), hidden_tests: share('hidden_tests') });
    }
    // v2's window: tA, tB and tC of version 1, and tB tried git history
    expect(summary.updates[1].shortcutShare?.git_history).toBeCloseTo(1 / 3, 12);
    // the failed rollout tried the hidden tests, but it did not run to a decision
    expect(summary.updates.every((u) => u.shortcutShare?.hidden_tests === 0)).toBe(true);
    expect(reportFigures(summary).map((f) => f.id)).toContain('shortcuts');
  });

  it('breaks a train rollout\'s wall time down into what is measured, and the rest', () => {
    const finished = rollouts.filter((r) => r.purpose === 'train' && r.status === 'finished');
    const grading = finished.reduce((a, r) => a + (gradeMs(r) ?? 0), 0) / finished.length / 1000;
    const t = summary.timeBreakdown;
    expect(t.rollouts).toBe(finished.length);
    expect(t.graded).toBe(finished.filter((r) => gradeMs(r) !== null).length);
    expect(t.wallSeconds).toBeCloseTo(1, 9);
    expect(t.generationSeconds).toBeCloseTo(0.55, 9);
    expect(t.toolSeconds).toBeCloseTo(0.1, 9);
    expect(t.gradingSeconds).toBeCloseTo(grading, 9);
    expect(t.otherSeconds).toBeCloseTo(1 - 0.55 - 0.1 - grading, 9);
    expect(t.otherLabel).toBe(OTHER_TIME_LABEL);
    expect(t.otherLabel).toMatch(/not measured apart/);
    expect(t.perUpdate).toHaveLength(N);
    expect(t.perUpdate[0]).toEqual({ version: 1, trainSeconds: 3, weightLoadSeconds: 0.425, slowestLoadSeconds: 0.45, updateSeconds: 4.2 });
    expect(t.meanTrainSeconds).toBeCloseTo(3, 12);
    expect(t.meanUpdateSeconds).toBeCloseTo(4.2, 12);
    expect(t.meanWeightLoadSeconds).toBeCloseTo(0.425, 12);
  });

  it('makes a stress layer row of the run', () => {
    const row = stressLayerRow(summary, 'full');
    expect(row).toMatchObject({ label: 'full', runId });
    expect(row.rewards).toEqual(summary.updates.map((u) => u.meanReward));
    expect(row.runRewards).toEqual(summary.updates.map((u) => u.runReward));
    expect(row.formatValidity).toEqual(summary.updates.map((u) => u.formatValidity));
    expect(row.discarded).toEqual(summary.updates.map((u) => u.discardedStale ?? 0));
    const third = Array.from({ length: 7 }, (_, i) => batchMean(N - 6 + i));
    expect(row.lastThirdMean).toBeCloseTo(third.reduce((a, b) => a + b, 0) / 7, 12);
    expect(row.startPass1).toBeCloseTo(summary.evaluations[0].poolPass1 as number, 12);
    expect(row.endPass1).toBeCloseTo(summary.evaluations[1].poolPass1 as number, 12);
  });

  it('handles a run with no updates yet', async () => {
    const s = await buildRunSummary(pool, emptyRunId);
    expect(s.updates).toEqual([]);
    expect(s.engines).toEqual([{ engineId: 'e0', kind: 'reference', placements: 1, resubmitted: 0, failures: 0, maxRunning: null, maxWaiting: null, placementsPerUpdate: [], placementsSinceLastUpdate: 1 }]);
    expect(s.poolReward).toBeNull();
    expect(s.evaluations).toEqual([]);
    expect(s.evaluationTasks).toEqual([]);
    expect(s.epochs).toBeNull();
    expect(s.timeBreakdown).toMatchObject({ rollouts: 0, wallSeconds: null, generationSeconds: null, gradingSeconds: null, otherSeconds: null, perUpdate: [] });
    expect(s.keyNumbers).toMatchObject({ updates: 0, finalReward: null, peakRewardSmoothed: null, meanSecondsPerUpdate: null });
    const html = renderReportHtml(s);
    expect(html).toContain('no updates yet');
    expect(html).toContain('no eviction decisions yet');
    await expect(buildRunSummary(pool, `${runId}-missing`)).rejects.toThrow(/no run/);
  });
});

describe('report page', () => {
  const plots = ['reward', 'pool-reward', 'discarded', 'time', 'mismatch', 'pool-sizes', 'format-validity', 'time-breakdown', 'engine-load', 'staleness', 'gates', 'evaluation', 'layers', 'comparison'];

  it('renders one svg per plot, with captions, and escapes text', () => {
    const withComparison: RunSummary = {
      ...summary,
      comparison: [summarizeForComparison(summary, 'least-loaded'), { ...summarizeForComparison(summary, 'pinned'), discardedPerUpdate: 2.5, secondsPerUpdate: 14 }],
      layers: [stressLayerRow(summary, 'raw'), { ...stressLayerRow(summary, 'full'), lastThirdMean: (stressLayerRow(summary, 'raw').lastThirdMean ?? 0) + 0.01 }],
    };
    const html = renderReportHtml(withComparison);
    for (const id of plots) {
      const fig = html.match(new RegExp(`<figure class="plot[^"]*" id="fig-${id}">([\\s\\S]*?)</figure>`));
      expect(fig, id).not.toBeNull();
      expect(fig?.[1], id).toMatch(/<svg /);
      expect(fig?.[1], id).toMatch(/<figcaption>[^<]{20,}<\/figcaption>/);
    }
    expect(html).toContain('Training reward per update');
    expect(html).toContain('Router comparison');
    expect(html).toContain('all rollouts run in the window');
    expect(html).toContain('numerics: tokens of the trainer&#39;s own version');
    expect(html).toContain('off-policy gap: tokens of older versions');
    expect(html).toContain('Pass@1 with frozen weights: start vs end');
    expect(html).toContain(esc(OTHER_TIME_LABEL));
    expect(html).toMatch(/layer full makes no measurable difference on this policy: \d\.\d{3} vs \d\.\d{3}/);
    expect(html).toContain('pass@1 frozen');
    expect(html).toContain('<details><summary>run config</summary>');
    expect(html).toContain('report &lt;synthetic&gt; &amp; test');
    expect(html).toContain('&lt;b&gt;not bold&lt;/b&gt;');
    expect(html).not.toMatch(/<script|<link|(src|href)=["']?https?:/); // one offline file
    expect(html).toMatch(/retire mastered/);
    expect(esc(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(lineChart({ label: 'l', xLabel: 'x', yLabel: 'y', lines: [] })).toContain('no data yet');
  });

  it('writes report.html and summary.json', async () => {
    const files = await writeReport(pool, runId, outDir, (s) => ({ ...s, layers: [stressLayerRow(s, 'naive'), stressLayerRow(s, 'full')], comparison: [summarizeForComparison(s, 'least-loaded'), { ...summarizeForComparison(s, 'pinned (baseline)'), discardedPerUpdate: 2.5, secondsPerUpdate: 14, meanReward: 0.41 }] }));
    expect(files).toEqual({ html: path.join(outDir, 'report.html'), json: path.join(outDir, 'summary.json') });
    const json = JSON.parse(fs.readFileSync(files.json, 'utf8')) as RunSummary;
    expect(json.updates).toHaveLength(N);
    expect(json.comparison).toHaveLength(2);
    expect(json.layers?.map((l) => l.label)).toEqual(['naive', 'full']);
    expect(json.evaluations).toHaveLength(5); // start, end, two periodic, one retired
    expect(json.updates[0]).toHaveProperty('formatValidity');
    expect(fs.readFileSync(files.html, 'utf8')).toContain('<svg ');
  });

  it('opens offline in headless Chromium without console errors', async () => {
    const file = path.join(outDir, 'report.html');
    expect(fs.existsSync(file)).toBe(true);
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const errors: string[] = [];
      const requests: string[] = [];
      page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('request', (r) => { if (!r.url().startsWith('file://')) requests.push(r.url()); });
      await page.goto(pathToFileURL(file).href);
      expect(await page.locator('figure.plot svg').count()).toBeGreaterThanOrEqual(plots.length);
      await page.screenshot({ path: path.join(outDir, 'report.png'), fullPage: true });
      expect(errors).toEqual([]);
      expect(requests).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
