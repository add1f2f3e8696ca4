import {
  ApplicationFailure, ContinueAsNew, allHandlersFinished, condition, continueAsNew, executeChild, patched, proxyActivities, setHandler, startChild,
  upsertSearchAttributes, workflowInfo, ParentClosePolicy,
} from '@temporalio/workflow';
import type { RunConfig } from '../core/config.js';
import { evaluationKey } from '../core/evaluationLabels.js';
import { rolloutSettings, trainStepConfig } from '../core/contracts.js';
import {
  ask, carried, chooseBatch, discardStale, evictionLanded, loopGoesOn, masteredTasks, newInFlight, newLoopState, noteContinueAsNewSuggested, periodicEvaluationDue, planGroups,
  readyToContinueAsNew, rolloutFinished, setPool, updateLanded, validateAsk, type Ask, type LoopState as CoreLoopState, type PlannedGroup,
} from '../core/runLoop.js';
import { rootMessage } from '../core/failures.js';
import { CONTROL_QUEUE, sandboxQueue } from '../core/taskQueues.js';
import { FloeKind, FloeMeanReward, FloePolicyVersion, FloeRunId, FloeTaskId } from '../core/searchAttributes.js';
import type { DbActivities } from '../activities/db.js';
import type { TaskActivities } from '../activities/tasks.js';
import type { TrainingActivities } from '../activities/training.js';
import type { SandboxActivities } from '../activities/sandbox/index.js';
import { pauseRun, resumeRun, runStatus, stopRun, type RunState, type RunStatus } from './messages.js';
import { rollout, type RolloutResult } from './rollout.js';
import { weightUpdate, type WeightUpdateResult } from './weightUpdate.js';
import { eviction, type EvictionResult } from './eviction.js';
import { evaluation, type EvaluationResult } from './evaluation.js';

/** One training run: the asynchronous loop, as a thin script over the pure state machine in
 *  core/runLoop.ts. Its handlers hand each message to the state machine in one line (pause /
 *  resume / stop by validated update, status by query); it waits on `condition` and runs the
 *  effects the state machine asks for: rollout children for planned groups, a weightUpdate
 *  child for a chosen batch, an eviction child after an update, the audit records, and
 *  continue-as-new once Temporal suggests it and nothing is in flight. */

export type LoopState = CoreLoopState<RolloutResult>;

export interface TrainingRunInput {
  runId: string;
  config: RunConfig;
  /** Carried across continue-as-new. */
  carried?: LoopState;
}

/** Rollouts of one planning round start together (startGroups). */
const START_TOGETHER = 'floe-start-rollouts-together';

const db = proxyActivities<DbActivities>({ startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 10 } });
const taskActs = proxyActivities<TaskActivities>({ startToCloseTimeout: '2 minutes', retry: { maximumAttempts: 3 } });
const training = proxyActivities<TrainingActivities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 10 } });

export async function trainingRun(input: TrainingRunInput): Promise<RunStatus> {
  try {
    return await runLoop(input);
  } catch (err) {
    if (!(err instanceof ContinueAsNew)) await db.recordRunState({ runId: input.runId, state: 'failed', summary: { error: rootMessage(err) } });
    throw err;
  }
}

