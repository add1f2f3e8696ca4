import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../core/config.js';
import { TrainingSampleSchema, TrainStepConfigSchema, trainStepConfig, type TrainingSample } from '../core/contracts.js';
import { settingsDiffer } from '../activities/gpu.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { settings } from './helpers/platform.js';

/** The trainer's wire contract, one owner per side: TypeScript's schemas in core/contracts.ts
 *  against what the trainer validates (`python -m floe_engine.contract`, read from the code that
 *  checks each sample and each step's config), and a run config's trainer settings reaching the
 *  real trainer's step as sent. */

type Kind = string | string[];

/** A zod object's fields in the contract's notation ("string", "number", "int", "number[]",
 *  "int[]", or the allowed strings). */
function kinds(schema: z.ZodObject): Record<string, Kind> {
  const kindOf = (t: z.ZodType): Kind => {
    if (t instanceof z.ZodString) return 'string';
    if (t instanceof z.ZodEnum) return [...t.options] as string[];
    if (t instanceof z.ZodNumber) return t.format === 'safeint' ? 'int' : 'number';
    if (t instanceof z.ZodArray) return `${kindOf(t.element as z.ZodType) as string}[]`;
    throw new Error(`no contract kind for ${t.constructor.name}`);
  };
  return Object.fromEntries(Object.entries(schema.shape).map(([k, t]) => [k, kindOf(t as z.ZodType)]));
}

function pythonContract(): { sample: Record<string, Kind>; step_config: Record<string, Kind> } {
  const r = spawnSync(settings.python.bin, ['-m', 'floe_engine.contract'], { encoding: 'utf8', env: { ...process.env, PYTHONPATH: path.join(repoRoot, 'engine') } });
  if (r.status !== 0) throw new Error(`python -m floe_engine.contract failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { sample: Record<string, Kind>; step_config: Record<string, Kind> };
}

describe('the trainer contract', () => {
  it('the training sample and the step config are the same fields and types on both sides', () => {
    const py = pythonContract();
    expect(kinds(TrainingSampleSchema)).toEqual(py.sample);
    expect(kinds(TrainStepConfigSchema)).toEqual(py.step_config);
  });

  it('negative control: a field on one side only, or of another type, shows', () => {
    const py = pythonContract();
    expect(kinds(TrainStepConfigSchema.extend({ momentum: z.number() }))).not.toEqual(py.step_config);
    expect(kinds(TrainingSampleSchema.extend({ ids: z.array(z.number()) }))).not.toEqual(py.sample);
  });

  it('a step whose applied settings differ from those sent is named, field by field', () => {
    const sent = trainStepConfig(parseRunConfig({}).trainer, 1, 10);
    expect(settingsDiffer(sent, { ...sent })).toBeNull();
    expect(settingsDiffer(sent, { ...sent, extra: 1 })).toBe('extra undefined sent, 1 applied');
    expect(settingsDiffer({ ...sent, grad_clip: 0.5 }, sent)).toBe('grad_clip 0.5 sent, 1 applied');
    expect(settingsDiffer(sent, undefined)).toMatch(/^clip_high 0\.28 sent, undefined applied/);
  });
});

describe('a run config\'s trainer settings reach the trainer', () => {
  let gpu: EmbeddedGpu;
  let dir: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-contract-'));
    gpu = await startEmbeddedGpu(settings, { count: 0, checkpoint: '', publishDir: dir, supervise: false });
  }, 120_000);
  afterAll(async () => {
    await gpu?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('every non-default setting of the run config is the one the step ran with', async () => {
    const config = parseRunConfig({ trainer: { lr: 2e-4, lrSchedule: 'cosine', lrFinal: 0.2, weightDecay: 0.01, ratioMode: 'truncate', truncateCap: 3, lossAgg: 'seq-mean-token-mean', epochs: 2, minibatches: 1, gradClip: 0.5, microBatchTokens: 4096, clipLow: 0.1, clipHigh: 0.3 } });
    const sent = trainStepConfig(config.trainer, 1, 8);
    expect(sent).toMatchObject({ lr: 2e-4, weight_decay: 0.01, ratio_mode: 'truncate', truncate_cap: 3, loss_agg: 'seq-mean-token-mean', epochs: 2, grad_clip: 0.5, micro_batch_tokens: 4096, clip_low: 0.1, clip_high: 0.3 });
    const prompt = [...Buffer.from('fix the bug: ')];
    const completion = [...Buffer.from('done')];
    const sample: TrainingSample = TrainingSampleSchema.parse({
      rollout_id: 'r', group_id: 'g', reward: 1, advantage: 1, ids: [...prompt, ...completion],
      loss_mask: [...prompt.map(() => 0), ...completion.map(() => 1)], behaviour_logprobs: [...prompt.map(() => 0), ...completion.map(() => -2)],
      token_versions: [...prompt.map(() => -1), ...completion.map(() => 0)],
    });
    const res = await fetch(new URL('/train_step', gpu.trainer!.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ samples: [sample], config: sent }) });
    expect(res.status).toBe(200);
    const body = await res.json() as { version: number; config: unknown; metrics: { lr: number } };
    expect(settingsDiffer(sent, body.config)).toBeNull();
    expect(body.metrics.lr).toBe(2e-4);
    // and the trainer keeps no defaults of its own: a step without one of them is refused, naming it
    const { grad_clip: _dropped, ...partial } = sent;
    const refused = await fetch(new URL('/train_step', gpu.trainer!.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ samples: [sample], config: partial }) });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/grad_clip/);
  }, 120_000);
});
