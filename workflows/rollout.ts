import { ActivityFailure, CancellationScope, executeChild, proxyActivities, proxyLocalActivities, upsertSearchAttributes, workflowInfo, ApplicationFailure } from '@temporalio/workflow';
import type { Task } from '../core/taskModel.js';
import { budgetEnding, budgetGate, planTurn, type Ended, type RolloutState } from '../core/gates.js';
import type { Gate, RolloutSettings } from '../core/contracts.js';
import { renderObservation } from '../core/harness.js';
import { detectShortcuts } from '../core/shortcuts.js';
import { rootMessage } from '../core/failures.js';
import { CONTROL_QUEUE, sandboxQueue } from '../core/taskQueues.js';
import { FloeKind, FloeRunId, FloeTaskId } from '../core/searchAttributes.js';
import type { AuditActivities, TurnOutcome } from '../activities/audit.js';
import type { GeneratedTurn, GenerateActivities, TurnIds } from '../activities/generate.js';
import { generationSettings, settingsRef, SETTINGS_NOT_KEPT } from '../core/generationSettings.js';
import type { SandboxActivities } from '../activities/sandbox/index.js';
import { rewardGate, type GateResult, type RolloutEnding } from './rewardGate.js';

/** One attempt at one task: a sandbox, then turns (generate → gate the raw output → run the
 *  tool → record the turn) until submit or a gate ends it, then the rewardGate child decides
 *  the reward. The generate activity records a turn's ids; the turn's row is written once,
 *  when the turn is over, with the generation's fields and the tool's result.
 *  The recipe's layers (settings.recipe, core/gates.ts planTurn) change what a turn does: with
 *  the gate off a bad turn gets an error observation and the rollout goes on; with the raw
 *  check off the Hermes parser's calls all run, in order, their observations joined; with
 *  explicit submission off (or the gate off) the final state of the repository is graded when
 *  the rollout ends without submitting. The audit writes are local activities (run by the
 *  control worker that runs the workflow: one marker event each instead of an activity's
 *  scheduled / started / completed events and a task-queue round trip), and a submission's
 *  diff is taken by the activity that removes the sandbox. */


export interface RolloutInput {
  runId: string;
  rolloutId: string;
  taskId: string;
  groupId: string;
  attempt: number;
  purpose: 'train' | 'recheck' | 'eval' | 'test' | 'audit';
  settings: RolloutSettings;
  seed?: number;
}

export interface RolloutResult {
  rolloutId: string;
  taskId: string;
  groupId: string;
  reward: number;
  gate: Gate;
  nTurns: number;
  versionStart: number | null;
  versionEnd: number | null;
  shortcutFlags: string[];
}

const audit = proxyLocalActivities<AuditActivities>({ startToCloseTimeout: '30 seconds', retry: { maximumAttempts: 10 } });
const engine = proxyActivities<GenerateActivities>({ startToCloseTimeout: '10 minutes', heartbeatTimeout: '30 seconds', retry: { maximumAttempts: 5, initialInterval: '1 second' } });

