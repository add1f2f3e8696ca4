import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { adapterFor, type EngineEndpoint } from './engines/index.js';
import { beginEngineUpdate, getEngineWeights, insertEngineEvent, setEngineServing } from '../store/engines.js';
import { listRolloutTokens } from '../store/rollouts.js';
import type { Queryable } from '../store/pool.js';
import { modelFolder, verifyModelFolder } from './modelFolder.js';
import { rolloutSequence, type TurnTokens } from '../core/tokenPath.js';
import type { TrainingSample, TrainStepConfig, UpdateMode, WeightTransfer } from '../core/contracts.js';
import type { EngineAdapter, TransferMetadata } from './engines/adapter.js';

/** Activities of a GPU node's worker (task queue floe-gpu@<node>): the trainer and the
 *  inference engines that run on that node, over HTTP. */

export interface TrainStepInput {
  runId: string;
  /** The version this step publishes (current + 1); a retried activity finds it done. */
  version: number;
  trainerUrl: string;
  /** rolloutId → advantage (rollouts by reference: their tokens are read from Postgres). */
  advantages: Record<string, number>;
  /** The step's settings, from the run config (core/contracts.ts trainStepConfig). */
  config: TrainStepConfig;
}

export interface TrainStepResult { version: number; path: string; metrics: Record<string, number>; samples: number; trainMs: number }

function heartbeat(): void {
  try { Context.current().heartbeat(); } catch { /* called outside an activity (tests) */ }
}

/** Wait, heartbeating, until `url` answers at all (any HTTP status): a server that its
 *  supervisor (infra/engines.ts for the embedded default, the user's process manager elsewhere)
 *  is starting again comes back in seconds. After `ms` the error names the server and the fix. */
async function untilAnswering(url: string, what: string, ms = 180_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(5000) });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what} at ${url} has not answered for ${Math.round(ms / 1000)} s (${(err as Error).message}): start it again, or fix its address in the run's config`);
      heartbeat();
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
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

/** What the trainer says it applied against what the run config sent: null when they agree,
 *  else the fields that differ (a trainer that drops or rewrites a setting is refused, not
 *  trusted). */
export function settingsDiffer(sent: TrainStepConfig, applied: unknown): string | null {
  const got = (applied ?? {}) as Record<string, unknown>;
  const keys = [...new Set([...Object.keys(sent), ...Object.keys(got)])].sort();
  const off = keys.filter((k) => (sent as Record<string, unknown>)[k] !== got[k]).map((k) => `${k} ${JSON.stringify((sent as Record<string, unknown>)[k])} sent, ${JSON.stringify(got[k])} applied`);
  return off.length ? off.join('; ') : null;
}

/** One training sample per rollout (core/tokenPath.ts): the whole sequence, its loss mask,
 *  per-token behaviour log-probs and weight versions. Rollouts that generated nothing are left out. */
export async function rolloutSamples(db: Queryable, rolloutIds: string[], advantages: Record<string, number>): Promise<TrainingSample[]> {
  const rows = await listRolloutTokens(db, rolloutIds);
  const byRollout = new Map<string, { group_id: string; reward: number; turns: TurnTokens[] }>();
  for (const r of rows) {
    if (r.inputIds === null) throw new Error(`rollout ${r.rolloutId} has turns without their ids (turn_tokens.input_ids is null: rows from before migration 003); it cannot be trained on`);
    let e = byRollout.get(r.rolloutId);
    if (!e) byRollout.set(r.rolloutId, (e = { group_id: r.groupId, reward: r.reward, turns: [] }));
    e.turns.push({ inputIds: r.inputIds, completionIds: r.completionIds, logprobs: r.logprobs, versions: r.tokenVersions });
  }
  const out: TrainingSample[] = [];
  for (const [rolloutId, e] of byRollout) {
    const seq = rolloutSequence(e.turns);
    if (!seq.lossMask.includes(1)) continue;
    out.push({ rollout_id: rolloutId, group_id: e.group_id, reward: e.reward, advantage: advantages[rolloutId] ?? 0, ids: seq.ids, loss_mask: seq.lossMask, behaviour_logprobs: seq.logprobs, token_versions: seq.versions });
  }
  return out;
}


