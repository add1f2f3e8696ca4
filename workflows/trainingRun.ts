import {
  ContinueAsNew, allHandlersFinished, condition, continueAsNew, proxyActivities, setHandler, startChild,
  upsertSearchAttributes, workflowInfo, ParentClosePolicy,
} from '@temporalio/workflow';
import type { RunConfig } from '../core/config.js';
import { renderSpec } from '../core/renderSpec.js';
import { groupAdvantages } from '../core/advantages.js';
import { applyDecision, newTaskRecord, poolCounts, recordAttempt, type TaskRecord } from '../core/eviction.js';
import { staleness } from '../core/staleness.js';
import { rootMessage } from '../core/failures.js';
import { CONTROL_QUEUE, sandboxQueue } from '../core/taskQueues.js';
import { FloeKind, FloeMeanReward, FloePolicyVersion, FloeRunId } from '../core/searchAttributes.js';
import type { DbActivities } from '../activities/db.js';
import type { TaskActivities } from '../activities/tasks.js';
import type { TrainingActivities } from '../activities/training.js';
import type { SandboxActivities } from '../activities/sandbox/index.js';
import { pauseRun, resumeRun, runStatus, stopRun, type RunStatus } from './messages.js';
import { rollout, type RolloutResult, type RolloutSettings } from './rollout.js';
import { weightUpdate, type WeightUpdateResult } from './weightUpdate.js';
import { eviction, type EvictionResult } from './eviction.js';

/** One training run: the asynchronous loop. Keeps a window of rollouts in flight (groups of
 *  G attempts per task), collects finished ones, discards stale ones, starts a weightUpdate
 *  when a batch is ready while generation goes on, runs eviction, and continues-as-new
 *  before its history grows too long. Pause / resume / stop by update, status by query. */

export interface LoopState {
  status: RunStatus;
  tasks: Record<string, TaskRecord>;
  retiredAt: Record<string, number>;
  order: string[];
  cursor: number;
  groupSeq: number;
  /** Finished groups waiting for a batch: groupId → trainable results. */
  ready: Record<string, RolloutResult[]>;
  readyOrder: string[];
}

export interface TrainingRunInput {
  runId: string;
  config: RunConfig;
  /** Carried across continue-as-new. */
  carried?: LoopState;
}

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

export function rolloutSettings(config: RunConfig): RolloutSettings {
  return {
    engines: config.engines.endpoints,
    router: config.engines.router,
    render: renderSpec(config.policy),
    systemPrompt: config.rollout.systemPrompt,
    sampling: { temperature: config.policy.temperature, topP: config.policy.topP, maxTokensPerTurn: config.policy.maxTokensPerTurn },
    budgets: { maxTurns: config.rollout.maxTurns, maxTotalTokens: config.rollout.maxTotalTokens, maxWallSeconds: config.rollout.maxWallSeconds },
    maxObservationChars: config.rollout.maxObservationChars,
    sandbox: config.sandbox,
    maxDiffBytes: 64 * 1024,
  };
}

