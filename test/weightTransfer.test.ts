import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildWarmStart, type GoldTrajectory } from '../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { parseRunConfig } from '../core/config.js';
import { trainStepConfig, type EngineEndpoint, type TrainingSample } from '../core/contracts.js';
import { createGpuActivities, type LoadWeightsInput } from '../activities/gpu.js';
import { settings } from './helpers/platform.js';
import { rejection } from './helpers/rejection.js';
import { startVllmDouble, type VllmDouble } from './helpers/vllmDouble.js';
import { startSglangDouble, type SglangDouble } from './helpers/sglangDouble.js';

/** engines.weightTransfer 'broadcast': the trainer broadcasts a new version over a process group
 *  it hosts (gloo here, NCCL between GPUs) into vLLM's and SGLang's own weight-transfer routes,
 *  behind the gpu worker's load step. The doubles answer those routes as the pinned releases
 *  define them; their one worker is a real reference engine that joins the group and receives
 *  the bytes (engine/floe_engine/native_transfer.py), so the weights that serve afterwards are
 *  checked against the trainer's own. */

const EOS = 256;
const PROMPT = [...Buffer.from('weights over the wire: ')];
const COMPLETION = [...Buffer.from('broadcast')];
let db: pg.Pool;
let gpu: EmbeddedGpu;
let vllm: VllmDouble;
let sglang: SglangDouble;
let bare: VllmDouble;

async function post<T>(url: string, body: unknown): Promise<T> {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await r.text();
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** Log-probs of one fixed continuation, as a server (engine or trainer) scores it. */
const score = async (url: string) => (await post<{ logprobs: number[][] }>(`${url}/logprobs`, { samples: [{ prompt_ids: PROMPT, completion_ids: COMPLETION }] })).logprobs[0];

async function step(version: number): Promise<{ version: number; path: string }> {
  const sample: TrainingSample = {
    rollout_id: `wt-${version}`, group_id: 'wt', reward: 1, advantage: 1, ids: [...PROMPT, ...COMPLETION],
    loss_mask: [...PROMPT.map(() => 0), ...COMPLETION.map(() => 1)], behaviour_logprobs: [...PROMPT.map(() => 0), ...COMPLETION.map(() => -1)],
    token_versions: [...PROMPT.map(() => -1), ...COMPLETION.map(() => version - 1)],
  };
  return post(`${gpu.trainer!.url}/train_step`, { samples: [sample], config: trainStepConfig(parseRunConfig({ trainer: { lr: 1e-2 } }).trainer, version, 4) });
}

const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));

