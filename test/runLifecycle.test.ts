import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker } from '@temporalio/worker';
import { chromium } from 'playwright-core';
import { temporal, temporalBin } from '../infra/components/temporal.js';
import { CHROMIUM } from '../infra/components/browser.js';
import { run } from '../infra/proc.js';
import { getRunStatus, runWorkflowId } from '../client/runs.js';
import { workflowsPath } from '../workers/worker.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { floe } from './helpers/cli.js';
import { eventually } from './helpers/wait.js';
import { recording, saveHistory } from './helpers/histories.js';
import { renderToolCall } from '../core/tools.js';
import { startScriptedEngine, type ScriptedEngine } from './helpers/scriptedEngine.js';
import { countRuns, getRun } from '../store/runs.js';
import { startTrainerDouble, type TrainerDouble } from './helpers/trainerDouble.js';

/** The platform end to end: the floe CLI starts, lists, pauses, resumes and stops a real run
 *  on the real Temporal server, Postgres follows, history survives a server restart, the Web
 *  UI shows the run, and recorded histories replay deterministically. */

const oneToyTask = ['--set', 'tasks.source=toy', '--set', 'tasks.include=["toy__c_to_f"]', '--set', 'tasks.excludeLooseTests=false'];
const outDir = path.join(import.meta.dirname, 'out');
let platform: Platform;
let db: pg.Pool;
/** Test double: every turn submits at once (a real rollout, graded, reward 0). */
let engine: ScriptedEngine;
/** Test double: a trainer at version 0, which `floe run start` checks for (cli/preflight.ts). */
let trainer: TrainerDouble;
const finished: string[] = [];

beforeAll(async () => {
  platform = await withWorkers(['control', 'sandbox']);
  engine = await startScriptedEngine({ fallback: { text: renderToolCall({ name: 'submit', arguments: {} }) } });
  trainer = await startTrainerDouble();
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  fs.mkdirSync(outDir, { recursive: true });
});
afterAll(async () => {
  await db?.end();
  await engine?.close();
  await trainer?.close();
  await platform?.close();
});

/** A small real run: rollouts against the scripted engine; no batch fills before the test
 *  stops it (groupsPerUpdate is large), so the trainer double (which answers /health only) does. */
const runArgs = () => ['--set', `engines.endpoints=[{"id":"scripted","url":"${engine.url}","node":"local"}]`, '--set', `trainer.url=${trainer.url}`,
  '--set', 'rollout.groupSize=2', '--set', 'rollout.maxInFlight=2', '--set', 'training.groupsPerUpdate=1000'];

async function startViaCli(name: string): Promise<string> {
  const r = (await floe(['run', 'start', '--set', `name=${name}`, ...oneToyTask, ...runArgs()]));
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  const m = /started run (\S+)/.exec(r.stdout);
  expect(m, r.stdout).not.toBeNull();
  expect(r.stdout).toContain(`${settings.temporal.uiUrl}/namespaces/default/workflows/floe-run-`);
  return m![1];
}

const dbStatus = (runId: string) => getRun(db, runId);

