import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { Context } from '@temporalio/activity';
import { updateWeights, type EngineEndpoint } from './engineClient.js';
import type { RunConfig } from '../core/config.js';
import { rolloutSequence, type TurnTokens } from '../core/tokenPath.js';

/** Activities of a GPU node's worker (task queue floe-gpu@<node>): the trainer and the
 *  inference engines that run on that node, over HTTP. */

export type TrainStepSettings = Pick<RunConfig['trainer'], 'lr' | 'clipLow' | 'clipHigh'> & Partial<Pick<RunConfig['trainer'], 'negativeScale' | 'epochs' | 'minibatches'>>;

export interface TrainStepInput {
  runId: string;
  /** The version this step publishes (current + 1); a retried activity finds it done. */
  version: number;
  trainerUrl: string;
  /** rolloutId → advantage (rollouts by reference: their tokens are read from Postgres). */
  advantages: Record<string, number>;
  /** The trainer section's step settings (the recipe knobs are optional: histories recorded before they existed). */
  config: TrainStepSettings;
}

export interface TrainStepResult { version: number; path: string; metrics: Record<string, number>; samples: number; trainMs: number }

function heartbeat(): void {
  try { Context.current().heartbeat(); } catch { /* called outside an activity (tests) */ }
}

async function post<T>(url: string, body: unknown, timeoutMs: number): Promise<T> {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  const beat = setInterval(heartbeat, 5000);
  try {
    const res = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal: ctrl.signal });
    const text = await res.text();
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as T;
  } finally {
    clearTimeout(timer);
    clearInterval(beat);
  }
}

/** One training sample per rollout (core/tokenPath.ts): the whole sequence, its loss mask,
 *  per-token behaviour log-probs and weight versions. Rollouts that generated nothing are left out. */
export async function rolloutSamples(pool: pg.Pool, rolloutIds: string[], advantages: Record<string, number>): Promise<TrainingSample[]> {
  const rows = await pool.query<{ rollout_id: string; group_id: string; reward: number; turn_index: number; input_ids: number[] | null; completion_ids: number[]; logprobs: number[]; token_versions: number[] }>(
    `select r.rollout_id, r.group_id, r.reward, t.turn_index, t.input_ids, t.completion_ids, t.logprobs, t.token_versions
     from turn_tokens t join rollouts r using (rollout_id)
     where r.rollout_id = any($1) order by r.rollout_id, t.turn_index`, [rolloutIds]);
  const byRollout = new Map<string, { group_id: string; reward: number; turns: TurnTokens[] }>();
  for (const r of rows.rows) {
    if (r.input_ids === null) throw new Error(`rollout ${r.rollout_id} was recorded before the token path (turn_tokens.input_ids is null); it cannot be trained on`);
    let e = byRollout.get(r.rollout_id);
    if (!e) byRollout.set(r.rollout_id, (e = { group_id: r.group_id, reward: r.reward, turns: [] }));
    e.turns.push({ inputIds: r.input_ids, completionIds: r.completion_ids, logprobs: r.logprobs, versions: r.token_versions });
  }
  const out: TrainingSample[] = [];
  for (const [rolloutId, e] of byRollout) {
    const seq = rolloutSequence(e.turns);
    if (!seq.lossMask.includes(1)) continue;
    out.push({ rollout_id: rolloutId, group_id: e.group_id, reward: e.reward, advantage: advantages[rolloutId] ?? 0, ids: seq.ids, loss_mask: seq.lossMask, behaviour_logprobs: seq.logprobs, token_versions: seq.versions });
  }
  return out;
}

/** A row of the trainer's batch file (engine/floe_engine/trainer.py reads it). */
export interface TrainingSample { rollout_id: string; group_id: string; reward: number; advantage: number; ids: number[]; loss_mask: number[]; behaviour_logprobs: number[]; token_versions: number[] }

export function createGpuActivities(pool: pg.Pool, opts: { batchDir: string }) {
  return {
    async trainStep(input: TrainStepInput): Promise<TrainStepResult> {
      type TrainerHealth = { version: number; path: string; busy: boolean };
      let health = await (await fetch(new URL('/health', input.trainerUrl))).json() as TrainerHealth;
      while (health.busy) {
        // an earlier attempt of this activity may still be stepping: let it finish first
        heartbeat();
        await new Promise((r) => setTimeout(r, 1000));
        health = await (await fetch(new URL('/health', input.trainerUrl))).json() as TrainerHealth;
      }
      if (health.version === input.version) {
        // The step ran but this activity did not report it (worker crash): do not step twice.
        return { version: health.version, path: health.path, metrics: {}, samples: 0, trainMs: 0 };
      }
      if (health.version !== input.version - 1) throw new Error(`trainer at ${input.trainerUrl} is at version ${health.version} and the run at ${input.version - 1}; they must agree (restart the trainer from the run's checkpoint)`);
      const ids = Object.keys(input.advantages);
      const samples = await rolloutSamples(pool, ids, input.advantages);
      if (samples.length === 0) throw new Error(`no tokens recorded for the ${ids.length} rollouts of batch v${input.version}`);
      fs.mkdirSync(path.join(opts.batchDir, input.runId), { recursive: true });
      const batchPath = path.join(opts.batchDir, input.runId, `v${input.version}.jsonl`);
      fs.writeFileSync(batchPath, samples.map((r) => JSON.stringify(r)).join('\n') + '\n');
      const started = Date.now();
      const res = await post<{ version: number; path: string; metrics: Record<string, number> }>(new URL('/train_step', input.trainerUrl).href, {
        batch_path: batchPath,
        config: {
          lr: input.config.lr, clip_low: input.config.clipLow, clip_high: input.config.clipHigh, advantage: 'given',
          negative_scale: input.config.negativeScale ?? 1, epochs: input.config.epochs ?? 1, minibatches: input.config.minibatches ?? 1,
        },
      }, 30 * 60_000);
      if (res.version !== input.version) throw new Error(`trainer published version ${res.version}, expected ${input.version}`);
      return { version: res.version, path: res.path, metrics: res.metrics, samples: samples.length, trainMs: Date.now() - started };
    },

    async loadWeights(input: { engine: EngineEndpoint; path: string; version: number }): Promise<{ engineId: string; loadMs: number }> {
      const started = Date.now();
      const beat = setInterval(heartbeat, 5000);
      const r = await updateWeights(input.engine, { path: input.path, version: input.version }).finally(() => clearInterval(beat));
      if (!r.ok || r.version !== input.version) throw new Error(`engine ${input.engine.id} did not load version ${input.version}: ${JSON.stringify(r)}`);
      return { engineId: input.engine.id, loadMs: Date.now() - started };
    },
  };
}

export type GpuActivities = ReturnType<typeof createGpuActivities>;
