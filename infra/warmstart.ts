import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot, type Settings } from './settings.js';
import type { Task } from '../core/taskModel.js';
import { conversation, renderObservation, toolSchemas, type TurnRecord } from '../core/harness.js';
import { renderToolCall, type ToolCall } from '../core/tools.js';
import { parseRunConfig, type RunConfig } from '../core/config.js';
import { renderSpec } from '../core/renderSpec.js';
import { Renderers, resolveModel, resolveTokenizer } from '../activities/renderer.js';
import { dockerFromSettings } from './docker.js';
import { sandboxImageTag } from './components/image.js';
import { createSandboxActivities, workerIdentity } from '../activities/sandbox/index.js';
import { log, mustRun } from './proc.js';

/** The SFT warm start of the embedded default: the gold trajectories of the toy tasks, run
 *  in real sandboxes so every observation is exactly what the harness will show, rendered
 *  to token ids by the run's own renderer (tokenizer + chat template, as rollouts are: one
 *  sequence per trajectory, the loss mask over the replies), then a short supervised pass.
 *  Cached under FLOE_HOME/warmstart/<hash of data and settings>/v0. */

/** batchSize: trajectories per SFT step (sampled with replacement; default 16). */
export interface WarmStartOptions { steps: number; lr: number; model: string; seed: number; batchSize?: number }

/** What the rendering of a trajectory depends on (from the run config's policy and rollout). */
export interface PolicySetup { model: string; tokenizer: string; chatTemplate: string; contextTokens: number; systemPrompt: string }

export function policySetup(cfg: RunConfig): PolicySetup {
  return { model: cfg.policy.model, tokenizer: cfg.policy.tokenizer, chatTemplate: cfg.policy.chatTemplate, contextTokens: cfg.policy.contextTokens, systemPrompt: cfg.rollout.systemPrompt };
}

const DEFAULTS = parseRunConfig({});
export const DEFAULT_SETUP: PolicySetup = policySetup(DEFAULTS);

/** A gold trajectory as the model would produce it: the whole token sequence, the loss mask
 *  over its replies, and each reply's length in tokens (end-of-turn token included). */
export interface GoldTrajectory { taskId: string; ids: number[]; lossMask: number[]; replies: number[] }

const renderPaths = (s: Settings) => ({ python: s.python.bin, home: s.home, repoRoot });

async function goldTrajectories(s: Settings, tasks: Task[], setup: PolicySetup, enough: (kept: GoldTrajectory[]) => boolean, keep: (t: GoldTrajectory) => boolean = () => true): Promise<GoldTrajectory[]> {
  const docker = dockerFromSettings(s);
  const sandbox = createSandboxActivities(docker, { host: 'warmstart', image: sandboxImageTag(s), workerId: workerIdentity() });
  const renderers = new Renderers(renderPaths(s));
  const cfg = DEFAULTS;
  const tools = toolSchemas();
  const kept: GoldTrajectory[] = [];
  try {
    const r = await renderers.get(renderSpec(setup));
    for (const task of tasks) {
      if (enough(kept)) break;
      if (!task.solution) continue;
      const turns: TurnRecord[] = [];
      const t: GoldTrajectory = { taskId: task.instanceId, ids: [], lossMask: [], replies: [] };
      const add = (ids: number[], mask: 0 | 1) => { t.ids.push(...ids); t.lossMask.push(...ids.map(() => mask)); };
      const { containerId } = await sandbox.createSandbox({ runId: 'warmstart', rolloutId: `warmstart-${task.instanceId}`, task, limits: cfg.sandbox });
      try {
        add((await r.start(conversation(setup.systemPrompt, task.problemStatement, turns), tools)).ids, 0);
        for (const call of task.solution) {
          const completion = renderToolCall(call as ToolCall);
          const reply = await r.assistantIds(completion);
          add(reply, 1);
          t.replies.push(reply.length);
          if (call.name !== 'bash') break;
          const res = await sandbox.execInSandbox({ containerId, command: String(call.arguments.command), timeoutSeconds: cfg.sandbox.commandTimeoutSeconds, maxOutputBytes: cfg.sandbox.maxOutputBytes });
          turns.push({ rawText: completion, observation: renderObservation(res, cfg.rollout.maxObservationChars, cfg.sandbox.commandTimeoutSeconds) });
          add((await r.continuation(conversation(setup.systemPrompt, task.problemStatement, turns), tools)).ids, 0);
        }
      } finally {
        await sandbox.destroySandbox({ containerId });
      }
      if (keep(t)) kept.push(t);
    }
  } finally {
    await renderers.closeAll();
  }
  return kept;
}

