import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { Client } from '@temporalio/client';
import { parseRunConfig, type RunConfig } from '../../core/config.js';
import { getRunStatus, runWorkflowId, startRun } from '../../client/runs.js';
import { selectTasks } from '../../tasks/loaders.js';
import { buildWarmStart } from '../../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu, type PythonServer, type RestartEvent } from '../../infra/engines.js';
import { repoRoot } from '../../infra/settings.js';
import { dockerFromSettings } from '../../infra/docker.js';
import { temporal } from '../../infra/components/temporal.js';
import { postgres } from '../../infra/components/postgres.js';
import { temporalClient } from '../../workers/connect.js';
import { listBatchMembers, listPolicyVersions } from '../../store/batches.js';
import { settings } from '../helpers/platform.js';
import { floeBin, killGroup } from '../helpers/cli.js';
import { eventually } from '../helpers/wait.js';
import { chaosCase, type ChaosOutcome } from '../helpers/chaos.js';

/** Crashes during a real run (issue 17): one training run on the embedded default's parts —
 *  the reference engines and trainer (a briefly warm-started tiny policy on CPU), podman
 *  sandboxes, the Temporal server and Postgres — with the control, sandbox and gpu workers in
 *  processes of their own, as a deployment runs them. One after another, each once the run has
 *  recovered from the one before: kill -9 of the control worker, of the sandbox worker while a
 *  sandbox runs, of an engine in the middle of a request, of the trainer in the middle of a
 *  step; a stop and restart of the Temporal server, then of Postgres. A killed worker is
 *  started again (a process manager's job); a dead engine or trainer is started again by the
 *  embedded supervisor (infra/engines.ts); nothing else is touched. After each, the run must
 *  finish an update by itself. At the end Postgres must account for every rollout exactly
 *  once: each rollout workflow Temporal ran has a row, none is left running, none is in two
 *  batches, every batch member finished, and the versions are 1..N, each once. */

const TASKS = ['toy__caesar_wrap', 'toy__hex_pad'];
/** Enough for the run to outlast the six crashes: an update of this policy takes a few seconds. */
const UPDATES = 80;
let db: pg.Pool;
let gpu: EmbeddedGpu;
let client: Client;
let runId = '';
const restarts: RestartEvent[] = [];
const workers = new Map<string, ChildProcess>();

// each in its own process group: tsx runs the worker in a child process, and kill -9 must hit both
const startWorker = (role: string): void => { workers.set(role, spawn(floeBin, ['worker', role], { stdio: 'ignore', detached: true })); };
const kill9Group = (p: ChildProcess | undefined) => { if (p) killGroup(p, 'SIGKILL'); };
// detached workers outlive this file if it is ended early; they must not take other tests' jobs
const killWorkers = () => { for (const w of workers.values()) kill9Group(w); };
process.once('exit', killWorkers);
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => { killWorkers(); process.exit(130); });
const kill9 = (p: PythonServer) => { try { process.kill(p.process.pid!, 'SIGKILL'); } catch { /* gone */ } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function crashConfig(g: EmbeddedGpu): RunConfig {
  return parseRunConfig({
    name: 'chaos-crash',
    tasks: { source: 'toy', include: TASKS },
    engines: { endpoints: g.engines.map((e, i) => ({ id: `engine-${i}`, url: e.url, node: 'local' })) },
    trainer: { url: g.trainer!.url, lr: 1e-3 },
    rollout: { groupSize: 2, maxInFlight: 4, maxTurns: 2 },
    training: { groupsPerUpdate: 2, updates: UPDATES },
    eviction: { enabled: false },
    evaluation: { atStart: false, atEnd: false },
  });
}

/** The run is still going (Postgres: the runs row), and how far it got. */
async function going(): Promise<number> {
  const r = (await db.query<{ status: string; v: number | null }>('select status, (select max(version) from policy_versions where run_id = $1) as v from runs where run_id = $1', [runId])).rows[0];
  expect(r?.status, 'the run ended before this crash: raise UPDATES').toBe('running');
  return r.v ?? 0;
}

/** Recovered: an update landed whose batch holds a rollout that started after the crash (so
 *  it needed the parts restarted since); seconds from the crash to that update. */
async function recovers(what: string, crashedAt: Date, ms = 300_000): Promise<number> {
  const rows = await eventually(`an update with a rollout started after ${what}`, async () => (await db.query<{ s: number | null }>(
    `select extract(epoch from min(pv.created_at) - $2::timestamptz)::float8 as s from policy_versions pv
      where pv.run_id = $1 and exists (select 1 from batch_members bm join rollouts r using (rollout_id)
                                        where bm.run_id = pv.run_id and bm.version = pv.version and r.started_at > $2)`, [runId, crashedAt])).rows, (r) => r[0]?.s !== null, ms);
  return Math.round((rows[0].s ?? 0) * 10) / 10;
}

/** Poll `probe` every few ms until it says now; false when `ms` passed without. */
async function catchMoment(probe: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return true;
    await sleep(10);
  }
  return false;
}

