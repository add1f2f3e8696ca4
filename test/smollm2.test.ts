import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../core/config.js';
import { SYSTEM_PROMPT } from '../core/harness.js';
import { checkRawOutput, DEFAULT_SPECIAL_TOKEN_TEXTS } from '../core/toolFormat.js';
import { runWorkflowId, startRun } from '../client/runs.js';
import { selectTasks } from '../tasks/loaders.js';
import { buildWarmStart, solvablePool, type GoldTrajectory, type PolicySetup } from '../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { modelsDir } from '../infra/components/models.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { listPolicyVersions } from '../store/batches.js';
import { listRollouts } from '../store/rollouts.js';

/** A real pretrained checkpoint through floe: SmolLM2-135M-Instruct, built by `floe up --test`
 *  (the models component: the pinned GGUF converted by transformers' loader), served by the
 *  reference engine with its own tokenizer and the tools-over-ChatML template of
 *  configs/smollm2-cpu.yaml. It knows things (greedy " Paris"), the correct tool call is cheap
 *  under that template, a short SFT warm start on the gold trajectories gives well-formed tool
 *  calls among sampled replies, and one update runs through real sandboxes, the trainer, a
 *  publish and the engine's load. Figures go to test/out/smollm2.json. */

const NAME = 'smollm2-135m-instruct';
const MODEL = `hf:model:${NAME}`;
const setup: PolicySetup = { model: MODEL, tokenizer: `model:${NAME}`, chatTemplate: 'configs/templates/smollm2.jinja', contextTokens: 4096, systemPrompt: SYSTEM_PROMPT };
const TASKS = ['toy__caesar_wrap', 'toy__hex_pad'];
const MAX_TOKENS = 160;
const SAMPLES = 8; // sampled first replies per task, before and after the warm start
const WARM_STEPS = 8;
const WARM_LR = 1e-3; // sft.py warms up over 20 steps: over these 8 the rate peaks at 1.1e-4 (step 4)

interface Completion { text: string; token_ids: number[]; finish_reason: string }
interface TokInfo { eos_token_id: number; stop_token_ids: number[]; special_token_ids: number[]; special_token_texts: string[] }

const post = async <T>(url: string, body: unknown): Promise<T> => {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
};

/** The first turn of a gold trajectory: the prompt (up to the first trained token) and the reply. */
function firstTurn(t: GoldTrajectory): { prompt: number[]; reply: number[] } {
  const start = t.lossMask.indexOf(1);
  return { prompt: t.ids.slice(0, start), reply: t.ids.slice(start, start + t.replies[0]) };
}

/** The share of sampled first replies that pass the format gate, judged as activities/generate.ts judges a turn. */
async function wellFormedShare(url: string, prompts: number[][]): Promise<{ share: number; reasons: Record<string, number> }> {
  const info = ((await (await fetch(`${url}/health`)).json()) as { tokenizer: TokInfo }).tokenizer;
  const reasons: Record<string, number> = {};
  let ok = 0;
  let n = 0;
  for (const prompt of prompts) {
    const res = await post<{ choices: Completion[] }>(`${url}/v1/completions`, { prompt, n: SAMPLES, max_tokens: MAX_TOKENS, temperature: 1.0, seed: 0, stop_token_ids: info.stop_token_ids });
    for (const c of res.choices) {
      const ids = c.token_ids;
      const stopped = c.finish_reason === 'stop' && info.stop_token_ids.includes(ids[ids.length - 1]);
      const endToken = stopped ? ids[ids.length - 1] : info.eos_token_id;
      const text = (await post<{ prompt: string }>(`${url}/detokenize`, { tokens: stopped ? ids.slice(0, -1) : ids })).prompt;
      const v = checkRawOutput({
        text, tokenIds: ids, finishReason: c.finish_reason, eosTokenId: endToken,
        specialTokenIds: [...new Set([...info.special_token_ids, ...info.stop_token_ids])].filter((t) => t !== endToken),
        specialTokenTexts: [...new Set([...DEFAULT_SPECIAL_TOKEN_TEXTS, ...info.special_token_texts])],
      });
      n += 1;
      if (v.ok) ok += 1;
      else reasons[v.reason] = (reasons[v.reason] ?? 0) + 1;
    }
  }
  return { share: ok / n, reasons };
}

