import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig, type RunConfig } from '../core/config.js';
import { renderToolCall } from '../core/tools.js';
import { getRunStatus, runWorkflowId, startRun, stop } from '../client/runs.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { startDevServer, type DevServer } from './helpers/devServer.js';
import { startScriptedEngine, type ScriptedEngine } from './helpers/scriptedEngine.js';
import { eventually } from './helpers/wait.js';
import { continuedRunId, recording, saveHistory } from './helpers/histories.js';
import { countRollouts } from '../store/rollouts.js';

/** A training run continues as new when Temporal suggests it (workflowInfo().continueAsNewSuggested,
 *  the server's own measure of the history), once nothing is in flight, and goes on with its
 *  state. A dev server of this file's own sets the suggestion low
 *  (limit.historyCount.suggestContinueAsNew); negative control: on the shared server, with
 *  Temporal's default threshold, the same run does not continue as new. */

const SUGGEST_AT_EVENTS = 60;
let scripted: ScriptedEngine;
let server: DevServer;
let platform: Platform;
let db: pg.Pool;

const config = (): RunConfig => parseRunConfig({
  name: 'continue-as-new-test',
  tasks: { source: 'toy', include: ['toy__caesar_wrap'] },
  engines: { endpoints: [{ id: 'scripted', url: scripted.url, node: 'local' }] },
  trainer: { url: 'http://127.0.0.1:9' },
  rollout: { groupSize: 2, maxInFlight: 2, maxTurns: 2 },
  training: { groupsPerUpdate: 1000 },
});

/** The rollouts a stopped run abandoned have finished (their sandboxes are gone). */
const settled = (runId: string) => eventually('its rollouts to finish', () => countRollouts(db, runId, { status: 'running' }), (n) => n === 0, 120_000);

beforeAll(async () => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  scripted = await startScriptedEngine({ fallback: { text: renderToolCall({ name: 'submit', arguments: {} }) } });
  server = await startDevServer(settings, { 'limit.historyCount.suggestContinueAsNew': SUGGEST_AT_EVENTS });
  platform = await withWorkers(['control', 'sandbox'], server.settings);
}, 180_000);

afterAll(async () => {
  await platform?.close();
  await server?.stop();
  await scripted?.close();
  await db?.end();
});

describe('continue-as-new', () => {
  it('when Temporal suggests it: drains, continues as new, and goes on', async () => {
    const { runId } = await startRun(platform.client, config());
    const st = await eventually('a continue-as-new', () => getRunStatus(platform.client, runId), (s) => s.continuedAsNew >= 1 && s.rolloutsFinished >= 8, 180_000);
    expect(st.state).toBe('running');
    const first = await platform.client.workflow.getHandle(runWorkflowId(runId), await continuedRunId(platform.client, runWorkflowId(runId))).fetchHistory();
    // the run drained before it continued: no rollout was in flight across the new run
    expect(first.events!.length).toBeGreaterThan(SUGGEST_AT_EVENTS);
    await stop(platform.client, runId, 'test done');
    await eventually('the run to stop', () => getRunStatus(platform.client, runId), (s) => s.state === 'stopped', 120_000);
    await settled(runId);
    // a replay fixture of the run that continued as new (test/replay.test.ts)
    if (recording()) saveHistory(runWorkflowId(runId), { runId: await continuedRunId(platform.client, runWorkflowId(runId)), settings: server.settings });
  }, 300_000);

  it('negative control: with Temporal\'s default threshold the same run does not continue as new', async () => {
    const shared = await withWorkers(['control', 'sandbox']);
    try {
      const { runId } = await startRun(shared.client, config());
      const st = await eventually('as many rollouts', () => getRunStatus(shared.client, runId), (s) => s.rolloutsFinished >= 8, 180_000);
      expect(st.continuedAsNew).toBe(0);
      await stop(shared.client, runId, 'test done');
      await eventually('the run to stop', () => getRunStatus(shared.client, runId), (s) => s.state === 'stopped', 120_000);
      await settled(runId);
    } finally {
      await shared.close();
    }
  }, 300_000);
});
