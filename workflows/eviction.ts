import { executeChild, proxyActivities, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { applyDecision, recheckDecision, recheckDue, retireDecisions, type EvictionDecision, type EvictionPolicy, type TaskRecord } from '../core/eviction.js';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { FloeKind, FloePolicyVersion, FloeRunId } from '../core/searchAttributes.js';
import type { TrainingActivities } from '../activities/training.js';
import type { RolloutSettings } from '../core/contracts.js';
import { rollout } from './rollout.js';

/** Eviction decisions at one policy version: retire mastered and hopeless tasks, re-score
 *  retired tasks that are due (rollouts with the current, frozen weights) and revive those
 *  that regressed. Every decision is recorded with its evidence. */

export interface EvictionInput {
  runId: string;
  version: number;
  tasks: Record<string, TaskRecord>;
  /** version at which each retired task was retired */
  retiredAt: Record<string, number>;
  policy: EvictionPolicy & { recheckAttempts: number };
  rollout: RolloutSettings;
}

export interface EvictionResult { decisions: EvictionDecision[]; tasks: Record<string, TaskRecord> }

const training = proxyActivities<TrainingActivities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 10 } });

export async function eviction(input: EvictionInput): Promise<EvictionResult> {
  upsertSearchAttributes([{ key: FloeRunId, value: input.runId }, { key: FloeKind, value: 'eviction' }, { key: FloePolicyVersion, value: input.version }]);
  const tasks = JSON.parse(JSON.stringify(input.tasks)) as Record<string, TaskRecord>; // structuredClone is not in the workflow sandbox
  const decisions: EvictionDecision[] = [];

  const due = Object.entries(tasks).filter(([id, t]) => t.state !== 'active' && recheckDue(input.version, t.lastRecheckVersion, input.retiredAt[id] ?? input.version, input.policy));
  const rechecks = await Promise.all(due.map(async ([taskId]) => {
    const results = await Promise.all(Array.from({ length: input.policy.recheckAttempts }, (_, attempt) => {
      const rolloutId = `${input.runId}-recheck-v${input.version}-${taskId}-${attempt}`;
      return executeChild(rollout, {
        workflowId: `${workflowInfo().workflowId}-${taskId}-${attempt}`,
        taskQueue: CONTROL_QUEUE,
        args: [{ runId: input.runId, rolloutId, taskId, groupId: `${input.runId}-recheck-v${input.version}-${taskId}`, attempt, purpose: 'recheck' as const, settings: input.rollout }],
      });
    }));
    return { taskId, rewards: results.map((r) => r.reward) };
  }));
  for (const { taskId, rewards } of rechecks) {
    const d = recheckDecision(taskId, tasks[taskId], rewards, input.version, input.policy);
    applyDecision(tasks[taskId], d, input.version);
    decisions.push(d);
  }
  for (const d of retireDecisions(tasks, input.policy)) {
    applyDecision(tasks[d.taskId], d, input.version);
    decisions.push(d);
  }
  await training.recordEvictions({ runId: input.runId, version: input.version, decisions, tasks });
  return { decisions, tasks };
}