describe('runs through the floe CLI', () => {
  it('start, list (also in `temporal workflow list`), status, pause, resume, stop', async () => {
    const runId = await startViaCli('lifecycle');
    const listed = run(temporalBin(settings), ['workflow', 'list', '--address', settings.temporal.address, '--query', `WorkflowId = '${runWorkflowId(runId)}'`]);
    expect(listed.stdout).toContain(runWorkflowId(runId));
    expect((await floe(['run', 'list'])).stdout).toContain(runId);

    await eventually('the task pool to load', () => getRunStatus(platform.client, runId), (s) => s.pool.active === 1);
    expect((await floe(['run', 'status', runId])).stdout).toMatch(new RegExp(`${runId}: running`));
    expect((await floe(['run', 'pause', runId])).stdout).toContain('paused');
    expect((await dbStatus(runId))?.status).toBe('paused');
    expect((await floe(['run', 'resume', runId])).stdout).toContain('running');
    expect((await dbStatus(runId))?.status).toBe('running');
    expect((await floe(['run', 'stop', runId])).stdout).toMatch(/stopping|stopped/);
    await eventually('the run to stop', () => getRunStatus(platform.client, runId), (s) => s.state === 'stopped');
    const row = await dbStatus(runId);
    expect(row?.status).toBe('stopped');
    expect(row?.endedAt).not.toBeNull();
    const json = JSON.parse((await floe(['run', 'status', runId, '--json'])).stdout);
    expect(json).toMatchObject({ runId, state: 'stopped' });
    finished.push(runWorkflowId(runId));
  });

  it('refuses a bad config, naming the field, before anything runs', async () => {
    const before = await countRuns(db);
    const bad = path.join(outDir, 'bad-run.yaml');
    fs.writeFileSync(bad, 'rollout:\n  groupSize: -2\nengines:\n  router: fastest\n');
    const r = (await floe(['run', 'start', bad]));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/rollout\.groupSize: Too small/);
    expect(r.stderr).toMatch(/engines\.router: Invalid option/);
    const after = await countRuns(db);
    expect(after).toBe(before);
    const none = run(temporalBin(settings), ['workflow', 'count', '--address', settings.temporal.address, '--query', `WorkflowType = 'trainingRun' AND StartTime > '${new Date(Date.now() - 5000).toISOString()}'`]);
    expect(none.stdout).toMatch(/Total: 0/);
    expect((await floe(['run', 'frobnicate'])).stderr).toMatch(/unknown subcommand 'run frobnicate'/);
    expect((await floe(['run', 'status'])).stderr).toMatch(/needs a run id/);
  });

  it('refuses a bad task source at start, naming it, before anything runs', async () => {
    const before = await countRuns(db);
    const r = (await floe(['run', 'start', '--set', 'name=badsource', '--set', 'tasks.source=/no/such.jsonl', ...runArgs()]));
    expect(r.code).toBe(2);
    expect(r.stdout).not.toMatch(/started run/);
    expect(r.stderr).toMatch(/tasks\.source \/no\/such\.jsonl: no such file\n {4}fix: give a JSONL file of dataset rows/);
    expect(await countRuns(db)).toBe(before);
  });

  it('keeps history across a restart of the Temporal server', async () => {
    const runId = await startViaCli('survives-restart');
    await eventually('the task pool to load', () => getRunStatus(platform.client, runId), (s) => s.pool.active === 1);
    await temporal.down(settings);
    await temporal.up(settings);
    const desc = await eventually('the workflow after restart', () => platform.client.workflow.getHandle(runWorkflowId(runId)).describe(), (d) => d.status.name === 'RUNNING');
    expect(desc.workflowId).toBe(runWorkflowId(runId));
    // the worker reconnects by itself and the run goes on answering
    await eventually('status after restart', () => getRunStatus(platform.client, runId), (s) => s.state === 'running' && s.pool.active === 1, 90_000);
    expect((await floe(['run', 'stop', runId])).code).toBe(0);
    await eventually('the run to stop', () => getRunStatus(platform.client, runId), (s) => s.state === 'stopped');
    finished.push(runWorkflowId(runId));
  }, 180_000);

  it('the Temporal Web UI lists the run', async () => {
    const runId = await startViaCli('in-the-web-ui');
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage();
      await page.goto(`${settings.temporal.uiUrl}/namespaces/${settings.temporal.namespace}/workflows`);
      await page.getByText(runWorkflowId(runId)).first().waitFor({ timeout: 60_000 });
      await page.screenshot({ path: path.join(outDir, 'webui-workflows.png') });
    } finally {
      await browser.close();
      await floe(['run', 'stop', runId]);
    }
  }, 120_000);

  it('replays the recorded histories with the current workflow code', async () => {
    expect(finished.length).toBeGreaterThan(0);
    const histories = await Promise.all(finished.map(async (workflowId) => ({ workflowId, history: await platform.client.workflow.getHandle(workflowId).fetchHistory() })));
    for await (const result of Worker.runReplayHistories({ workflowsPath }, histories)) {
      expect(result.error, `${result.workflowId}: ${String(result.error)}`).toBeUndefined();
    }
    if (recording()) for (const h of histories) saveHistory(h.workflowId);
  });
});
