import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Settings } from './settings.js';
import type { Task } from '../core/taskModel.js';
import { renderObservation, renderPrompt, type TurnRecord } from '../core/harness.js';
import { renderToolCall, type ToolCall } from '../core/tools.js';
import { parseRunConfig } from '../core/config.js';
import { dockerFromSettings } from './docker.js';
import { sandboxImageTag } from './components/image.js';
import { createSandboxActivities, workerIdentity } from '../activities/sandbox.js';
import { log, mustRun } from './proc.js';

/** The SFT warm start of the embedded default: the gold trajectories of the toy tasks, run
 *  in real sandboxes so every observation is exactly what the harness will show, rendered
 *  with the harness's own prompt, then a short supervised pass of the tiny policy. Cached
 *  under FLOE_HOME/warmstart/<hash of data and settings>/v0. */

export interface WarmStartOptions { steps: number; lr: number; model: string; seed: number }

const TINY_CONTEXT = 1024;

export const DEFAULT_WARM_START: WarmStartOptions = { steps: 120, lr: 1e-3, model: 'tiny', seed: 0 };

export interface GoldPair { prompt: string; completion: string; taskId: string }

/** (prompt, completion) pairs of each task's gold trajectory, run in real sandboxes. */
export async function goldPairs(s: Settings, tasks: Task[]): Promise<GoldPair[]> {
  return (await goldTrajectories(s, tasks, () => false)).flat();
}

async function goldTrajectories(s: Settings, tasks: Task[], enough: (kept: GoldPair[][]) => boolean, keep: (t: GoldPair[]) => boolean = () => true): Promise<GoldPair[][]> {
  const cfg = parseRunConfig({});
  const docker = dockerFromSettings(s);
  const sandbox = createSandboxActivities(docker, { host: 'warmstart', image: sandboxImageTag(s), workerId: workerIdentity() });
  const kept: GoldPair[][] = [];
  for (const task of tasks) {
    if (enough(kept)) break;
    if (!task.solution) continue;
    const turns: TurnRecord[] = [];
    const pairs: GoldPair[] = [];
    const { containerId } = await sandbox.createSandbox({ runId: 'warmstart', rolloutId: `warmstart-${task.instanceId}`, task, limits: cfg.sandbox });
    try {
      for (const call of task.solution) {
        const completion = renderToolCall(call as ToolCall);
        pairs.push({ prompt: renderPrompt(task.problemStatement, turns), completion, taskId: task.instanceId });
        if (call.name !== 'bash') break;
        const r = await sandbox.execInSandbox({ containerId, command: String(call.arguments.command), timeoutSeconds: cfg.sandbox.commandTimeoutSeconds, maxOutputBytes: cfg.sandbox.maxOutputBytes });
        turns.push({ rawText: completion, observation: renderObservation(r, cfg.rollout.maxObservationChars, cfg.sandbox.commandTimeoutSeconds) });
      }
    } finally {
      await sandbox.destroySandbox({ containerId });
    }
    if (keep(pairs)) kept.push(pairs);
  }
  return kept;
}

const fits = (p: GoldPair) => Buffer.byteLength(p.prompt) + Buffer.byteLength(p.completion) + 1 <= TINY_CONTEXT;

/** The stress pool: the first `limit` candidates (0 = all) whose whole gold trajectory fits the
 *  tiny policy: every turn within its context and every reply (plus its end token) within the
 *  per-turn token budget. A task whose solution does not fit cannot be solved by that policy (the
 *  engine refuses the prompt, or the reply is cut off and fails the format gate as truncated),
 *  so it does not belong in a pool of solvable tasks. Returns the tasks and their gold pairs. */
export async function solvablePool(s: Settings, candidates: Task[], limit: number, maxTokensPerTurn: number): Promise<{ tasks: Task[]; pairs: GoldPair[]; tooLong: string[] }> {
  const tooLong: string[] = [];
  const replyFits = (p: GoldPair) => Buffer.byteLength(p.completion) + 1 <= maxTokensPerTurn;
  const kept = await goldTrajectories(s, candidates, (k) => limit > 0 && k.length >= limit, (t) => {
    const ok = t.length > 0 && t.every((p) => fits(p) && replyFits(p));
    if (!ok && t.length) tooLong.push(t[0].taskId);
    return ok;
  });
  if (tooLong.length) log('warmstart', `${tooLong.length} task(s) left out of the pool: their gold trajectory does not fit the ${TINY_CONTEXT}-byte context or the ${maxTokensPerTurn}-token reply budget (${tooLong.join(', ')})`);
  const ids = new Set(kept.map((t) => t[0].taskId));
  return { tasks: candidates.filter((t) => ids.has(t.instanceId)), pairs: kept.flat(), tooLong };
}

/** SFT of the tiny policy on gold pairs (those longer than its context are left out). */
export async function buildWarmStart(s: Settings, goldPairsOrTasks: GoldPair[] | Task[], opts: WarmStartOptions = DEFAULT_WARM_START): Promise<string> {
  const all = isPairs(goldPairsOrTasks) ? goldPairsOrTasks : await goldPairs(s, goldPairsOrTasks);
  const pairs = all.filter(fits);
  if (pairs.length < all.length) log('warmstart', `${all.length - pairs.length} gold turns longer than the ${TINY_CONTEXT}-byte context left out (${[...new Set(all.filter((p) => !fits(p)).map((p) => p.taskId))].join(', ')})`);
  const data = pairs.map((p) => JSON.stringify({ task_id: p.taskId, prompt: p.prompt, completion: p.completion })).join('\n') + '\n';
  const hash = crypto.createHash('sha256').update(data).update(JSON.stringify(opts)).digest('hex').slice(0, 16);
  const dir = path.join(s.home, 'warmstart', hash);
  const checkpoint = path.join(dir, 'v0');
  if (fs.existsSync(path.join(checkpoint, 'model.safetensors'))) {
    log('warmstart', `cached ${path.relative(process.cwd(), checkpoint)}`);
    return checkpoint;
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'gold.jsonl'), data);
  log('warmstart', `SFT on ${pairs.length} gold turns of ${new Set(pairs.map((p) => p.taskId)).size} tasks, ${opts.steps} steps…`);
  mustRun(s.python.bin, ['-m', 'floe_engine.sft', '--data', path.join(dir, 'gold.jsonl'), '--out', dir, '--steps', String(opts.steps), '--lr', String(opts.lr), '--model', opts.model, '--seed', String(opts.seed), '--eval', '16', '--threads', '1'],
    'the SFT warm start', { env: { ...process.env, OMP_NUM_THREADS: '1', FLOE_ENGINE_THREADS: '1' } }); // two threads were slower here (OpenBLAS spinning)
  return checkpoint;
}

function isPairs(x: GoldPair[] | Task[]): x is GoldPair[] {
  return x.length > 0 && 'completion' in x[0];
}
