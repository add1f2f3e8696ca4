import { z } from 'zod';
import type { RunConfig } from './config.js';
import { lrAt } from './lrSchedule.js';
import { renderSpec, type RenderSpec } from './renderSpec.js';
import type { SandboxLimits } from './sandboxPolicy.js';
import type { RouterPolicy } from './router.js';

/** The types that cross a process or layer boundary, each written once here: what workflows
 *  hand to activities and children, what the trainer (engine/floe_engine/contract.py) reads,
 *  and what every layer reports a rollout ended with. Pure: workflows import it. */

// ------------------------------------------------------------------------------ engines

/** The servers floe has an adapter for (activities/engines/). */
export const ENGINE_KINDS = ['reference', 'vllm', 'sglang'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** An inference server floe drives (config engines.endpoints). */
export interface EngineEndpoint {
  id: string;
  url: string;
  /** Task queue suffix of the gpu worker on the node this engine runs on. */
  node: string;
  kind: EngineKind;
}

/** What a weight update does to the requests a paused server is generating (config
 *  engines.updateMode): 'abort' = abort and resubmit from the exact prefix; 'keep' = the server
 *  keeps them and recomputes their K/V under the new weights (vLLM pause mode keep + preempting
 *  reset, SGLang pause mode retract). */
export const UPDATE_MODES = ['abort', 'keep'] as const;
export type UpdateMode = (typeof UPDATE_MODES)[number];

/** How a new version reaches the engines (config engines.weightTransfer): 'disk' = each loads
 *  the published folder; 'broadcast' = the trainer broadcasts the tensors over a process group
 *  into the servers' own weight-transfer routes (engine/floe_engine/native_transfer.py). */
export const WEIGHT_TRANSFERS = ['disk', 'broadcast'] as const;
export type WeightTransfer = (typeof WEIGHT_TRANSFERS)[number];

// ------------------------------------------------------------------------------ rollouts

/** How a rollout ends, and why: the reason its reward is what it is (turns.gate, gate_decisions). */
export type Gate =
  | 'passed' // submitted and every FAIL_TO_PASS and PASS_TO_PASS test passed
  | 'tests_failed' // submitted, tests did not all pass (or the diff did not apply)
  | 'format' // the raw output failed the format check (detail: the FormatReason)
  | 'duplicate_call' // same tool with the same arguments as an earlier turn
  | 'budget_turns'
  | 'budget_tokens'
  | 'budget_time'
  | 'diff_too_large'
  | 'sandbox_error'
  | 'engine_error'
  | 'workflow_failed'; // the rollout's workflow itself failed (its parent saw no result)

export interface Budgets { maxTurns: number; maxTotalTokens: number; maxWallSeconds: number }

/** The recipe's rollout layers (config `recipe`, docs/design.md), each a switch. */
export interface Layers {
  /** false = hint-and-continue: a malformed or duplicate call gets an error observation. */
  rewardGate: boolean;
  /** false = the Hermes-style parser (core/hermesParser.ts) decides what runs. */
  rawFormatCheck: boolean;
  /** false = an answer without a tool call, or an exhausted budget, ends the rollout and the
   *  repository's final state is graded. */
  explicitSubmit: boolean;
}

/** The sandbox section of the run config as a rollout and its grading use it. */
export type SandboxSettings = SandboxLimits & { host: string; gradeTimeoutSeconds: number };

/** Everything a rollout needs from its run's config (built by rolloutSettings). */
export interface RolloutSettings {
  engines: EngineEndpoint[];
  router: RouterPolicy;
  render: RenderSpec;
  systemPrompt: string;
  sampling: { temperature: number; topP: number; maxTokensPerTurn: number };
  /** config engines.generateTimeoutSeconds. */
  generateTimeoutSeconds: number;
  budgets: Budgets;
  maxObservationChars: number;
  sandbox: SandboxSettings;
  maxDiffBytes: number;
  /** The recipe's rollout layers (config `recipe`). */
  recipe: Layers;
  /** A frozen-weight evaluation's policy version (workflows/evaluation.ts): a generated id of
   *  any other version is never kept (activities/generate.ts). Absent: training. */
  frozenVersion?: number;
}

/** The largest submission diff a rollout records and grades. */
export const MAX_DIFF_BYTES = 64 * 1024;

export function rolloutSettings(config: RunConfig): RolloutSettings {
  return {
    engines: config.engines.endpoints,
    router: config.engines.router,
    render: renderSpec(config.policy),
    systemPrompt: config.rollout.systemPrompt,
    sampling: { temperature: config.policy.temperature, topP: config.policy.topP, maxTokensPerTurn: config.policy.maxTokensPerTurn },
    generateTimeoutSeconds: config.engines.generateTimeoutSeconds,
    budgets: { maxTurns: config.rollout.maxTurns, maxTotalTokens: config.rollout.maxTotalTokens, maxWallSeconds: config.rollout.maxWallSeconds },
    maxObservationChars: config.rollout.maxObservationChars,
    sandbox: config.sandbox,
    maxDiffBytes: MAX_DIFF_BYTES,
    recipe: { rewardGate: config.recipe.rewardGate, rawFormatCheck: config.recipe.rawFormatCheck, explicitSubmit: config.recipe.explicitSubmit },
  };
}

// ------------------------------------------------------------------------------ training

/** One row of the trainer's batch file: one rollout as one masked sequence (core/tokenPath.ts
 *  builds it). engine/floe_engine/contract.py is the trainer's side of the same contract;
 *  test/trainerContract.test.ts compares the two. */
export const TrainingSampleSchema = z.strictObject({
  rollout_id: z.string(),
  group_id: z.string(),
  reward: z.number(),
  advantage: z.number(),
  ids: z.array(z.number().int()),
  loss_mask: z.array(z.number().int()),
  behaviour_logprobs: z.array(z.number()),
  token_versions: z.array(z.number().int()),
});
export type TrainingSample = z.infer<typeof TrainingSampleSchema>;

/** How the surrogate treats the importance ratio: PPO-style asymmetric clipping, or a truncated
 *  importance-sampling weight. */
export const RATIO_MODES = ['clip', 'truncate'] as const;
/** How per-token losses become the batch's loss. */
export const LOSS_AGGS = ['token-mean', 'seq-mean-token-mean'] as const;

/** One train step's settings as the trainer reads them (its StepConfig): every field in every
 *  request, so the trainer keeps no defaults of its own; the run config's `trainer` section is
 *  their one owner (trainStepConfig). */
export const TrainStepConfigSchema = z.strictObject({
  lr: z.number().positive(),
  weight_decay: z.number().nonnegative(),
  clip_low: z.number().nonnegative(),
  clip_high: z.number().nonnegative(),
  ratio_mode: z.enum(RATIO_MODES),
  truncate_cap: z.number().positive(),
  loss_agg: z.enum(LOSS_AGGS),
  epochs: z.number().int().positive(),
  minibatches: z.number().int().positive(),
  grad_clip: z.number().positive(),
  micro_batch_tokens: z.number().int().positive(),
});
export type TrainStepConfig = z.infer<typeof TrainStepConfigSchema>;

/** The step settings of the update to `version` (its lr from the run's schedule). */
export function trainStepConfig(trainer: RunConfig['trainer'], version: number, updates: number): TrainStepConfig {
  return {
    lr: lrAt(trainer, version, updates),
    weight_decay: trainer.weightDecay,
    clip_low: trainer.clipLow,
    clip_high: trainer.clipHigh,
    ratio_mode: trainer.ratioMode,
    truncate_cap: trainer.truncateCap,
    loss_agg: trainer.lossAgg,
    epochs: trainer.epochs,
    minibatches: trainer.minibatches,
    grad_clip: trainer.gradClip,
    micro_batch_tokens: trainer.microBatchTokens,
  };
}
