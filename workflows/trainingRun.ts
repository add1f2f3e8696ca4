import { ContinueAsNew, allHandlersFinished, condition, continueAsNew, proxyActivities, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { RunConfig } from '../core/config.js';
import { FloeKind, FloeMeanReward, FloePolicyVersion, FloeRunId } from '../core/searchAttributes.js';
import type { DbActivities } from '../activities/db.js';
import type { TaskActivities } from '../activities/tasks.js';
import { pauseRun, resumeRun, runStatus, stopRun, type RunStatus } from './messages.js';

/** One training run. Owns the run's lifecycle (pause / resume / stop, status, search
 *  attributes, audit rows) and its task pool. */

export interface TrainingRunInput {
  runId: string;
  config: RunConfig;
  /** Carried across continue-as-new. */
  carried?: RunStatus;
}

const db = proxyActivities<DbActivities>({ startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 10 } });
const tasks = proxyActivities<TaskActivities>({ startToCloseTimeout: '2 minutes', retry: { maximumAttempts: 3 } });

export async function trainingRun(input: TrainingRunInput): Promise<RunStatus> {
  try {
    return await runLoop(input);
  } catch (err) {
    if (!isContinueAsNew(err)) await db.recordRunState({ runId: input.runId, state: 'failed', summary: { error: failureMessage(err) } });
    throw err;
  }
}

async function runLoop(input: TrainingRunInput): Promise<RunStatus> {
  const { runId, config } = input;
  const status: RunStatus = input.carried ?? {
    runId,
    name: config.name,
    state: 'running',
    policyVersion: 0,
    updatesDone: 0,
    updatesTarget: config.training.updates,
    rolloutsFinished: 0,
    rolloutsInFlight: 0,
    discardedStale: 0,
    lastMeanReward: null,
    pool: { active: 0, retiredMastered: 0, retiredHopeless: 0, revived: 0 },
    continuedAsNew: 0,
  };
  let stopReason = '';

  setHandler(runStatus, () => status);
  setHandler(pauseRun, async () => {
    if (status.state === 'running') {
      status.state = 'paused';
      await db.recordRunState({ runId, state: 'paused' });
    }
    return status;
  });
  setHandler(resumeRun, async () => {
    if (status.state === 'paused') {
      status.state = 'running';
      await db.recordRunState({ runId, state: 'running' });
    }
    return status;
  });
  setHandler(stopRun, async (reason: string) => {
    if (status.state === 'running' || status.state === 'paused') {
      status.state = 'stopping';
      stopReason = reason || 'stopped by user';
      await db.recordRunState({ runId, state: 'stopping' });
    }
    return status;
  });

  upsertSearchAttributes([
    { key: FloeRunId, value: runId },
    { key: FloeKind, value: 'trainingRun' },
    { key: FloePolicyVersion, value: status.policyVersion },
  ]);

  if (!input.carried) {
    await db.recordRunStart({ runId, workflowId: workflowInfo().workflowId, name: config.name, config });
    const pool = await tasks.loadTaskPool({ source: config.tasks.source, include: config.tasks.include, limit: config.tasks.limit, excludeLooseTests: config.tasks.excludeLooseTests, onBadRow: config.tasks.onBadRow });
    status.pool.active = pool.taskIds.length;
  }

  // The asynchronous loop (rollouts, weight updates, eviction) drives the run from here;
  // until a stop arrives the run holds its pool and answers status.
  while (status.state !== 'stopping') {
    if (workflowInfo().historyLength > config.training.historyEventLimit) {
      await continueAsNew<typeof trainingRun>({ runId, config, carried: { ...status, continuedAsNew: status.continuedAsNew + 1 } });
    }
    await condition(() => status.state === 'stopping');
  }

  // Let the stop handler's own audit write land first, so Postgres ends on 'stopped'.
  await condition(allHandlersFinished);
  setMeanReward(status.lastMeanReward);
  await db.recordRunState({ runId, state: 'stopped', summary: { ...status, state: 'stopped', stopReason } });
  status.state = 'stopped';
  return status;
}

function setMeanReward(reward: number | null): void {
  if (reward !== null) upsertSearchAttributes([{ key: FloeMeanReward, value: reward }]);
}

function isContinueAsNew(err: unknown): boolean {
  return err instanceof ContinueAsNew;
}

/** The innermost cause's message: an activity failure wraps the error that explains it. */
function failureMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  const parts: string[] = [];
  while (e) {
    if (e.message) parts.push(e.message);
    e = e.cause as typeof e;
  }
  return parts.length ? parts[parts.length - 1] : String(err);
}
