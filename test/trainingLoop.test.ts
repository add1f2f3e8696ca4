import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig, type RunConfig } from '../core/config.js';
import { renderToolCall } from '../core/tools.js';
import { getRunStatus, runWorkflowId, startRun, stop } from '../client/runs.js';
import { selectTasks } from '../tasks/loaders.js';
import { buildWarmStart } from '../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { startScriptedEngine, type ScriptedEngine } from './helpers/scriptedEngine.js';
import { floeBin } from './helpers/cli.js';
import { eventually } from './helpers/wait.js';

/** The asynchronous loop on real parts: Temporal, Postgres, podman sandboxes, and the
 *  reference engines and trainer (a briefly warm-started tiny policy on CPU). */

const TASKS = ['toy__caesar_wrap', 'toy__hex_pad'];
let db: pg.Client;
let gpu: EmbeddedGpu;
let checkpoint: string;
let scripted: ScriptedEngine;

/** Engines and trainer of a run must start at the run's version 0: one set per run. */
const startGpu = (tag: string) => startEmbeddedGpu(settings, { count: 2, checkpoint, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-${tag}`), lr: 1e-3 });

function loopConfig(over: Partial<RunConfig['training']> = {}, g: EmbeddedGpu = gpu): RunConfig {
  return parseRunConfig({
    name: 'loop-test',
    tasks: { source: 'toy', include: TASKS },
    engines: { endpoints: g.engines.map((e, i) => ({ id: `engine-${i}`, url: e.url, node: 'local' })) },
    trainer: { url: g.trainer!.url, lr: 1e-3 },
    rollout: { groupSize: 2, maxInFlight: 4, maxTurns: 2 },
    training: { groupsPerUpdate: 1, updates: 2, ...over },
    eviction: { enabled: true, masteredK: 2, hopelessM: 2, recheckEvery: 1, recheckAttempts: 1 },
  });
}

async function batchIntegrity(runId: string) {
  const twice = await db.query('select rollout_id from batch_members where run_id = $1 group by rollout_id having count(*) > 1', [runId]);
  const members = await db.query<{ n: number }>('select count(*)::int as n from batch_members where run_id = $1', [runId]);
  const declared = await db.query<{ n: number }>('select coalesce(sum(batch_rollouts), 0)::int as n from policy_versions where run_id = $1', [runId]);
  return { twice: twice.rowCount, members: members.rows[0].n, declared: declared.rows[0].n };
}

beforeAll(async () => {
  db = new pg.Client({ connectionString: settings.postgres.url });
  await db.connect();
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
    const versions = await db.query('select version, batch_rollouts, metrics, load_ms, update_ms from policy_versions where run_id = $1 order by version', [runId]);
    expect(versions.rows.map((r) => r.version)).toEqual([1, 2]);
    for (const v of versions.rows) {
      expect(v.batch_rollouts).toBeGreaterThanOrEqual(2);
      expect(v.metrics.mismatch_mean_abs_logprob).toBeLessThan(1e-3); // fp32 engine and trainer agree
      expect(Object.keys(v.load_ms).sort()).toEqual(['engine-0', 'engine-1']);
    }
    for (const e of gpu.engines) expect((await (await fetch(`${e.url}/health`)).json()).version).toBe(2);
    expect(await batchIntegrity(runId)).toMatchObject({ twice: 0 });
    const { members, declared } = await batchIntegrity(runId);
    expect(members).toBe(declared);
    const placed = await db.query(`select engine_id, count(*)::int as n from engine_events where run_id = $1 and event = 'placed' group by engine_id`, [runId]);
    expect(placed.rowCount).toBe(2); // least-loaded spread the work over both engines
    const tokens = await db.query(`select tt.token_versions from turn_tokens tt join rollouts r using (rollout_id) where r.run_id = $1`, [runId]);
    expect(tokens.rows.flatMap((r) => r.token_versions as number[]).every((v) => v >= 0 && v <= 2)).toBe(true);
  }, 600_000);

  it('continues as new before its history grows long, and goes on', async () => {
    const cfg = parseRunConfig({
      name: 'continue-as-new-test',
      tasks: { source: 'toy', include: [TASKS[0]] },
      engines: { endpoints: [{ id: 'scripted', url: scripted.url, node: 'local' }] },
      trainer: { url: 'http://127.0.0.1:9' },
      rollout: { groupSize: 2, maxInFlight: 2, maxTurns: 2 },
      training: { groupsPerUpdate: 1000, historyEventLimit: 40 },
    });
    const { runId } = await startRun(platform.client, cfg);
    const st = await eventually('a continue-as-new', () => getRunStatus(platform.client, runId), (s) => s.continuedAsNew >= 1 && s.rolloutsFinished >= 4, 180_000);
    expect(st.state).toBe('running');
    await stop(platform.client, runId, 'test done');
    await eventually('the run to stop', () => getRunStatus(platform.client, runId), (s) => s.state === 'stopped', 120_000);
  }, 300_000);
});

describe('a worker killed with SIGKILL mid-run', () => {
  it('the run continues on a restarted worker; no rollout is lost or trained on twice', async () => {
    // its own process group: tsx runs the worker in a child process, and kill -9 must hit it
    const startWorker = (): ChildProcess => spawn(floeBin, ['worker', 'all'], { stdio: 'ignore', detached: true });
    const kill9 = (p: ChildProcess) => { try { process.kill(-p.pid!, 'SIGKILL'); } catch { /* gone */ } };
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
      await eventually('rollouts to settle', async () => (await db.query(`select count(*)::int as n from rollouts where run_id = $1 and status = 'running'`, [runId])).rows[0].n, (n) => n === 0, 180_000);
      const integrity = await batchIntegrity(runId);
      expect(integrity.twice).toBe(0);
      expect(integrity.members).toBe(integrity.declared);
      const trained = await db.query(`select count(*)::int as n from batch_members b join rollouts r using (rollout_id) where b.run_id = $1 and r.status <> 'finished'`, [runId]);
      expect(trained.rows[0].n).toBe(0);
    } finally {
      kill9(worker);
      await own.stop();
      await client.connection.close();
    }
  }, 900_000);
});
