import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import { CONTROL_QUEUE, sandboxQueue } from '../core/taskQueues.js';
import { parseRunConfig } from '../core/config.js';
import { renderToolCall } from '../core/tools.js';
import { SETTINGS_NOT_KEPT, SettingsKeeper } from '../core/generationSettings.js';
import { createTaskActivities } from '../activities/tasks.js';
import { createGenerateActivities } from '../activities/generate.js';
import { LiveRouter } from '../activities/router.js';
import { dbPool, closeDbPool } from '../store/pool.js';
import { insertRun } from '../store/runs.js';
import { workerConnection, temporalClient } from '../workers/connect.js';
import { workflowBundle } from '../workers/worker.js';
import { controlActivities, renderers } from '../workers/activities.js';
import type { RolloutInput, RolloutResult } from '../workflows/rollout.js';
import { settings } from './helpers/platform.js';
import { startScriptedEngine, scriptedRolloutSettings, type ScriptedEngine } from './helpers/scriptedEngine.js';
import { createSandboxDouble } from './helpers/sandboxDouble.js';

/** A turn names the rollout's generation settings by reference (core/generationSettings.ts):
 *  sent with the first turn, kept by the worker; a worker that no longer holds them (here: one
 *  that forgets them once, as a restarted worker would) answers SettingsNotKept and the rollout
 *  sends them again and goes on. Real rollout workflow, generation and Postgres; the sandbox is
 *  the double (no container is needed for this). */

const runId = `settings-ref-test-${process.pid}-${Date.now()}`;
const QUEUE = `settings-ref-test-${process.pid}`;
const HOST = `settings-ref-test-${process.pid}`;

/** Forgets what it holds the first time it is asked for it. */
class ForgetsOnce extends SettingsKeeper {
  forgot = 0;
  override get(ref: string) {
    if (this.forgot === 0) { this.forgot++; return null; }
    return super.get(ref);
  }
}

let client: Client;
let engine: ScriptedEngine;
let workers: Worker[] = [];
let running: Promise<unknown>;
const keeper = new ForgetsOnce();

beforeAll(async () => {
  const pool = dbPool(settings.postgres.url);
  await insertRun(pool, { runId, workflowId: runId, name: 'settings-ref-test', config: parseRunConfig({ name: 'settings-ref-test' }) });
  await createTaskActivities(pool).loadTaskPool({ source: 'toy', include: ['toy__caesar_wrap'], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
  engine = await startScriptedEngine();
  client = await temporalClient(settings);
  const connection = await workerConnection(settings);
  const common = { connection, namespace: settings.temporal.namespace };
  const bundle = await workflowBundle();
  const forgetful = { ...controlActivities(settings), ...createGenerateActivities(pool, new LiveRouter(), renderers(settings), keeper) };
  workers = [
    // the rollout and its generate activities on a queue of this test; its reward gate on floe's control queue
    await Worker.create({ ...common, taskQueue: QUEUE, workflowBundle: bundle, activities: forgetful }),
    await Worker.create({ ...common, taskQueue: CONTROL_QUEUE, workflowBundle: bundle, activities: controlActivities(settings) }),
    await Worker.create({ ...common, taskQueue: sandboxQueue(HOST), activities: createSandboxDouble({ createMs: 0, toolMs: 0, diffMs: 0, gradeMs: 0 }) }),
  ];
  running = Promise.all(workers.map((w) => w.run()));
}, 120_000);

afterAll(async () => {
  workers.forEach((w) => w.shutdown());
  await running;
  await engine?.close();
  await client?.connection.close();
  await closeDbPool();
});

async function generateInputs(workflowId: string): Promise<{ inputs: { turnIndex: number; settings?: unknown }[]; failures: string[] }> {
  const h = await client.workflow.getHandle(workflowId).fetchHistory();
  const inputs: { turnIndex: number; settings?: unknown }[] = [];
  const failures: string[] = [];
  for (const e of h.events ?? []) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s?.activityType?.name === 'generateTurn') inputs.push(JSON.parse(Buffer.from(s.input!.payloads![0].data!).toString('utf8')) as { turnIndex: number });
    const f = e.activityTaskFailedEventAttributes?.failure;
    if (f) failures.push(f.applicationFailureInfo?.type ?? f.message ?? '');
  }
  return { inputs, failures };
}

describe('generation settings by reference', () => {
  it('a worker that lost the settings answers SettingsNotKept; the rollout sends them again and passes', async () => {
    const rolloutId = `${runId}-0`;
    const bash = (i: number) => ({ text: renderToolCall({ name: 'bash', arguments: { command: `echo ${i}` } }) });
    engine.script(rolloutId, [bash(0), bash(1), bash(2), { text: renderToolCall({ name: 'submit', arguments: {} }) }]);
    const input: RolloutInput = { runId, rolloutId, taskId: 'toy__caesar_wrap', groupId: `${runId}-g`, attempt: 0, purpose: 'test', settings: scriptedRolloutSettings(engine.url, { maxTurns: 5, host: HOST }) };
    const workflowId = `floe-rollout-${rolloutId}`;
    const r: RolloutResult = await client.workflow.execute('rollout', { taskQueue: QUEUE, workflowId, args: [input] });
    expect(r).toMatchObject({ gate: 'passed', nTurns: 4 });
    const { inputs, failures } = await generateInputs(workflowId);
    expect(keeper.forgot).toBe(1);
    expect(failures).toEqual([SETTINGS_NOT_KEPT]);
    // turn 0 with the settings; turn 1 by reference (refused), again with them; turns 2 and 3 by reference
    expect(inputs.map((i) => [i.turnIndex, i.settings !== undefined])).toEqual([[0, true], [1, false], [1, true], [2, false], [3, false]]);
  });

  it('negative control: a worker that keeps them is asked once, every later turn by reference', async () => {
    const rolloutId = `${runId}-1`;
    engine.script(rolloutId, [{ text: renderToolCall({ name: 'bash', arguments: { command: 'echo a' } }) }, { text: renderToolCall({ name: 'submit', arguments: {} }) }]);
    const input: RolloutInput = { runId, rolloutId, taskId: 'toy__caesar_wrap', groupId: `${runId}-g`, attempt: 0, purpose: 'test', settings: scriptedRolloutSettings(engine.url, { maxTurns: 5, host: HOST }) };
    const workflowId = `floe-rollout-${rolloutId}`;
    const r: RolloutResult = await client.workflow.execute('rollout', { taskQueue: QUEUE, workflowId, args: [input] });
    expect(r).toMatchObject({ gate: 'passed', nTurns: 2 });
    const { inputs, failures } = await generateInputs(workflowId);
    expect(failures).toEqual([]);
    expect(inputs.map((i) => [i.turnIndex, i.settings !== undefined])).toEqual([[0, true], [1, false]]);
  });
});
