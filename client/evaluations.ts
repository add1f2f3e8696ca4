import type { Client, WorkflowHandle } from '@temporalio/client';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { FloeKind, FloeRunId } from '../core/searchAttributes.js';
import type { EvaluationInput, EvaluationResult } from '../workflows/evaluation.js';

/** Typed client functions for frozen-weight evaluations outside a training run (`floe eval`
 *  calls exactly these). */

export const evaluationWorkflowId = (evalId: string): string => `floe-eval-${evalId}`;

export async function startEvaluation(client: Client, input: EvaluationInput): Promise<WorkflowHandle> {
  return client.workflow.start('evaluation', {
    taskQueue: CONTROL_QUEUE,
    workflowId: evaluationWorkflowId(input.runId),
    args: [input],
    typedSearchAttributes: [
      { key: FloeRunId, value: input.runId },
      { key: FloeKind, value: 'evaluation' },
    ],
  });
}

export type { EvaluationInput, EvaluationResult };