beforeAll(async () => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  const text = [...PROMPT, ...COMPLETION];
  const gold: GoldTrajectory[] = [{ taskId: 'weight-transfer', ids: [...text, EOS], lossMask: [...text.map((_, i) => (i < PROMPT.length ? 0 : 1)), 1], replies: [COMPLETION.length + 1] }];
  const checkpoint = await buildWarmStart(settings, gold, { steps: 2, lr: 1e-3, model: 'tiny', seed: 0, batchSize: 2 });
  gpu = await startEmbeddedGpu(settings, { count: 3, checkpoint, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-transfer`), trainer: true });
  vllm = await startVllmDouble({ backend: gpu.engines[0].url, launchCheckpoint: checkpoint });
  sglang = await startSglangDouble({ backend: gpu.engines[1].url, launchCheckpoint: checkpoint, returnOriginalLogprob: true });
  bare = await startVllmDouble({ backend: gpu.engines[2].url, launchCheckpoint: checkpoint, weightTransfer: false });
}, 600_000);

afterAll(async () => {
  await Promise.all([vllm?.close(), sglang?.close(), bare?.close()]);
  await gpu?.stop();
  await db?.end();
});

describe("weights over the servers' own transfer routes (engines.weightTransfer 'broadcast')", () => {
  it('two updates reach a vLLM and an SGLang server through their native routes; what serves afterwards is the trainer\'s weights', async () => {
    const gpuActs = createGpuActivities(db, { batchDir: path.join(repoRoot, '.floe', 'batches') });
    const runId = `wt-${randomUUID().slice(0, 8)}`;
    const engines: { e: EngineEndpoint; backend: string; d: VllmDouble | SglangDouble }[] = [
      { e: { id: 'vllm-0', url: vllm.url, node: 'local', kind: 'vllm' }, backend: gpu.engines[0].url, d: vllm },
      { e: { id: 'sglang-1', url: sglang.url, node: 'local', kind: 'sglang' }, backend: gpu.engines[1].url, d: sglang },
    ];
    for (const version of [1, 2]) {
      const published = await step(version);
      expect(published.version).toBe(version);
      const trainer = await score(gpu.trainer!.url);
      // negative control: before the load the engines serve the old weights
      for (const x of engines) expect(maxDiff(await score(x.backend), trainer)).toBeGreaterThan(1e-4);
      for (const x of engines) {
        const input: LoadWeightsInput = { runId, engine: x.e, path: published.path, version, cacheRebuild: true, updateMode: 'abort', weightTransfer: 'broadcast', trainerUrl: gpu.trainer!.url };
        const r = await gpuActs.loadWeights(input);
        expect(r.stages?.load_ms).toBeGreaterThanOrEqual(0);
      }
      for (const x of engines) expect(maxDiff(await score(x.backend), trainer)).toBeLessThan(1e-5);
    }
    const routes = (d: VllmDouble | SglangDouble) => d.requests.map((q) => q.route.split('?')[0]);
    // vLLM: joined once, then start → update_weights → finish per update; never the disk path
    expect(routes(vllm).filter((r) => r === '/init_weight_transfer_engine')).toHaveLength(1);
    expect(routes(vllm).filter((r) => ['/start_weight_update', '/update_weights', '/finish_weight_update'].includes(r))).toEqual(['/start_weight_update', '/update_weights', '/finish_weight_update', '/start_weight_update', '/update_weights', '/finish_weight_update']);
    expect(routes(vllm)).not.toContain('/collective_rpc');
    expect(vllm.requests.find((q) => q.route === '/update_weights')!.body).toMatchObject({ update_info: { src: 0 } });
    expect(((await (await fetch(`${vllm.url}/weight_info`)).json()) as { weight_version: string }).weight_version).toBe('2');
    // SGLang: the begin … end bracket 0.5.23 requires, the label in the update
    expect(routes(sglang).filter((r) => r === '/init_weights_update_group')).toHaveLength(1);
    expect(routes(sglang).filter((r) => ['/begin_weight_update', '/update_weights_from_distributed', '/end_weight_update'].includes(r))).toEqual(['/begin_weight_update', '/update_weights_from_distributed', '/end_weight_update', '/begin_weight_update', '/update_weights_from_distributed', '/end_weight_update']);
    expect(routes(sglang)).not.toContain('/update_weights_from_disk');
    expect(sglang.requests.filter((q) => q.route === '/update_weights_from_distributed').at(-1)!.body).toMatchObject({ weight_version: '2', group_name: 'floe_weight_transfer', flush_cache: false });
  }, 600_000);

  it('a vLLM server launched without --weight-transfer-config fails the broadcast with the launch-line fix', async () => {
    const gpuActs = createGpuActivities(db, { batchDir: path.join(repoRoot, '.floe', 'batches') });
    const health = await (await fetch(`${gpu.trainer!.url}/health`)).json() as { version: number; path: string };
    const input: LoadWeightsInput = { runId: `wt-${randomUUID().slice(0, 8)}`, engine: { id: 'vllm-bare', url: bare.url, node: 'local', kind: 'vllm' }, path: health.path, version: health.version, cacheRebuild: true, updateMode: 'abort', weightTransfer: 'broadcast', trainerUrl: gpu.trainer!.url };
    const err = await rejection(gpuActs.loadWeights(input));
    expect(err.message).toMatch(/Weight transfer not configured.*fix: launch vLLM with --weight-transfer-config/);
  }, 120_000);
});
