import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import { gpuQueue } from '../core/taskQueues.js';
import { FloeKind, FloePolicyVersion, FloeRunId } from '../core/searchAttributes.js';
import type { GpuActivities } from '../activities/gpu.js';
import type { TrainingActivities } from '../activities/training.js';
import type { EngineEndpoint, TrainStepConfig, UpdateMode, WeightTransfer } from '../core/contracts.js';

/** One weight update: claim the batch (exactly once) → train step on the trainer's node →
 *  publish → every engine loads the weights and rebuilds its caches (unless the run switched
 *  recipe.cacheRebuild off: then it keeps them) → the version advances.
 *  Timings of each stage are returned for the policy_versions row. */

export interface WeightUpdateInput {
  runId: string;
  version: number;
  trainer: { url: string; node: string };
  engines: EngineEndpoint[];
  advantages: Record<string, number>;
  config: TrainStepConfig;
  /** recipe.cacheRebuild: false = engines keep their caches after loading. */
  cacheRebuild: boolean;
  /** engines.updateMode: requests in flight aborted and resubmitted, or kept by the engines. */
  updateMode: UpdateMode;
  /** engines.weightTransfer: engines load the published folder, or the trainer broadcasts into them. */
  weightTransfer: WeightTransfer;
}

export interface WeightUpdateResult {
  version: number;
  path: string;
  claimed: string[];
  metrics: Record<string, number>;
  trainMs: number;
  publishMs: number | null;
  loadMs: Record<string, number>;
  updateMs: number;
}

const training = proxyActivities<TrainingActivities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 10 } });

export async function weightUpdate(input: WeightUpdateInput): Promise<WeightUpdateResult> {
  upsertSearchAttributes([{ key: FloeRunId, value: input.runId }, { key: FloeKind, value: 'weightUpdate' }, { key: FloePolicyVersion, value: input.version }]);
  const started = Date.now();
  const claimed = await training.claimBatch({ runId: input.runId, version: input.version, advantages: input.advantages });
  const advantages = Object.fromEntries(claimed.map((id) => [id, input.advantages[id] ?? 0]));
  const trainer = proxyActivities<GpuActivities>({ taskQueue: gpuQueue(input.trainer.node), startToCloseTimeout: '30 minutes', heartbeatTimeout: '2 minutes', retry: { maximumAttempts: 5 } });
  const step = await trainer.trainStep({ runId: input.runId, version: input.version, trainerUrl: input.trainer.url, advantages, config: input.config });
  const loads = await Promise.all(input.engines.map((engine) => {
    const node = proxyActivities<GpuActivities>({ taskQueue: gpuQueue(engine.node), startToCloseTimeout: '10 minutes', heartbeatTimeout: '1 minute', retry: { maximumAttempts: 5 } });
    return node.loadWeights({ runId: input.runId, engine, path: step.path, version: input.version, cacheRebuild: input.cacheRebuild, updateMode: input.updateMode, weightTransfer: input.weightTransfer ?? 'disk', trainerUrl: input.trainer.url });
  }));
  return {
    version: input.version,
    path: step.path,
    claimed,
    metrics: step.metrics,
    trainMs: step.trainMs,
    publishMs: typeof step.metrics.publish_ms === 'number' ? Math.round(step.metrics.publish_ms) : null,
    loadMs: Object.fromEntries(loads.map((l) => [l.engineId, l.loadMs])),
    updateMs: Date.now() - started,
  };
}
