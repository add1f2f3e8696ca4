import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig, type RunConfig } from '../core/config.js';
import { renderToolCall, type ToolCall } from '../core/tools.js';
import type { RunStatus } from '../workflows/messages.js';
import { getRunStatus, newRunId, runWorkflowId, startRun, stop } from '../client/runs.js';
import { listEvaluations } from '../store/evaluations.js';
import { selectTasks } from '../tasks/loaders.js';
import { buildWarmStart } from '../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { startScriptedEngine, type ScriptedEngine } from './helpers/scriptedEngine.js';
import { floeBin, killGroup } from './helpers/cli.js';
import { eventually } from './helpers/wait.js';
import { recording, saveHistory } from './helpers/histories.js';
import { listBatchMembers, listPolicyVersions } from '../store/batches.js';
import { engineLoadTotals } from '../store/engines.js';
import { countRollouts, listRollouts, listRunTurns, listRunTurnTokens } from '../store/rollouts.js';

/** The asynchronous loop on real parts: Temporal, Postgres, podman sandboxes, and the
 *  reference engines and trainer (a briefly warm-started tiny policy on CPU). */

const TASKS = ['toy__caesar_wrap', 'toy__hex_pad'];
/** Scored by the periodic evaluation only: training never sees it. */
const HELD_OUT = 'toy__day_of_year';
let db: pg.Pool;
let gpu: EmbeddedGpu;
let checkpoint: string;
let scripted: ScriptedEngine;

