import { executeChild, proxyActivities, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { frozenAttempt, poolPass, scoreTasks, solvedAtLeastOnce, type Attempt, type TaskScore } from '../core/passAtK.js';
import { evaluationKey, type EvaluationLabel } from '../core/evaluationLabels.js';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { FloeKind, FloePolicyVersion, FloeRunId } from '../core/searchAttributes.js';
import type { TrainingActivities } from '../activities/training.js';
import type { RolloutSettings } from '../core/contracts.js';
import { rollout } from './rollout.js';

/** A frozen-weight evaluation: k attempts at every task with the weights the engines hold
 *  (the run starts no weight update meanwhile), at most `maxInFlight` at once. Scores each
 *  task's pass@1 and pass@k (core/passAtK.ts), names the tasks solved at least once (the
 *  published stress-pool rule), and records it all (table evaluations).
 *  Every attempt generates with `version` only (settings.frozenVersion): ids another version
 *  made are never kept, and an attempt that reports another version anyway is counted apart,
 *  as an infrastructure failure, not scored (core/passAtK.ts frozenAttempt). `floe eval`
 *  (cli/eval.ts) runs it on engines started for it alone, label 'checkpoint'. */

export interface EvaluationInput {
  runId: string;
  label: EvaluationLabel;
  version: number;
  taskIds: string[];
  /** k */
  attempts: number;
  maxInFlight: number;
  settings: RolloutSettings;
  seed: number;
  /** Record which tasks make the pool: 'solved' = those solved at least once, else all. */
  pool: 'solved' | 'all';
}

export interface EvaluationResult { label: EvaluationLabel; version: number; k: number; scores: TaskScore[]; pass1: number | null; passK: number | null; solved: string[] }

const training = proxyActivities<TrainingActivities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 10 } });

export async function evaluation(input: EvaluationInput): Promise<EvaluationResult> {
  upsertSearchAttributes([{ key: FloeRunId, value: input.runId }, { key: FloeKind, value: 'evaluation' }, { key: FloePolicyVersion, value: input.version }]);
  const jobs = input.taskIds.flatMap((taskId, t) => Array.from({ length: input.attempts }, (_, attempt) => ({ taskId, t, attempt })));
  const attempts: Attempt[] = [];
  const worker = async (): Promise<void> => {
    for (let job = jobs.shift(); job; job = jobs.shift()) {
      const { taskId, t, attempt } = job;
      const groupId = `${input.runId}-eval-${evaluationKey(input.label, input.version)}-${taskId}`;
      const r = await executeChild(rollout, {
        workflowId: `${workflowInfo().workflowId}-${taskId}-${attempt}`,
        taskQueue: CONTROL_QUEUE,
        args: [{ runId: input.runId, rolloutId: `${groupId}-${attempt}`, taskId, groupId, attempt, purpose: 'eval' as const, settings: { ...input.settings, frozenVersion: input.version }, seed: input.seed * 7_919 + t * 64 + attempt }],
      }).catch(() => ({ taskId, reward: 0, gate: 'workflow_failed', versionStart: null, versionEnd: null }));
      attempts.push(frozenAttempt({ taskId, reward: r.reward, gate: r.gate }, [r.versionStart, r.versionEnd], input.version));
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(input.maxInFlight, jobs.length)) }, worker));
  const scores = scoreTasks(input.taskIds, attempts, input.attempts);
  const solved = solvedAtLeastOnce(scores);
  await training.recordEvaluation({ runId: input.runId, label: input.label, version: input.version, k: input.attempts, scores, pool: input.pool === 'solved' ? solved : input.taskIds });
  return { label: input.label, version: input.version, k: input.attempts, scores, ...poolPass(scores), solved };
}