const health = async <T>(s: PythonServer): Promise<T> => (await fetch(new URL('/health', s.url), { signal: AbortSignal.timeout(2000) })).json() as Promise<T>;

beforeAll(async () => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  db.on('error', () => undefined); // Postgres is restarted on purpose below
  const tasks = selectTasks({ source: 'toy', include: TASKS, limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
  const checkpoint = await buildWarmStart(settings, tasks, { steps: 20, lr: 3e-3, model: 'tiny', seed: 0 });
  gpu = await startEmbeddedGpu(settings, { count: 2, checkpoint, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-chaos`), onRestart: (e) => restarts.push(e) });
  for (const role of ['control', 'sandbox', 'gpu']) startWorker(role);
  client = await temporalClient(settings);
  runId = (await startRun(client, crashConfig(gpu))).runId;
  await eventually('the first update', () => getRunStatus(client, runId), (s) => s.updatesDone >= 1, 300_000);
}, 600_000);

afterAll(async () => {
  killWorkers();
  await gpu?.stop();
  await client?.connection.close();
  await db?.end();
});

describe('crashes during a real run: it carries on by itself', () => {
  chaosCase('crash', 'kill -9 of the control worker', async () => {
    await going();
    const at = new Date();
    kill9Group(workers.get('control'));
    await sleep(1000);
    startWorker('control');
    const seconds = await recovers('the control worker was killed', at);
    return { detail: `a new control worker took the run's workflow tasks and activities over; an update with rollouts started since landed ${seconds} s after the kill`, facts: { seconds } };
  }, 400_000);

  chaosCase('crash', 'kill -9 of the sandbox worker while sandboxes run', async () => {
    const docker = dockerFromSettings(settings);
    const live = () => docker.listContainers({ filters: { label: [`floe.run=${runId}`, 'floe.role=agent'] } });
    expect(await catchMoment(async () => (await live()).length > 0, 120_000)).toBe(true);
    const running = (await live()).length;
    await going();
    const at = new Date();
    kill9Group(workers.get('sandbox'));
    await sleep(1000);
    startWorker('sandbox');
    const seconds = await recovers('the sandbox worker was killed', at);
    return { detail: `killed with ${running} sandbox(es) of the run open; their activities timed out on heartbeats and ran again on the new worker; an update with rollouts started since landed ${seconds} s after the kill`, facts: { sandboxesAtKill: running, seconds } };
  }, 400_000);

  chaosCase('crash', 'kill -9 of an engine in the middle of a request', async () => {
    const engine = gpu.engines[0];
    const mid = await catchMoment(async () => (await health<{ running: number }>(engine)).running > 0, 120_000);
    expect(mid).toBe(true);
    await going();
    const at = new Date();
    kill9(engine);
    await eventually('the supervisor to start the engine again', async () => engine.restarts, (n) => n >= 1, 120_000);
    const seconds = await recovers('an engine was killed', at);
    // back with its launch weights, it got the run's version again — from the router's resync,
    // or from the next weight update, which waits for it — and then served requests again
    const loaded = await eventually('the engine to get the run\'s weights back', async () => (await db.query<{ event: string; version: number; at: Date }>(
      `select event, version, at from engine_events where run_id = $1 and engine_id = 'engine-0' and event in ('resynced', 'weights_loaded') and at > $2 order by at limit 1`, [runId, at])).rows, (r) => r.length > 0, 300_000);
    const served = await eventually('the engine to serve again', async () => (await db.query<{ n: number }>(
      `select count(*)::int as n from engine_events where run_id = $1 and engine_id = 'engine-0' and event = 'placed' and at > $2`, [runId, loaded[0].at])).rows[0].n, (n) => n > 0, 300_000);
    const how = loaded[0].event === 'resynced' ? 'floe\'s router loaded the run\'s' : 'the next weight update (which waited for it) loaded';
    return { detail: `killed with a request running; the supervisor started it again on its port, ${how} v${loaded[0].version} into it and it served ${served} request(s) since; an update with rollouts started since landed ${seconds} s after the kill`, facts: { seconds, backWith: loaded[0].event, version: loaded[0].version, placedSince: served } };
  }, 400_000);

  chaosCase('crash', 'kill -9 of the trainer in the middle of a step', async () => {
    const trainer = gpu.trainer!;
    let mid = false;
    // a step of this tiny policy is short: catch one busy (a few updates' worth of tries)
    for (let tries = 0; tries < 4 && !mid; tries++) mid = await catchMoment(async () => (await health<{ busy: boolean }>(trainer)).busy, 90_000);
    expect(mid).toBe(true);
    const policyVersion = await going();
    const at = new Date();
    kill9(trainer);
    await eventually('the supervisor to start the trainer again', async () => trainer.restarts, (n) => n >= 1, 120_000);
    const seconds = await recovers('the trainer was killed', at);
    const back = restarts.find((r) => r.server.name === 'trainer' && !r.gaveUp);
    return { detail: `killed while stepping v${policyVersion + 1}; the supervisor started it from ${path.basename(back?.checkpoint ?? '?')}, the train-step activity waited for it and stepped again; an update with rollouts started since landed ${seconds} s after the kill`, facts: { seconds, restartedFrom: back ? path.basename(back.checkpoint) : null } };
  }, 400_000);

  chaosCase('crash', 'stop and restart of the Temporal server', async () => {
    await going();
    const at = new Date();
    await temporal.down(settings);
    await sleep(2000);
    await temporal.up(settings);
    const seconds = await recovers('the Temporal server restarted', at);
    return { detail: `the workers reconnected by themselves and the run went on from its history; an update with rollouts started since landed ${seconds} s after the stop`, facts: { seconds } };
  }, 400_000);

  chaosCase('crash', 'stop and restart of Postgres', async () => {
    await going();
    const at = new Date();
    await postgres.down(settings);
    await sleep(3000);
    await postgres.up(settings);
    const seconds = await recovers('Postgres restarted', at);
    return { detail: `activities that wrote meanwhile failed and were retried; an update with rollouts started since landed ${seconds} s after the stop`, facts: { seconds } };
  }, 400_000);

  chaosCase('crash', 'the books after every crash: each rollout once, versions contiguous', async (): Promise<ChaosOutcome> => {
    const final = await client.workflow.getHandle(runWorkflowId(runId)).result();
    expect(final).toMatchObject({ state: 'completed', updatesDone: UPDATES });
    // rollouts the run left behind at its end finish by themselves
    await eventually('every rollout workflow of the run to close', async () => {
      let open = 0;
      for await (const _ of client.workflow.list({ query: `FloeRunId = '${runId}' AND FloeKind = 'rollout' AND ExecutionStatus = 'Running'` })) open++;
      return open;
    }, (n) => n === 0, 300_000);
    const ran = new Set<string>();
    for await (const w of client.workflow.list({ query: `FloeRunId = '${runId}' AND FloeKind = 'rollout'` })) ran.add(w.workflowId);
    const rows = (await db.query<{ rollout_id: string; workflow_id: string | null; status: string }>('select rollout_id, workflow_id, status from rollouts where run_id = $1', [runId])).rows
      .map((r) => ({ rolloutId: r.rollout_id, workflowId: r.workflow_id, status: r.status }));
    const byWorkflow = new Set(rows.map((r) => r.workflowId));
    const noRow = [...ran].filter((w) => !byWorkflow.has(w));
    const stillRunning = rows.filter((r) => r.status === 'running').map((r) => r.rolloutId);
    const members = await listBatchMembers(db, runId);
    const ids = members.map((m) => m.rolloutId);
    const countedTwice = ids.length - new Set(ids).size;
    const finished = new Set(rows.filter((r) => r.status === 'finished').map((r) => r.rolloutId));
    const unfinishedMembers = ids.filter((id) => !finished.has(id));
    const versions = (await listPolicyVersions(db, runId)).map((v) => v.version).filter((v) => v > 0);
    const declared = (await listPolicyVersions(db, runId)).reduce((n, v) => n + (v.batchRollouts ?? 0), 0);
    const rolloutsLost = noRow.length + stillRunning.length;
    expect({ noRow, stillRunning, countedTwice, unfinishedMembers, declaredVsMembers: declared - members.length }).toEqual({ noRow: [], stillRunning: [], countedTwice: 0, unfinishedMembers: [], declaredVsMembers: 0 });
    expect(versions).toEqual(Array.from({ length: UPDATES }, (_, i) => i + 1));
    const byStatus = Object.fromEntries(['finished', 'failed', 'discarded'].map((st) => [st, rows.filter((r) => r.status === st).length]));
    // nothing of the run's left in the container engine
    const docker = dockerFromSettings(settings);
    const left = await eventually('the run\'s sandboxes to be gone', () => docker.listContainers({ all: true, filters: { label: [`floe.run=${runId}`] } }), (l) => l.length === 0, 120_000);
    return {
      detail: `${rows.length} rollouts in Postgres for the ${ran.size} rollout workflows Temporal ran (${byStatus.finished} finished, ${byStatus.failed} failed with a reason, ${byStatus.discarded} discarded), none left running, none in two batches; versions 1..${UPDATES} each once; ${left.length} containers left`,
      rolloutsLost, countedTwice,
      facts: { runId, rollouts: rows.length, workflows: ran.size, ...byStatus, batchMembers: members.length, restarts: restarts.map((r) => ({ server: r.server.name, exit: r.exit, from: r.checkpoint ? path.basename(r.checkpoint) : null, gaveUp: r.gaveUp ?? null })) },
    };
  }, 600_000);
});