/** Engines and trainer of a run must start at the run's version 0: one set per run. */
const startGpu = (tag: string) => startEmbeddedGpu(settings, { count: 2, checkpoint, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-${tag}`) });

function loopConfig(over: Partial<RunConfig['training']> = {}, g: EmbeddedGpu = gpu): RunConfig {
  return parseRunConfig({
    name: 'loop-test',
    tasks: { source: 'toy', include: TASKS },
    engines: { endpoints: g.engines.map((e, i) => ({ id: `engine-${i}`, url: e.url, node: 'local' })) },
    trainer: { url: g.trainer!.url, lr: 1e-3 },
    rollout: { groupSize: 2, maxInFlight: 4, maxTurns: 2 },
    training: { groupsPerUpdate: 1, updates: 2, ...over },
    eviction: { enabled: true, masteredK: 2, hopelessM: 2, recheckEvery: 1, recheckAttempts: 1 },
    evaluation: { attempts: 2, atStart: true, atEnd: true, every: 1, heldOut: [HELD_OUT] },
  });
}

async function batchIntegrity(runId: string) {
  const members = await listBatchMembers(db, runId);
  const ids = members.map((m) => m.rolloutId);
  const declared = (await listPolicyVersions(db, runId)).reduce((n, v) => n + (v.batchRollouts ?? 0), 0);
  return { twice: ids.length - new Set(ids).size, members: members.length, declared, ids };
}

beforeAll(async () => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  const tasks = selectTasks({ source: 'toy', include: TASKS, limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
  checkpoint = await buildWarmStart(settings, tasks, { steps: 20, lr: 3e-3, model: 'tiny', seed: 0 });
  gpu = await startGpu('a');
  scripted = await startScriptedEngine({ fallback: { text: renderToolCall({ name: 'submit', arguments: {} }) } });
}, 600_000);

afterAll(async () => {
  await gpu?.stop();
  await scripted?.close();
  await db?.end();
});

describe('trainingRun', () => {
  let platform: Platform;
  beforeAll(async () => { platform = await withWorkers(['control', 'sandbox', 'gpu']); });
  afterAll(async () => { await platform?.close(); });

  it('runs weight updates while generating: versions advance, engines serve them, batches are exactly-once', async () => {
    const { runId } = await startRun(platform.client, loopConfig());
    const final = await platform.client.workflow.getHandle(runWorkflowId(runId)).result();
    expect(final).toMatchObject({ state: 'completed', policyVersion: 2, updatesDone: 2 });
    // frozen-weight evaluations of the pool with the starting and the final weights, k = 2
    const evals = await listEvaluations(db, runId);
    const of = (...labels: string[]) => evals.filter((e) => labels.includes(e.label)).sort((a, b) => a.version - b.version || b.label.localeCompare(a.label) || a.taskId.localeCompare(b.taskId)).map((e) => [e.label, e.version, e.taskId, e.k, e.attempts + e.failed]);
    expect(of('start', 'end')).toEqual([
      ['start', 0, TASKS[0], 2, 2], ['start', 0, TASKS[1], 2, 2], ['end', 2, TASKS[0], 2, 2], ['end', 2, TASKS[1], 2, 2]]);
    // every update (evaluation.every: 1): the held-out task, with the weights just landed
    expect(of('periodic')).toEqual([['periodic', 1, HELD_OUT, 2, 2], ['periodic', 2, HELD_OUT, 2, 2]]);
    const byStatus = (final as RunStatus).evaluations ?? [];
    expect(byStatus.filter((e) => e.label !== 'retired').map((e) => [e.label, e.version, e.tasks])).toEqual([['start', 0, 2], ['periodic', 1, 1], ['periodic', 2, 1], ['end', 2, 2]]);
    // the forgetting check: at each periodic evaluation, the tasks retired as mastered by then (if any)
    for (const e of byStatus.filter((x) => x.label === 'retired')) expect(e.tasks).toBeGreaterThan(0);
    expect(of('retired').every(([, , taskId]) => TASKS.includes(taskId as string))).toBe(true);
    const all = await listRollouts(db, runId);
    const evalRollouts = all.filter((r) => r.purpose === 'eval');
    expect(evalRollouts.filter((r) => !r.groupId.includes('-eval-periodic-') && !r.groupId.includes('-eval-retired-'))).toHaveLength(8);
    // frozen: a periodic evaluation's every token came from the version it evaluates, and training never saw the held-out task
    for (const r of evalRollouts.filter((x) => x.groupId.includes('-eval-periodic-'))) {
      const v = Number(/-eval-periodic-v(\d+)-/.exec(r.groupId)![1]);
      if (r.versionStart !== null) expect([r.versionStart, r.versionEnd]).toEqual([v, v]);
    }
    expect(all.filter((r) => r.purpose === 'train' && r.taskId === HELD_OUT)).toEqual([]);
    const versions = await listPolicyVersions(db, runId);
    expect(versions.map((r) => r.version)).toEqual([1, 2]);
    for (const v of versions) {
      expect(v.batchRollouts).toBeGreaterThanOrEqual(2);
      expect(v.metrics!.mismatch_mean_abs_logprob).toBeLessThan(1e-3); // fp32 engine and trainer agree
      expect(Object.keys(v.loadMs!).sort()).toEqual(['engine-0', 'engine-1']);
    }
    for (const e of gpu.engines) expect((await (await fetch(`${e.url}/health`)).json()).version).toBe(2);
    expect(await batchIntegrity(runId)).toMatchObject({ twice: 0 });
    const { members, declared } = await batchIntegrity(runId);
    expect(members).toBe(declared);
    const placed = (await engineLoadTotals(db, runId)).filter((e) => e.placements > 0);
    expect(placed).toHaveLength(2); // least-loaded spread the work over both engines
    const tokens = await listRunTurnTokens(db, runId);
    expect(tokens.flatMap((r) => r.tokenVersions).every((v) => v >= 0 && v <= 2)).toBe(true);
    // every turn of a finished rollout has its ids and its one row
    const turns = await listRunTurns(db, runId);
    const finished = await listRollouts(db, runId, { status: 'finished' });
    expect(finished.length).toBeGreaterThan(0);
    for (const r of finished) {
      const mine = (t: { rolloutId: string }) => t.rolloutId === r.rolloutId;
      expect(turns.filter(mine).map((t) => t.turnIndex)).toEqual([...Array(r.nTurns).keys()]);
      expect(tokens.filter(mine).map((t) => t.turnIndex)).toEqual([...Array(r.nTurns).keys()]);
    }
    // a replay fixture with weight updates and eviction passes (test/replay.test.ts)
    if (recording()) saveHistory(runWorkflowId(runId));
  }, 600_000);

  it('picks the stress pool by the published rule: the tasks the starting policy solves at least once in k', async () => {
    const [solvable] = selectTasks({ source: 'toy', include: [TASKS[0]], limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
    const runId = newRunId('pool-rule-test');
    // the scripted policy solves TASKS[0] on its third evaluation attempt only (its gold
    // trajectory); every other attempt, at either task, submits at once (reward 0)
    scripted.script(`${runId}-eval-start-${TASKS[0]}-2`, [...(solvable.solution as ToolCall[]), { name: 'submit', arguments: {} } as ToolCall].map((c) => ({ text: renderToolCall(c) })));
    const cfg = parseRunConfig({
      name: 'pool-rule-test',
      tasks: { source: 'toy', include: TASKS },
      engines: { endpoints: [{ id: 'scripted', url: scripted.url, node: 'local' }] },
      trainer: { url: 'http://127.0.0.1:9' },
      rollout: { groupSize: 2, maxInFlight: 4, maxTurns: 6 },
      training: { groupsPerUpdate: 1000 },
      evaluation: { attempts: 4, atStart: true, poolFromStart: true },
    });
    await startRun(platform.client, cfg, { runId });
    const st = await eventually('training on the pool', () => getRunStatus(platform.client, runId), (s) => s.rolloutsFinished >= 2, 180_000);
    expect(st.evaluations).toEqual([{ label: 'start', version: 0, k: 4, tasks: 2, pass1: 0.125, passK: 0.5, pool: 1 }]);
    expect(st.pool.active).toBe(1);
    const evals = await listEvaluations(db, runId);
    expect(evals.map((e) => [e.taskId, e.solved, e.attempts, e.passK, e.inPool])).toEqual([[TASKS[0], 1, 4, 1, true], [TASKS[1], 0, 4, 0, false]]);
    const train = (await listRollouts(db, runId)).filter((r) => r.purpose === 'train');
    expect(new Set(train.map((r) => r.taskId))).toEqual(new Set([TASKS[0]]));
    await stop(platform.client, runId, 'test done');
    await eventually('the run to stop', () => getRunStatus(platform.client, runId), (s) => s.state === 'stopped', 120_000);
  }, 300_000);
});

describe('a worker killed with SIGKILL mid-run', () => {
  it('the run continues on a restarted worker; no rollout is lost or trained on twice', async () => {
    // its own process group: tsx runs the worker in a child process, and kill -9 must hit it
    const startWorker = (): ChildProcess => spawn(floeBin, ['worker', 'all'], { stdio: 'ignore', detached: true });
    const kill9 = (p: ChildProcess) => killGroup(p, 'SIGKILL');
    let worker = startWorker();
    const client = (await withWorkers([])).client;
    const own = await startGpu('b');
    try {
      const { runId } = await startRun(client, loopConfig({ updates: 3 }, own));
      await eventually('the first update', () => getRunStatus(client, runId), (s) => s.updatesDone >= 1, 300_000);
      kill9(worker);
      await new Promise((r) => setTimeout(r, 2000));
      worker = startWorker();
      const final = await client.workflow.getHandle(runWorkflowId(runId)).result();
      expect(final).toMatchObject({ state: 'completed', updatesDone: 3 });
      // let abandoned rollouts finish, then check the books
      await eventually('rollouts to settle', () => countRollouts(db, runId, { status: 'running' }), (n) => n === 0, 180_000);
      const integrity = await batchIntegrity(runId);
      expect(integrity.twice).toBe(0);
      expect(integrity.members).toBe(integrity.declared);
      const finished = new Set((await listRollouts(db, runId, { status: 'finished' })).map((r) => r.rolloutId));
      expect(integrity.ids.filter((id) => !finished.has(id))).toEqual([]);
    } finally {
      kill9(worker);
      await own.stop();
      await client.connection.close();
    }
  }, 900_000);
});