/** The stress pool: the first `limit` candidates (0 = all) whose whole gold trajectory fits the
 *  policy: the sequence within its context and every reply (with its end token) within the
 *  per-turn token budget. A task whose solution does not fit cannot be solved by that policy (the
 *  engine refuses the prompt, or the reply is cut off and fails the format gate as truncated),
 *  so it does not belong in a pool of solvable tasks. Returns the tasks and their trajectories. */
export async function solvablePool(s: Settings, candidates: Task[], limit: number, maxTokensPerTurn: number, setup: PolicySetup = DEFAULT_SETUP): Promise<{ tasks: Task[]; trajectories: GoldTrajectory[]; tooLong: string[] }> {
  const tooLong: string[] = [];
  const kept = await goldTrajectories(s, candidates, setup, (k) => limit > 0 && k.length >= limit, (t) => {
    const ok = t.replies.length > 0 && t.ids.length <= setup.contextTokens && t.replies.every((n) => n <= maxTokensPerTurn);
    if (!ok && t.replies.length) tooLong.push(t.taskId);
    return ok;
  });
  if (tooLong.length) log('warmstart', `${tooLong.length} task(s) left out of the pool: their gold trajectory does not fit the ${setup.contextTokens}-token context or the ${maxTokensPerTurn}-token reply budget (${tooLong.join(', ')})`);
  const ids = new Set(kept.map((t) => t.taskId));
  return { tasks: candidates.filter((t) => ids.has(t.instanceId)), trajectories: kept, tooLong };
}

/** SFT of the policy on gold trajectories (those longer than its context are left out). */
export async function buildWarmStart(s: Settings, trajectoriesOrTasks: GoldTrajectory[] | Task[], opts: WarmStartOptions, setup: PolicySetup = { ...DEFAULT_SETUP, model: opts.model }): Promise<string> {
  const all = isTrajectories(trajectoriesOrTasks) ? trajectoriesOrTasks : await goldTrajectories(s, trajectoriesOrTasks, setup, () => false);
  const fits = (t: GoldTrajectory) => t.ids.length <= setup.contextTokens;
  const kept = all.filter(fits);
  if (kept.length < all.length) log('warmstart', `${all.length - kept.length} gold trajectories longer than the ${setup.contextTokens}-token context left out (${all.filter((t) => !fits(t)).map((t) => t.taskId).join(', ')})`);
  const data = kept.map((t) => JSON.stringify({ task_id: t.taskId, ids: t.ids, loss_mask: t.lossMask })).join('\n') + '\n';
  const tokenizer = resolveTokenizer(setup.tokenizer, renderPaths(s));
  // the model's own code is part of the key: a kernel change gives other weights from the same data
  const modelCode = fs.readFileSync(path.join(repoRoot, 'engine', 'floe_engine', 'model.py'));
  const hash = crypto.createHash('sha256').update(data).update(JSON.stringify(opts)).update(tokenizer).update(modelCode).digest('hex').slice(0, 16);
  const dir = path.join(s.home, 'warmstart', hash);
  const checkpoint = path.join(dir, 'v0');
  if (fs.existsSync(path.join(checkpoint, 'model.safetensors'))) {
    log('warmstart', `cached ${path.relative(process.cwd(), checkpoint)}`);
    return checkpoint;
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'gold.jsonl'), data);
  log('warmstart', `SFT on ${kept.length} gold trajectories (${kept.reduce((n, t) => n + t.replies.length, 0)} replies), ${opts.steps} steps…`);
  mustRun(s.python.bin, ['-m', 'floe_engine.sft', '--data', path.join(dir, 'gold.jsonl'), '--out', dir, '--steps', String(opts.steps), '--batch-size', String(opts.batchSize ?? 16), '--lr', String(opts.lr), '--model', resolveModel(opts.model, s), '--tokenizer', tokenizer, '--seed', String(opts.seed), '--eval', '16', '--threads', '1',
    // the SFT ends with this process: a demo killed with SIGKILL mid-SFT leaves none training on
    '--parent-pid', String(process.pid)],
    'the SFT warm start', { env: { ...process.env, OMP_NUM_THREADS: '1', FLOE_ENGINE_THREADS: '1' } }); // two threads were slower here (OpenBLAS spinning)
  return checkpoint;
}

function isTrajectories(x: GoldTrajectory[] | Task[]): x is GoldTrajectory[] {
  return x.length > 0 && 'lossMask' in x[0];
}