export interface LoadWeightsInput {
  /** The run whose record of engine versions this load updates. */
  runId: string;
  engine: EngineEndpoint;
  /** The published version folder (or its model.safetensors). */
  path: string;
  version: number;
  /** recipe.cacheRebuild: false = the engine keeps its caches after the load. */
  cacheRebuild: boolean;
  /** engines.updateMode: what the pause does to the requests a paused engine holds. */
  updateMode: UpdateMode;
  /** engines.weightTransfer: the published folder, or the trainer's broadcast into the server's own routes. */
  weightTransfer: WeightTransfer;
  /** The trainer that broadcasts (engines.weightTransfer 'broadcast'). */
  trainerUrl: string;
}

export interface LoadWeightsResult { engineId: string; loadMs: number; stages?: Record<string, number> }

export function createGpuActivities(pool: pg.Pool, opts: { batchDir: string }) {
  // A folder is hashed once per worker process, however many engines on this node load it.
  const verified = new Map<string, Promise<Awaited<ReturnType<typeof verifyModelFolder>>>>();
  const verifiedOnce = (folder: string) => {
    let v = verified.get(folder);
    if (!v) {
      v = verifyModelFolder(folder);
      verified.set(folder, v);
      v.catch(() => verified.delete(folder));
    }
    return v;
  };
  // One weight-transfer group per engine and trainer, formed on first use; a failed transfer
  // forgets it (a restarted server has left it), and the next attempt forms a new one.
  const groups = new Map<string, Promise<void>>();
  /** The trainer broadcasts version `input.version` into the engine's own weight-transfer routes
   *  (engines.weightTransfer 'broadcast'; engine/floe_engine/native_transfer.py). */
  async function broadcastInto(adapter: EngineAdapter, input: LoadWeightsInput, keepRequests: boolean): Promise<void> {
    const { transferWorkers, joinTransferGroup, receiveWeights } = adapter;
    if (!transferWorkers || !joinTransferGroup || !receiveWeights) {
      throw ApplicationFailure.nonRetryable(`engine ${input.engine.id} (${adapter.kind}) has no native weight transfer: set engines.weightTransfer to 'disk' (the reference engine always loads the published folder)`, 'EngineConfig');
    }
    const trainer = (route: string) => new URL(route, input.trainerUrl).href;
    const key = `${input.trainerUrl}|${input.engine.id}|${input.engine.url}`;
    let group = groups.get(key);
    if (!group) {
      group = (async () => {
        const workers = await transferWorkers.call(adapter);
        const opened = await post<{ master_address: string; master_port: number; backend: string }>(trainer('/weight_transfer/open'), { engine_id: input.engine.id, world_size: 1 + workers }, 60_000);
        await joinTransferGroup.call(adapter, { masterAddress: opened.master_address, masterPort: opened.master_port, rankOffset: 1, worldSize: 1 + workers, backend: opened.backend });
      })();
      groups.set(key, group);
    }
    try {
      await group;
      const meta = await post<TransferMetadata & { version: number }>(trainer('/weight_transfer/metadata'), {}, 60_000);
      if (meta.version !== input.version) throw new Error(`the trainer at ${input.trainerUrl} holds version ${meta.version}, not ${input.version}: it cannot broadcast this update (engines.weightTransfer 'disk' loads the published folder)`);
      await Promise.all([
        receiveWeights.call(adapter, meta, input.version, { keepRequests }),
        post(trainer('/weight_transfer/send'), { engine_id: input.engine.id, version: input.version }, 30 * 60_000),
      ]);
    } catch (err) {
      groups.delete(key);
      throw err;
    }
  }

  return {
    async trainStep(input: TrainStepInput): Promise<TrainStepResult> {
      type TrainerHealth = { version: number; path: string; busy: boolean };
      await untilAnswering(new URL('/health', input.trainerUrl).href, 'the trainer');
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
      // the advantages come from core/advantages.ts, negatives already scaled
      const samples = await rolloutSamples(pool, ids, input.advantages);
      if (samples.length === 0) throw new Error(`no tokens recorded for the ${ids.length} rollouts of batch v${input.version}`);
      fs.mkdirSync(path.join(opts.batchDir, input.runId), { recursive: true });
      const batchPath = path.join(opts.batchDir, input.runId, `v${input.version}.jsonl`);
      fs.writeFileSync(batchPath, samples.map((r) => JSON.stringify(r)).join('\n') + '\n');
      const started = Date.now();
      const res = await post<{ version: number; path: string; metrics: Record<string, number>; config: unknown }>(new URL('/train_step', input.trainerUrl).href, {
        batch_path: batchPath,
        config: input.config,
      }, 30 * 60_000);
      if (res.version !== input.version) throw new Error(`trainer published version ${res.version}, expected ${input.version}`);
      const differs = settingsDiffer(input.config, res.config);
      if (differs) throw ApplicationFailure.nonRetryable(`the trainer at ${input.trainerUrl} stepped to version ${res.version} with other settings than the run config's: ${differs}; run a trainer that speaks this floe's contract (engine/floe_engine/contract.py)`, 'TrainerContract');
      return { version: res.version, path: res.path, metrics: res.metrics, samples: samples.length, trainMs: Date.now() - started };
    },

    /** Load a published version into one engine. An engine that rebuilds in place (the
     *  reference engine) loads under running requests; any other is paused (its in-flight
     *  requests abort and are resubmitted by their generate activities), loads, flushes its
     *  prefix cache, and resumes, with floe's record of its version and epoch around that.
     *  With recipe.cacheRebuild off (`cacheRebuild: false`) nothing is flushed or rebuilt: the
     *  reference engine is asked to keep its caches, a paused engine is not flushed. */
    async loadWeights(input: LoadWeightsInput): Promise<LoadWeightsResult> {
      const started = Date.now();
      const beat = setInterval(heartbeat, 5000);
      try {
        const folder = modelFolder(input.path);
        const check = await verifiedOnce(folder);
        await untilAnswering(new URL('/health', input.engine.url).href, `engine ${input.engine.id}`);
        const adapter = await adapterFor(input.engine);
        const stages: Record<string, number> = { verify_ms: check.ms };
        const timed = async (name: string, fn: () => Promise<unknown>) => { const t = Date.now(); await fn(); stages[name] = Date.now() - t; };
        const before = await getEngineWeights(pool, input.runId, input.engine);
        if (before.state === 'serving' && before.version === input.version) return { engineId: input.engine.id, loadMs: 0, stages: { already_loaded: 1 } }; // a retried activity
        const keepCache = !input.cacheRebuild;
        if (keepCache) stages.kept_cache = 1;
        if (adapter.inPlaceUpdates) {
          await timed('load_ms', () => keepCache ? adapter.loadWeights(folder, input.version, { keepCache }) : adapter.loadWeights(folder, input.version));
        } else {
          // 'abort': every request in flight answers what it made and is resubmitted by its generate
          // activity; 'keep': the engine holds them, and the flush makes it recompute their K/V
          const keep = input.updateMode === 'keep';
          await beginEngineUpdate(pool, input.runId, input.engine);
          await timed('pause_ms', () => adapter.pause(keep ? 'keep' : 'abort'));
          if (input.weightTransfer === 'broadcast') await timed('load_ms', () => broadcastInto(adapter, input, keep));
          else await timed('load_ms', () => adapter.loadWeights(folder, input.version, { verified: true, keepRequests: keep })); // verifiedOnce above, on this node
          if (!keepCache) await timed('flush_ms', () => adapter.flushCache({ running: keep })); // recipe.cacheRebuild off: the prefix cache (and a kept request's K/V) keeps the old weights'
        }
        await setEngineServing(pool, input.runId, input.engine, input.version, folder);
        if (!adapter.inPlaceUpdates) await timed('resume_ms', () => adapter.resume());
        await insertEngineEvent(pool, { runId: input.runId, engineId: input.engine.id, event: 'weights_loaded', version: input.version, detail: { kind: adapter.kind, updateMode: adapter.inPlaceUpdates ? 'in_place' : input.updateMode, transfer: adapter.inPlaceUpdates ? 'disk' : input.weightTransfer, folder, files: check.files, bytes: check.bytes, ...stages } });
        return { engineId: input.engine.id, loadMs: Date.now() - started, stages };
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type GpuActivities = ReturnType<typeof createGpuActivities>;