async function runLoop(input: TrainingRunInput): Promise<RunStatus> {
  const { runId, config } = input;
  const G = config.rollout.groupSize;
  const settings = rolloutSettings(config);
  const s: LoopState = input.carried ?? {
    status: {
      runId, name: config.name, state: 'running', policyVersion: 0, updatesDone: 0, updatesTarget: config.training.updates,
      rolloutsFinished: 0, rolloutsInFlight: 0, discardedStale: 0, lastMeanReward: null,
      pool: { active: 0, retiredMastered: 0, retiredHopeless: 0, revived: 0 }, continuedAsNew: 0,
    },
    tasks: {}, retiredAt: {}, order: [], cursor: 0, groupSeq: 0, ready: {}, readyOrder: [],
  };
  const status = s.status;
  status.rolloutsInFlight = 0;
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
  upsertSearchAttributes([{ key: FloeRunId, value: runId }, { key: FloeKind, value: 'trainingRun' }, { key: FloePolicyVersion, value: status.policyVersion }]);

  if (!input.carried) {
    await db.recordRunStart({ runId, workflowId: workflowInfo().workflowId, name: config.name, config });
    const pool = await taskActs.loadTaskPool({ source: config.tasks.source, layout: config.tasks.layout, include: config.tasks.include, limit: config.tasks.limit, excludeLooseTests: config.tasks.excludeLooseTests, onBadRow: config.tasks.onBadRow });
    // (histories recorded before the preflight have no images in the pool's answer)
    if (pool.images?.length) {
      // every task image is on the sandbox host (or pulled) before any rollout starts
      const preflight = proxyActivities<SandboxActivities>({ taskQueue: sandboxQueue(config.sandbox.host), startToCloseTimeout: '2 hours', heartbeatTimeout: '2 minutes', retry: { maximumAttempts: 3 } });
      await preflight.preflightTaskImages({ images: pool.images });
    }
    s.order = pool.taskIds;
    for (const id of pool.taskIds) s.tasks[id] = newTaskRecord();
    status.pool = poolCounts(s.tasks);
  }

  // ---- in-flight bookkeeping (not carried: continue-as-new happens only when drained) ----
  const finished: RolloutResult[] = [];
  const groups = new Map<string, { taskId: string; pending: number; results: RolloutResult[] }>();
  let updating: Promise<WeightUpdateResult> | null = null;
  let updateDone: WeightUpdateResult | null = null;
  let updateBatch: RolloutResult[] = [];
  let failure: unknown = null;
  let evicting = false;
  let evictionDone: EvictionResult | null = null;
  let discardedSinceUpdate = 0;
  let draining = false;

  const engineCount = settings.engines.length;
  if (engineCount === 0) throw new Error('the run config lists no engines (engines.endpoints); `floe demo` starts embedded ones, or list yours');
  if (!config.trainer.url) throw new Error('the run config has no trainer.url; `floe demo` starts an embedded trainer, or give yours');

  function nextTask(): string | null {
    for (let i = 0; i < s.order.length; i++) {
      const id = s.order[s.cursor++ % s.order.length];
      if (s.tasks[id].state === 'active') return id;
    }
    return null;
  }

  async function startGroup(): Promise<boolean> {
    const taskId = nextTask();
    if (taskId === null) return false;
    const groupId = `${runId}-g${s.groupSeq++}`;
    groups.set(groupId, { taskId, pending: G, results: [] });
    status.rolloutsInFlight += G;
    for (let attempt = 0; attempt < G; attempt++) {
      const rolloutId = `${groupId}-${attempt}`;
      const handle = await startChild(rollout, {
        workflowId: `${workflowInfo().workflowId}-${rolloutId.slice(runId.length + 1)}`,
        taskQueue: CONTROL_QUEUE,
        parentClosePolicy: ParentClosePolicy.ABANDON,
        args: [{ runId, rolloutId, taskId, groupId, attempt, purpose: 'train' as const, settings, seed: config.seed * 1_000_003 + s.groupSeq * 64 + attempt }],
      });
      void handle.result().then(
        (r) => { finished.push(r); },
        () => { finished.push({ rolloutId, taskId, groupId, reward: 0, gate: 'workflow_failed', nTurns: 0, versionStart: null, versionEnd: null, shortcutFlags: [] }); },
      );
    }
    return true;
  }

  async function collect(): Promise<void> {
    const batch = finished.splice(0, finished.length);
    for (const r of batch) {
      status.rolloutsInFlight--;
      status.rolloutsFinished++;
      const g = groups.get(r.groupId)!;
      g.pending--;
      const trainable = r.gate !== 'sandbox_error' && r.gate !== 'engine_error' && r.gate !== 'workflow_failed' && r.versionStart !== null;
      if (trainable) {
        g.results.push(r);
        recordAttempt(s.tasks[r.taskId], r.reward, config.eviction);
      }
      if (g.pending === 0) {
        groups.delete(r.groupId);
        if (g.results.length >= 2) {
          s.ready[r.groupId] = g.results;
          s.readyOrder.push(r.groupId);
        }
      }
    }
  }

  /** Drop stale members of waiting groups (counted and recorded). */
  async function discardStale(): Promise<void> {
    const stale: Record<string, number> = {};
    for (const gid of [...s.readyOrder]) {
      const kept = s.ready[gid].filter((r) => {
        const st = staleness(status.policyVersion, r.versionStart);
        if (st > config.training.maxOffPolicySteps) stale[r.rolloutId] = st;
        return st <= config.training.maxOffPolicySteps;
      });
      if (kept.length < 2) {
        kept.forEach((r) => { stale[r.rolloutId] = staleness(status.policyVersion, r.versionStart); });
        delete s.ready[gid];
        s.readyOrder.splice(s.readyOrder.indexOf(gid), 1);
      } else s.ready[gid] = kept;
    }
    const ids = Object.keys(stale);
    if (ids.length) {
      discardedSinceUpdate += ids.length;
      status.discardedStale += ids.length;
      await training.markDiscarded({ rolloutIds: ids, reason: `stale: policy advanced more than ${config.training.maxOffPolicySteps} versions since the first token`, staleness: stale });
    }
  }

  function maybeStartUpdate(): void {
    if (updating || status.updatesDone >= config.training.updates || s.readyOrder.length < config.training.groupsPerUpdate) return;
    const gids = s.readyOrder.splice(0, config.training.groupsPerUpdate);
    updateBatch = gids.flatMap((g) => s.ready[g]);
    gids.forEach((g) => delete s.ready[g]);
    const adv = groupAdvantages(updateBatch, config.trainer.advantage);
    const version = status.policyVersion + 1;
    updating = startChild(weightUpdate, {
      workflowId: `${workflowInfo().workflowId}-update-v${version}`,
      taskQueue: CONTROL_QUEUE,
      args: [{ runId, version, trainer: { url: config.trainer.url, node: config.trainer.node }, engines: settings.engines, advantages: Object.fromEntries(adv), config: { lr: config.trainer.lr, clipLow: config.trainer.clipLow, clipHigh: config.trainer.clipHigh, negativeScale: config.trainer.negativeScale, epochs: config.trainer.epochs, minibatches: config.trainer.minibatches } }],
    }).then((h) => h.result());
    updating.then((r) => { updateDone = r; }, (err: unknown) => { failure = err; });
  }

  async function finishUpdate(u: WeightUpdateResult): Promise<void> {
    updating = null;
    updateDone = null;
    const batch = updateBatch.filter((r) => u.claimed.includes(r.rolloutId));
    const stalenessAtTrain = Object.fromEntries(batch.map((r) => [r.rolloutId, staleness(status.policyVersion, r.versionStart)]));
    status.policyVersion = u.version;
    status.updatesDone++;
    status.lastMeanReward = batch.length ? batch.reduce((a, r) => a + r.reward, 0) / batch.length : null;
    status.pool = poolCounts(s.tasks);
    await training.recordStaleness({ staleness: stalenessAtTrain });
    await training.recordPolicyVersion({
      runId, version: u.version, checkpointPath: u.path, batchRollouts: batch.length, batchMeanReward: status.lastMeanReward,
      discardedStale: discardedSinceUpdate, trainMs: u.trainMs, publishMs: u.publishMs, loadMs: u.loadMs, updateMs: u.updateMs,
      metrics: u.metrics, pool: { active: status.pool.active, retired_mastered: status.pool.retiredMastered, retired_hopeless: status.pool.retiredHopeless, revived: status.pool.revived },
    });
    discardedSinceUpdate = 0;
    upsertSearchAttributes([{ key: FloePolicyVersion, value: status.policyVersion }, ...(status.lastMeanReward === null ? [] : [{ key: FloeMeanReward, value: status.lastMeanReward }])]);
    if (config.eviction.enabled && !evicting) {
      evicting = true;
      void startChild(eviction, {
        workflowId: `${workflowInfo().workflowId}-eviction-v${status.policyVersion}`,
        taskQueue: CONTROL_QUEUE,
        args: [{ runId, version: status.policyVersion, tasks: s.tasks, retiredAt: s.retiredAt, policy: config.eviction, rollout: settings }],
      }).then((h) => h.result()).then((r) => { evictionDone = r; }, (err: unknown) => { failure = err; });
    }
  }

  function applyEviction(r: EvictionResult): void {
    evicting = false;
    evictionDone = null;
    for (const d of r.decisions) {
      const t = s.tasks[d.taskId];
      if (d.decision === 'retire_mastered' || d.decision === 'retire_hopeless') s.retiredAt[d.taskId] = status.policyVersion;
      applyDecision(t, d, Number(d.evidence.version ?? status.policyVersion));
    }
    status.pool = poolCounts(s.tasks);
  }

  // ---- the loop ----
  while (status.state !== 'stopping' && status.updatesDone < config.training.updates) {
    if (status.state === 'paused') {
      await condition(() => status.state !== 'paused');
      continue;
    }
    draining ||= workflowInfo().historyLength > config.training.historyEventLimit;
    if (!draining) {
      while (status.rolloutsInFlight + G <= config.rollout.maxInFlight && status.updatesDone + (updating ? 1 : 0) < config.training.updates) {
        if (!(await startGroup())) break;
      }
    }
    if (draining && status.rolloutsInFlight === 0 && !updating && !evicting) {
      await continueAsNew<typeof trainingRun>({ runId, config, carried: { ...s, status: { ...status, continuedAsNew: status.continuedAsNew + 1 } } });
    }
    await condition(() => finished.length > 0 || updateDone !== null || evictionDone !== null || failure !== null || status.state !== 'running' || (draining && status.rolloutsInFlight === 0 && !updating && !evicting));
    if (failure !== null) throw failure; // a weight update or eviction failed after its retries: the run fails with its reason
    await collect();
    if (updateDone) await finishUpdate(updateDone);
    if (evictionDone) applyEviction(evictionDone);
    await discardStale();
    maybeStartUpdate();
  }

  // Stop: let the update in progress land, abandon the rest (rollouts finish on their own).
  if (updating) await finishUpdate(await updating);
  if (evicting) {
    // its recheck rollouts are its children: let them finish rather than be cut off
    await condition(() => evictionDone !== null || failure !== null);
    if (evictionDone) applyEviction(evictionDone);
  }
  await condition(allHandlersFinished);
  const final = status.state === 'stopping' ? 'stopped' : 'completed';
  await db.recordRunState({ runId, state: final, summary: { ...status, state: final, stopReason } });
  status.state = final;
  return status;
}
