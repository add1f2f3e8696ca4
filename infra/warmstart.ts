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

/** (prompt, completion) pairs of each task's gold trajectory. */
export async function goldPairs(s: Settings, tasks: Task[]): Promise<{ prompt: string; completion: string; taskId: string }[]> {
  const cfg = parseRunConfig({});
  const docker = dockerFromSettings(s);
  const sandbox = createSandboxActivities(docker, { host: 'warmstart', image: sandboxImageTag(s), workerId: workerIdentity() });
  const pairs: { prompt: string; completion: string; taskId: string }[] = [];
  for (const task of tasks) {
    if (!task.solution) continue;
    const turns: TurnRecord[] = [];
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
  }
  return pairs;
}

export async function buildWarmStart(s: Settings, tasks: Task[], opts: WarmStartOptions = DEFAULT_WARM_START): Promise<string> {
  const all = await goldPairs(s, tasks);
  // The tiny policy's context is 1024 bytes; turns that do not fit cannot be learned (the
  // engine refuses such prompts, and the rollout ends on its token budget).
  const pairs = all.filter((p) => Buffer.byteLength(p.prompt) + Buffer.byteLength(p.completion) + 1 <= TINY_CONTEXT);
  if (pairs.length < all.length) log('warmstart', `${all.length - pairs.length} gold turns longer than the ${TINY_CONTEXT}-byte context left out (${[...new Set(all.filter((p) => !pairs.includes(p)).map((p) => p.taskId))].join(', ')})`);
  const data = pairs.map((p) => JSON.stringify({ prompt: p.prompt, completion: p.completion })).join('\n') + '\n';
  const hash = crypto.createHash('sha256').update(data).update(JSON.stringify(opts)).digest('hex').slice(0, 16);
  const dir = path.join(s.home, 'warmstart', hash);
  const checkpoint = path.join(dir, 'v0');
  if (fs.existsSync(path.join(checkpoint, 'model.safetensors'))) {
    log('warmstart', `cached ${path.relative(process.cwd(), checkpoint)}`);
    return checkpoint;
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'gold.jsonl'), data);
  log('warmstart', `SFT on ${pairs.length} gold turns of ${tasks.length} tasks, ${opts.steps} steps…`);
  mustRun(s.python.bin, ['-m', 'floe_engine.sft', '--data', path.join(dir, 'gold.jsonl'), '--out', dir, '--steps', String(opts.steps), '--lr', String(opts.lr), '--model', opts.model, '--seed', String(opts.seed), '--eval', '16', '--threads', '1'],
    'the SFT warm start', { env: { ...process.env, OMP_NUM_THREADS: '1', FLOE_ENGINE_THREADS: '1' } }); // two threads were slower here (OpenBLAS spinning)
  return checkpoint;
}