/** The same ids with each reply's tokens in reverse order (its end-of-turn token kept last). */
function reverseReplies(ids: number[], mask: number[]): number[] {
  const out = [...ids];
  for (let i = 0; i < ids.length;) {
    if (mask[i] !== 1) { i += 1; continue; }
    let j = i;
    while (j < ids.length && mask[j] === 1) j += 1;
    out.splice(i, j - 1 - i, ...ids.slice(i, j - 1).reverse());
    i = j;
  }
  return out;
}

const meanCost = (lps: number[][]) => { const all = lps.flat(); return -all.reduce((a, b) => a + b, 0) / all.length; };

let db: pg.Pool;
let gpu: EmbeddedGpu | undefined;
let platform: Platform | undefined;
let gold: GoldTrajectory[];
const figures: Record<string, unknown> = {};

beforeAll(async () => {
  const folder = path.join(modelsDir(settings), NAME);
  if (!fs.existsSync(path.join(folder, 'floe_build.json'))) throw new Error(`no checkpoint at ${folder}: run \`floe models\` (floe up --test builds it)`);
  figures.build = JSON.parse(fs.readFileSync(path.join(folder, 'floe_build.json'), 'utf8'));
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  const tasks = selectTasks({ source: 'toy', include: TASKS, limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
  const pool = await solvablePool(settings, tasks, 0, MAX_TOKENS, setup);
  expect(pool.tasks.map((t) => t.instanceId).sort()).toEqual(TASKS);
  gold = pool.trajectories;
  // the pretrained weights as converted (no floe checkpoint: the engine loads the folder)
  gpu = await startEmbeddedGpu(settings, { count: 1, checkpoint: '', trainer: false, model: MODEL, tokenizer: setup.tokenizer, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-smollm2-base`) });
}, 900_000);

afterAll(async () => {
  fs.mkdirSync(path.join(repoRoot, 'test', 'out'), { recursive: true });
  fs.writeFileSync(path.join(repoRoot, 'test', 'out', 'smollm2.json'), `${JSON.stringify(figures, null, 2)}\n`);
  await platform?.close();
  await gpu?.stop();
  await db?.end();
});

describe('SmolLM2-135M-Instruct, converted from its GGUF file', () => {
  it('greedy, completes "The capital of France is" with " Paris" (control: not for Germany)', async () => {
    const url = gpu!.engines[0].url;
    const greedy = async (prompt: string) => (await post<{ choices: Completion[] }>(`${url}/v1/completions`, { prompt, max_tokens: 3, temperature: 0 })).choices[0].text;
    const france = await greedy('The capital of France is');
    const germany = await greedy('The capital of Germany is');
    figures.greedy = { france, germany };
    expect(france.startsWith(' Paris')).toBe(true);
    expect(germany.startsWith(' Paris')).toBe(false);
  }, 120_000);

  it('correct tool-call replies cost it under 2 nats a token under its template (control: the same tokens reversed cost more)', async () => {
    const url = gpu!.engines[0].url;
    const score = async (samples: unknown[]) => (await post<{ logprobs: number[][] }>(`${url}/logprobs`, { samples })).logprobs;
    // every reply of the gold trajectories (the fix, then submit), each in its place in the conversation
    const cost = meanCost(await score(gold.map((t) => ({ ids: t.ids, loss_mask: t.lossMask }))));
    const first = meanCost(await score(gold.map(firstTurn).map((t) => ({ prompt_ids: t.prompt, completion_ids: t.reply }))));
    const reversed = meanCost(await score(gold.map((t) => ({ ids: reverseReplies(t.ids, t.lossMask), loss_mask: t.lossMask }))));
    figures.toolCallCost = { natsPerToken: cost, firstReplyOnly: first, reversedControl: reversed, replyTokens: gold.map((t) => t.lossMask.filter((m) => m === 1).length) };
    expect(cost).toBeLessThan(2);
    expect(reversed).toBeGreaterThan(2);
  }, 300_000);

  it('a short SFT warm start raises the share of well-formed tool calls among sampled replies above zero', async () => {
    const prompts = gold.map((t) => firstTurn(t).prompt);
    const before = await wellFormedShare(gpu!.engines[0].url, prompts);
    await gpu!.stop();
    gpu = undefined;
    const t0 = Date.now();
    const checkpoint = await buildWarmStart(settings, gold, { steps: WARM_STEPS, lr: WARM_LR, model: MODEL, seed: 0, batchSize: 1 }, setup);
    const warmSeconds = (Date.now() - t0) / 1000;
    gpu = await startEmbeddedGpu(settings, { count: 1, checkpoint, model: MODEL, tokenizer: setup.tokenizer, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-smollm2`) });
    const after = await wellFormedShare(gpu.engines[0].url, prompts);
    figures.warmStart = { steps: WARM_STEPS, lr: WARM_LR, batchSize: 1, seconds: warmSeconds, samples: SAMPLES * prompts.length, before, after };
    expect(after.share).toBeGreaterThan(0);
  }, 900_000);

  it('one update through real sandboxes: train → publish → the engine loads v1; engine and trainer agree within 1e-4 (fp32)', async () => {
    expect(gpu?.trainer).toBeTruthy(); // started by the warm-start test
    platform = await withWorkers(['control', 'sandbox', 'gpu']);
    const config = parseRunConfig({
      name: 'smollm2-test',
      tasks: { source: 'toy', include: TASKS },
      policy: { model: MODEL, tokenizer: setup.tokenizer, chatTemplate: setup.chatTemplate, contextTokens: setup.contextTokens, maxTokensPerTurn: MAX_TOKENS },
      engines: { endpoints: gpu!.engines.map((e, i) => ({ id: `engine-${i}`, url: e.url, node: 'local' })) },
      trainer: { url: gpu!.trainer!.url, lr: 1e-5, advantage: 'reward' },
      rollout: { groupSize: 2, maxInFlight: 2, maxTurns: 2, maxTotalTokens: 4096 },
      training: { groupsPerUpdate: 1, updates: 1 },
      eviction: { enabled: false },
    });
    const t0 = Date.now();
    const { runId } = await startRun(platform.client, config);
    const final = await platform.client.workflow.getHandle(runWorkflowId(runId)).result();
    expect(final).toMatchObject({ state: 'completed', policyVersion: 1, updatesDone: 1 });
    const h = await (await fetch(`${gpu!.engines[0].url}/health`)).json();
    expect(h.version).toBe(1);
    expect(h.tokenizer).toMatchObject({ kind: 'hf', name: NAME, eos_token_id: 2 });
    expect(h.tokenizer.special_token_ids).toContain(1); // <|im_start|>: banned inside a reply by the gate
    const versions = await listPolicyVersions(db, runId);
    expect(versions.map((r) => r.version)).toEqual([1]);
    const m = versions[0].metrics!;
    figures.update = { seconds: (Date.now() - t0) / 1000, mismatch_mean_abs_logprob: m.mismatch_mean_abs_logprob, masked_tokens: m.masked_tokens };
    expect(m.mismatch_mean_abs_logprob).toBeLessThan(1e-4);
    expect(m.masked_tokens).toBeGreaterThan(0);
    const finished = await listRollouts(db, runId, { status: 'finished' });
    figures.update = { ...(figures.update as object), finished: finished.length, meanReward: finished.reduce((n, r) => n + (r.reward ?? 0), 0) / Math.max(1, finished.length) };
    expect(finished.length).toBeGreaterThanOrEqual(2);
  }, 1_200_000);
});
