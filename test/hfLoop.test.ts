import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../core/config.js';
import { SYSTEM_PROMPT } from '../core/harness.js';
import { runWorkflowId, startRun } from '../client/runs.js';
import { selectTasks } from '../tasks/loaders.js';
import { buildWarmStart, solvablePool, type PolicySetup } from '../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { listPolicyVersions } from '../store/batches.js';
import { listRollouts, listRunTurnTokens } from '../store/rollouts.js';

/** A real model's token path through the whole loop, on this machine's CPU: a small
 *  random-init Qwen3-architecture model (configs/models/qwen3-cpu.json) with Qwen's real
 *  248k-token vocabulary and floe's Qwen3-style chat template, warm-started by SFT on the
 *  gold trajectories rendered by that template, two reference engines and the trainer, real
 *  sandboxes and grading, two weight updates. */

const MODEL = 'hf:configs/models/qwen3-cpu.json';
const setup: PolicySetup = { model: MODEL, tokenizer: 'builtin:qwen3.6', chatTemplate: '', contextTokens: 4096, systemPrompt: SYSTEM_PROMPT };
const TASKS = ['toy__caesar_wrap', 'toy__hex_pad'];
let db: pg.Pool;
let gpu: EmbeddedGpu;
let platform: Platform;

beforeAll(async () => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  const tasks = selectTasks({ source: 'toy', include: TASKS, limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
  const pool = await solvablePool(settings, tasks, 0, 96, setup);
  expect(pool.tasks.map((t) => t.instanceId).sort()).toEqual(TASKS);
  const checkpoint = await buildWarmStart(settings, pool.trajectories, { steps: 400, lr: 3e-3, model: MODEL, seed: 0, batchSize: 2 }, setup);
  gpu = await startEmbeddedGpu(settings, { count: 2, checkpoint, model: MODEL, tokenizer: setup.tokenizer, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-hf`) });
  platform = await withWorkers(['control', 'sandbox', 'gpu']);
}, 900_000);

afterAll(async () => {
  await platform?.close();
  await gpu?.stop();
  await db?.end();
});

describe('a Qwen3-architecture policy with the real vocabulary', () => {
  it('trains through the loop: engines serve v2, engine and trainer agree within 1e-4, the warm start earns reward', async () => {
    const config = parseRunConfig({
      name: 'hf-loop-test',
      tasks: { source: 'toy', include: TASKS },
      policy: { model: MODEL, tokenizer: setup.tokenizer, contextTokens: setup.contextTokens, maxTokensPerTurn: 96 },
      engines: { endpoints: gpu.engines.map((e, i) => ({ id: `engine-${i}`, url: e.url, node: 'local' })) },
      trainer: { url: gpu.trainer!.url, lr: 1e-4, advantage: 'reward' },
      rollout: { groupSize: 4, maxInFlight: 8, maxTurns: 4, maxTotalTokens: 4096 },
      training: { groupsPerUpdate: 2, updates: 2 },
      eviction: { enabled: false },
    });
    const { runId } = await startRun(platform.client, config);
    const final = await platform.client.workflow.getHandle(runWorkflowId(runId)).result();
    expect(final).toMatchObject({ state: 'completed', policyVersion: 2, updatesDone: 2 });
    for (const e of gpu.engines) {
      const h = await (await fetch(`${e.url}/health`)).json();
      expect(h.version).toBe(2);
      expect(h.tokenizer).toMatchObject({ kind: 'hf', name: 'qwen3.6' });
    }
    const versions = await listPolicyVersions(db, runId);
    expect(versions.map((r) => r.version)).toEqual([1, 2]);
    // matched numerics (fp32 on CPU): the trainer's logprobs of the batch = the engines' behaviour logprobs
    expect(versions[0].metrics!.mismatch_mean_abs_logprob).toBeLessThan(1e-4);
    expect(versions[0].metrics!.masked_tokens).toBeGreaterThan(0);
    // the real vocabulary: generated ids beyond any byte range
    const ids = (await listRunTurnTokens(db, runId)).flatMap((t) => t.completionIds);
    expect(ids.reduce((m, x) => Math.max(m, x), 0)).toBeGreaterThan(248000);
    const finished = await listRollouts(db, runId, { status: 'finished' });
    expect(finished.length).toBeGreaterThanOrEqual(16);
    expect(finished.reduce((n, r) => n + (r.reward ?? 0), 0)).toBeGreaterThan(0);
  }, 1_200_000);
});