export async function rollout(input: RolloutInput): Promise<RolloutResult> {
  const { settings: cfg, rolloutId } = input;
  const layers = cfg.recipe;
  upsertSearchAttributes([{ key: FloeRunId, value: input.runId }, { key: FloeKind, value: 'rollout' }, { key: FloeTaskId, value: input.taskId }]);
  const sandbox = proxyActivities<SandboxActivities>({
    taskQueue: sandboxQueue(cfg.sandbox.host),
    startToCloseTimeout: `${cfg.sandbox.commandTimeoutSeconds + 120} seconds`,
    heartbeatTimeout: '30 seconds', // a killed sandbox worker is noticed in seconds, not minutes
    retry: { maximumAttempts: 3 },
  });

  await audit.recordRolloutStart({ runId: input.runId, rolloutId, taskId: input.taskId, groupId: input.groupId, attempt: input.attempt, purpose: input.purpose, workflowId: workflowInfo().workflowId });
  const task: Task = await audit.getTask(input.taskId);

  const genSettings = generationSettings(cfg);
  const genRef = settingsRef(genSettings);
  let settingsSent = false;

  const state: RolloutState = { turns: 0, tokens: 0, startedAtMs: Date.now(), seenCalls: [] };
  const versions: number[] = [];
  const flags = new Set<string>();
  let promptTokens = 0;
  let completionTokens = 0;
  let ending: RolloutEnding;

  let containerId: string | null = null;
  try {
    containerId = (await sandbox.createSandbox({ runId: input.runId, rolloutId, task, limits: cfg.sandbox })).containerId;
    ending = await turns();
  } catch (err) {
    ending = { kind: 'ended', ended: { gate: isEngineFailure(err) ? 'engine_error' : 'sandbox_error', detail: { error: rootMessage(err) } } };
  } finally {
    if (containerId !== null) {
      const id = containerId;
      await CancellationScope.nonCancellable(() => sandbox.destroySandbox({ containerId: id }));
    }
  }

  const decision: GateResult = await executeChild(rewardGate, {
    workflowId: `${workflowInfo().workflowId}-gate`,
    taskQueue: CONTROL_QUEUE,
    args: [{ runId: input.runId, rolloutId, task, ending, sandbox: cfg.sandbox }],
  });

  const result: RolloutResult = {
    rolloutId,
    taskId: input.taskId,
    groupId: input.groupId,
    reward: decision.reward,
    gate: decision.gate,
    nTurns: state.turns,
    versionStart: versions.length ? versions[0] : null,
    versionEnd: versions.length ? versions[versions.length - 1] : null,
    shortcutFlags: [...flags].sort(),
  };
  await audit.recordRolloutEnd({
    ...result,
    promptTokens,
    completionTokens,
    status: decision.gate === 'sandbox_error' || decision.gate === 'engine_error' ? 'failed' : 'finished',
  });
  return result;

  async function turns(): Promise<RolloutEnding> {
    for (;;) {
      const over: Ended | null = budgetGate(state, cfg.budgets, Date.now());
      if (over) return atBudget(over);
      const gen = await generateTurn({ runId: input.runId, rolloutId, turnIndex: state.turns, taskId: input.taskId, groupId: input.groupId, seed: input.seed === undefined ? undefined : input.seed + state.turns });
      if (gen.kind === 'prompt_too_long') return atBudget({ gate: 'budget_tokens', detail: { engine: gen.engineId, detail: gen.detail } });
      const turnIndex = state.turns;
      state.turns++;
      state.tokens = gen.promptTokens + gen.completionTokens;
      promptTokens += gen.promptTokens;
      completionTokens += gen.completionTokens;
      for (const v of gen.versions) if (versions[versions.length - 1] !== v) versions.push(v);

      const turn: TurnOutcome = { rolloutId, turnIndex, generated: gen, shortcutFlags: [], tool: null };
      let ending: RolloutEnding | null;
      try {
        ending = await act(gen, turn);
      } finally {
        // also when the tool failed: the turn happened, and the rollout's audit shows it
        await CancellationScope.nonCancellable(() => audit.recordTurn(turn));
      }
      if (ending) return ending;
    }
  }

  /** One turn's generation. The generation settings go with the rollout's first turn and
   *  whenever the worker says it does not hold them (core/generationSettings.ts); every other
   *  turn names them by reference, so a turn's history carries what varies. */
  async function generateTurn(ids: TurnIds): Promise<GeneratedTurn> {
    if (!settingsSent) {
      settingsSent = true;
      return engine.generateTurn({ ...ids, settingsRef: genRef, settings: genSettings });
    }
    try {
      return await engine.generateTurn({ ...ids, settingsRef: genRef });
    } catch (err) {
      if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === SETTINGS_NOT_KEPT)) throw err;
      return engine.generateTurn({ ...ids, settingsRef: genRef, settings: genSettings });
    }
  }

  /** An exhausted budget: reward 0 under the gate, else the final state is graded. */
  async function atBudget(over: Ended): Promise<RolloutEnding> {
    const b = budgetEnding(over, layers);
    return b.action === 'end' ? { kind: 'ended', ended: b.ended } : finalState(b.trigger);
  }

  /** The diff of the repository as it is now, recorded as the rollout's submission. */
  async function submission(finalStateOf?: Ended): Promise<RolloutEnding> {
    // the rollout is over: the diff, then the container is removed, in one activity
    const d = await sandbox.takeDiffAndDestroy({ containerId: containerId!, maxBytes: cfg.maxDiffBytes });
    containerId = null;
    await audit.recordSubmission({ rolloutId, diff: d.diff, bytes: d.bytes, truncated: d.truncated });
    if (d.truncated) return { kind: 'ended', ended: { gate: 'diff_too_large', detail: { bytes: d.bytes, maxBytes: cfg.maxDiffBytes } } };
    return finalStateOf ? { kind: 'submitted', diff: d.diff, finalState: finalStateOf } : { kind: 'submitted', diff: d.diff };
  }

  /** The rollout ended without a submit (budget, or an answer without a tool call) and the
   *  layers grade whatever the repository holds. */
  function finalState(trigger: Ended): Promise<RolloutEnding> {
    return submission(trigger);
  }

  /** Gate a generated turn and run its tools, filling in `turn` (shortcut flags, tool result).
   *  Returns how the rollout ends on this turn, or null when it goes on. */
  async function act(gen: Extract<GeneratedTurn, { kind: 'generated' }>, turn: TurnOutcome): Promise<RolloutEnding | null> {
    const steps = planTurn(state, { verdict: gen.verdict, rawText: gen.rawText }, cfg.budgets, layers);
    const observations: string[] = [];
    let exitCode: number | null = null;
    let toolMs = 0;
    const flush = (): void => {
      if (observations.length) turn.tool = { observation: observations.join('\n'), exitCode, toolMs };
    };
    for (const step of steps) {
      if (step.kind === 'end') { flush(); return { kind: 'ended', ended: step.ended }; }
      if (step.kind === 'grade') { flush(); return finalState(step.trigger); }
      if (step.kind === 'submit') { flush(); return submission(); }
      if (step.kind === 'hint') {
        observations.push(step.observation);
        exitCode = null;
        continue;
      }
      state.seenCalls.push(step.key);
      const command = String(step.call.arguments.command ?? '');
      const callFlags = detectShortcuts(command);
      turn.shortcutFlags = [...new Set([...turn.shortcutFlags, ...callFlags])];
      callFlags.forEach((f) => flags.add(f));
      const started = Date.now();
      const r = await sandbox.execInSandbox({ containerId: containerId!, command, timeoutSeconds: cfg.sandbox.commandTimeoutSeconds, maxOutputBytes: cfg.sandbox.maxOutputBytes });
      observations.push(renderObservation(r, cfg.maxObservationChars, cfg.sandbox.commandTimeoutSeconds));
      exitCode = r.exitCode;
      toolMs += Date.now() - started;
    }
    flush();
    return null;
  }
}

function isEngineFailure(err: unknown): boolean {
  const e = err as { activityType?: string } | undefined;
  return e?.activityType === 'generateTurn' || (err instanceof ApplicationFailure && err.type === 'EngineError');
}