async function runLoop(input: TrainingRunInput): Promise<RunStatus> {
  const { runId, config } = input;
  const settings = rolloutSettings(config);
  const s: LoopState = input.carried ?? newLoopState(runId, config.name, config.training.updates);
  const f = newInFlight<RolloutResult>(); // nothing is in flight across continue-as-new
  const status = s.status;
  status.rolloutsInFlight = 0;

  /** The run state Postgres holds; the state machine's, recorded when they differ. */
  let recorded: RunState = status.state;
  async function recordState(): Promise<void> {
    if (status.state === recorded) return;
    recorded = status.state;
    await db.recordRunState({ runId, state: recorded });
  }
  /** A pause / resume / stop the validator accepted: the state machine applies it, the audit records it. */
  async function control(what: Ask, reason?: string): Promise<RunStatus> {
    ask(s, what, reason);
    await recordState();
    return status;
  }

  // ---- handlers: each hands its message to the state machine ----
  setHandler(runStatus, () => status);
  setHandler(pauseRun, () => control('pause'), { validator: () => validateAsk(status.state, 'pause') });
  setHandler(resumeRun, () => control('resume'), { validator: () => validateAsk(status.state, 'resume') });
  setHandler(stopRun, (reason: string) => control('stop', reason), { validator: (reason: string) => validateAsk(status.state, 'stop', reason) });
  upsertSearchAttributes([{ key: FloeRunId, value: runId }, { key: FloeKind, value: 'trainingRun' }, { key: FloePolicyVersion, value: status.policyVersion }]);
  if (settings.engines.length === 0) throw new Error('the run config lists no engines (engines.endpoints); `floe demo` starts embedded ones, or list yours');
  if (!config.trainer.url) throw new Error('the run config has no trainer.url; `floe demo` starts an embedded trainer, or give yours');

  if (!input.carried) {
    await db.recordRunStart({ runId, workflowId: workflowInfo().workflowId, name: config.name, config });
    const heldOut = config.evaluation.heldOut;
    const sel = { source: config.tasks.source, layout: config.tasks.layout, limit: config.tasks.limit, excludeLooseTests: config.tasks.excludeLooseTests, onBadRow: config.tasks.onBadRow };
    // held-out tasks never enter the pool; they are loaded (and their images checked) for the periodic evaluation
    const pool = await taskActs.loadTaskPool({ ...sel, include: config.tasks.include, ...(config.tasks.audit ? { audit: config.tasks.audit } : {}), ...(heldOut.length ? { exclude: heldOut } : {}) });
    const held = heldOut.length ? await taskActs.loadTaskPool({ ...sel, include: heldOut, limit: 0, excludeLooseTests: false }) : null;
    const images = [...new Set([...pool.images, ...(held?.images ?? [])])].sort();
    if (images.length) {
      // every task image is on the sandbox host (or pulled) before any rollout starts
      const preflight = proxyActivities<SandboxActivities>({ taskQueue: sandboxQueue(config.sandbox.host), startToCloseTimeout: '2 hours', heartbeatTimeout: '2 minutes', retry: { maximumAttempts: 3 } });
      await preflight.preflightTaskImages({ images });
    }
    let taskIds = pool.taskIds;
    if (config.evaluation.atStart) {
      // the starting weights, frozen: no group and no update has started yet
      const e = await evaluate('start', taskIds);
      if (config.evaluation.poolFromStart) {
        if (!e.solved.length) throw ApplicationFailure.nonRetryable(`the starting policy solved none of the ${taskIds.length} tasks in ${e.k} attempts each: there is no stress pool (warm-start longer, or choose other tasks)`, 'EmptyPool');
        taskIds = e.solved;
      }
    }
    setPool(s, taskIds);
  }


  async function evaluate(label: 'start' | 'end' | 'periodic' | 'retired', taskIds: string[]): Promise<EvaluationResult> {
    const e = await executeChild(evaluation, {
      workflowId: `${workflowInfo().workflowId}-eval-${evaluationKey(label, status.policyVersion)}`,
      taskQueue: CONTROL_QUEUE,
      args: [{ runId, label, version: status.policyVersion, taskIds, attempts: config.evaluation.attempts, maxInFlight: config.rollout.maxInFlight, settings, seed: config.seed, pool: label === 'start' && config.evaluation.poolFromStart ? 'solved' as const : 'all' as const }],
    });
    status.evaluations = [...(status.evaluations ?? []), { label, version: e.version, k: e.k, tasks: taskIds.length, pass1: e.pass1, passK: e.passK, pool: e.solved.length }];
    return e;
  }

  /** Every evaluation.every updates, with the weights just landed and no update started until
   *  it ends: the held-out tasks, and every task retired as mastered so far, revived or not (the forgetting
   *  check). Train rollouts in flight go on meanwhile; their results wait for the loop. */
  async function evaluatePeriodic(): Promise<void> {
    if (!periodicEvaluationDue(status.policyVersion, config.evaluation.every)) return;
    if (config.evaluation.heldOut.length) await evaluate('periodic', config.evaluation.heldOut);
    const mastered = masteredTasks(s);
    if (mastered.length) await evaluate('retired', mastered);
  }

  // ---- mailboxes: what the children report, taken in by the state machine at the next wake ----
  const finished: RolloutResult[] = [];
  let updating: Promise<WeightUpdateResult> | null = null;
  let updateDone: WeightUpdateResult | null = null;
  let evictionDone: EvictionResult | null = null;
  let failure: unknown = null;

  // ---- effects ----
  /** The planned groups' rollouts, started together and not waited for: their start commands go
   *  out in one workflow task, and the loop goes on to take in results while the server starts
   *  them (a start that fails fails the run, as before). One after another (as runs recorded
   *  before this patch did, and still replay), each start waited for the next workflow task:
   *  filling a window of 1,024 took 1,024 round trips before any result was taken in. */
  async function startGroups(): Promise<void> {
    const starts = planGroups(s, f, config).flatMap((g) => g.rollouts.map((r) => () => startRollout(g, r)));
    if (!starts.length) return;
    if (patched(START_TOGETHER)) for (const start of starts) start().catch((err: unknown) => { failure = err; });
    else for (const start of starts) await start();
  }

  async function startRollout(g: PlannedGroup, r: PlannedGroup['rollouts'][number]): Promise<void> {
    const handle = await startChild(rollout, {
      workflowId: `${workflowInfo().workflowId}-${r.rolloutId.slice(runId.length + 1)}`,
      taskQueue: CONTROL_QUEUE,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      // set at start, not by the rollout's first task: an abandoned rollout that never ran
      // is still found by its run (the demo's clean-up after Ctrl-C)
      typedSearchAttributes: [{ key: FloeRunId, value: runId }, { key: FloeKind, value: 'rollout' }, { key: FloeTaskId, value: g.taskId }],
      args: [{ runId, rolloutId: r.rolloutId, taskId: g.taskId, groupId: g.groupId, attempt: r.attempt, purpose: 'train' as const, settings, seed: r.seed }],
    });
    void handle.result().then(
      (res) => { finished.push(res); },
      () => { finished.push({ rolloutId: r.rolloutId, taskId: g.taskId, groupId: g.groupId, reward: 0, gate: 'workflow_failed', nTurns: 0, versionStart: null, versionEnd: null, shortcutFlags: [] }); },
    );
  }

  async function recordStale(): Promise<void> {
    const stale = discardStale(s, f, config);
    if (Object.keys(stale).length) {
      await training.markDiscarded({ rolloutIds: Object.keys(stale), reason: `stale: policy advanced more than ${config.training.maxOffPolicySteps} versions since the first token`, staleness: stale });
    }
  }

  function startUpdate(): void {
    const plan = chooseBatch(s, f, config);
    if (!plan) return;
    updating = startChild(weightUpdate, {
      workflowId: `${workflowInfo().workflowId}-update-v${plan.version}`,
      taskQueue: CONTROL_QUEUE,
      // negative advantages are already scaled (core/advantages.ts): the trainer takes them as given
      args: [{ runId, version: plan.version, trainer: { url: config.trainer.url, node: config.trainer.node }, engines: settings.engines, advantages: plan.advantages, config: trainStepConfig(config.trainer, plan.version, config.training.updates), cacheRebuild: config.recipe.cacheRebuild, updateMode: config.engines.updateMode, weightTransfer: config.engines.weightTransfer }],
    }).then((h) => h.result());
    updating.then((r) => { updateDone = r; }, (err: unknown) => { failure = err; });
  }

  async function landUpdate(u: WeightUpdateResult): Promise<void> {
    updating = null;
    updateDone = null;
    const landed = updateLanded(s, f, config, u);
    await training.recordStaleness({ staleness: landed.stalenessAtTrain });
    await training.recordPolicyVersion({
      runId, version: u.version, checkpointPath: u.path, batchRollouts: landed.trained.length, batchMeanReward: landed.meanReward,
      discardedStale: landed.discardedStale, trainMs: u.trainMs, publishMs: u.publishMs, loadMs: u.loadMs, updateMs: u.updateMs,
      metrics: u.metrics, pool: { active: status.pool.active, retired_mastered: status.pool.retiredMastered, retired_hopeless: status.pool.retiredHopeless, revived: status.pool.revived },
    });
    upsertSearchAttributes([{ key: FloePolicyVersion, value: status.policyVersion }, ...(status.lastMeanReward === null ? [] : [{ key: FloeMeanReward, value: status.lastMeanReward }])]);
    if (landed.startEviction) {
      void startChild(eviction, {
        workflowId: `${workflowInfo().workflowId}-eviction-v${status.policyVersion}`,
        taskQueue: CONTROL_QUEUE,
        args: [{ runId, version: status.policyVersion, tasks: s.tasks, retiredAt: s.retiredAt, policy: config.recipe.recheck ? config.eviction : { ...config.eviction, recheck: false }, rollout: settings }],
      }).then((h) => h.result()).then((r) => { evictionDone = r; }, (err: unknown) => { failure = err; });
    }
  }

  function landEviction(r: EvictionResult): void {
    evictionDone = null;
    evictionLanded(s, f, r.decisions);
  }

  // ---- the loop: wake on news, hand it to the state machine, run the effects it asks for ----
  while (loopGoesOn(s, config)) {
    await recordState();
    if (status.state === 'paused') {
      await condition(() => status.state !== 'paused');
      continue;
    }
    noteContinueAsNewSuggested(f, workflowInfo().continueAsNewSuggested);
    await startGroups();
    if (readyToContinueAsNew(s, f)) await continueAsNew<typeof trainingRun>({ runId, config, carried: carried(s) });
    await condition(() => finished.length > 0 || updateDone !== null || evictionDone !== null || failure !== null || status.state !== 'running' || readyToContinueAsNew(s, f));
    if (failure !== null) throw failure; // a weight update or eviction failed after its retries: the run fails with its reason
    for (const r of finished.splice(0, finished.length)) rolloutFinished(s, f, config, r);
    if (updateDone) {
      await landUpdate(updateDone);
      await evaluatePeriodic();
    }
    if (evictionDone) landEviction(evictionDone);
    await recordStale();
    startUpdate();
  }

  // Stop: let the update in progress land, abandon the rest (rollouts finish on their own).
  if (updating) await landUpdate(await updating);
  if (f.evicting) {
    // its recheck rollouts are its children: let them finish rather than be cut off
    await condition(() => evictionDone !== null || failure !== null);
    if (evictionDone) landEviction(evictionDone);
  }
  // the final weights, frozen (the last update has landed; none follows)
  if (status.state !== 'stopping' && config.evaluation.atEnd) await evaluate('end', s.order);
  await condition(allHandlersFinished);
  const final = status.state === 'stopping' ? 'stopped' : 'completed';
  await db.recordRunState({ runId, state: final, summary: { ...status, state: final } });
  status.state = final;
  return status;
}
