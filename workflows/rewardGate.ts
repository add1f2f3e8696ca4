import { proxyActivities, proxyLocalActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { Task } from '../core/taskModel.js';
import type { Ended } from '../core/gates.js';
import type { Gate, SandboxSettings } from '../core/contracts.js';
import type { GradeResult } from '../core/sandboxPolicy.js';
import { sandboxQueue } from '../core/taskQueues.js';
import { FloeKind, FloeTaskId } from '../core/searchAttributes.js';
import type { AuditActivities } from '../activities/audit.js';
import type { GradingActivities } from '../activities/grading.js';

/** The reward decision of a rollout. A rollout a gate ended gets 0 with that gate's reason;
 *  a submission is graded with the hidden tests in a clean checkout (never in the agent's
 *  container): reward 1 iff every FAIL_TO_PASS and PASS_TO_PASS test passes. With a recipe
 *  layer off, the final state of a rollout that did not submit is graded the same way; its
 *  decision's detail says what ended it (`finalState`). */

export type RolloutEnding =
  | { kind: 'ended'; ended: Ended }
  /** `finalState`: the rollout did not submit; a layer switched off (recipe.rewardGate or
   *  recipe.explicitSubmit) grades the repository's final state, and this is what ended it (an
   *  exhausted budget, or an answer without a tool call). Absent: an explicit submit. */
  | { kind: 'submitted'; diff: string; finalState?: Ended };

export interface RewardGateInput {
  runId: string;
  rolloutId: string;
  task: Task;
  ending: RolloutEnding;
  sandbox: SandboxSettings;
}

export interface GateResult { gate: Gate; reward: number }

const audit = proxyLocalActivities<AuditActivities>({ startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 10 } });

export async function rewardGate(input: RewardGateInput): Promise<GateResult> {
  upsertSearchAttributes([{ key: FloeKind, value: 'rewardGate' }, { key: FloeTaskId, value: input.task.instanceId }]);
  if (input.ending.kind === 'ended') {
    const { gate, detail } = input.ending.ended;
    await audit.recordGateDecision({ rolloutId: input.rolloutId, gate, reward: 0, detail });
    return { gate, reward: 0 };
  }
  const grading = proxyActivities<GradingActivities>({
    taskQueue: sandboxQueue(input.sandbox.host),
    startToCloseTimeout: `${input.sandbox.gradeTimeoutSeconds + 120} seconds`,
    heartbeatTimeout: '30 seconds',
    retry: { maximumAttempts: 3 },
  });
  const grade: GradeResult = await grading.gradeSubmission({ runId: input.runId, rolloutId: input.rolloutId, task: input.task, diff: input.ending.diff, limits: input.sandbox, timeoutSeconds: input.sandbox.gradeTimeoutSeconds });
  const gate: Gate = grade.passed ? 'passed' : 'tests_failed';
  const failing = grade.tests.filter((t) => t.outcome !== 'passed').map((t) => `${t.id}: ${t.outcome}`);
  await audit.recordGateDecision({
    rolloutId: input.rolloutId,
    gate,
    reward: grade.passed ? 1 : 0,
    detail: {
      failing, applyError: grade.applyError, timedOut: grade.timedOut, durationMs: grade.durationMs,
      ...(input.ending.finalState ? { finalState: { gate: input.ending.finalState.gate, ...input.ending.finalState.detail } } : {}),
    },
    grade,
  });
  return { gate, reward: grade.passed ? 1 : 0 };
}
