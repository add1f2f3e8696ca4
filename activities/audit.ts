import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import type { Task } from '../core/taskModel.js';
import { getTask } from '../store/tasks.js';
import {
  finishRollout, insertRollout, insertTurn, setSubmissionGrade, upsertGateDecision, upsertSubmission,
  type RolloutEnd, type RolloutStart, type TurnRow,
} from '../store/rollouts.js';
import type { GeneratedTurn } from './generate.js';

/** Audit rows of rollouts: start, each turn (once, when its tool has answered), the
 *  submission, the gate decision and the end (store/rollouts.ts). Every write is idempotent
 *  (activities may be retried). */

export type { RolloutEnd, RolloutStart } from '../store/rollouts.js';

/** What the rollout workflow knows about a turn once it is over. */
export interface TurnOutcome {
  rolloutId: string;
  turnIndex: number;
  /** The generate activity's answer for the turn. */
  generated: Extract<GeneratedTurn, { kind: 'generated' }>;
  /** Shortcut flags of the turn's command (none when it ran no command). */
  shortcutFlags: string[];
  /** The tool's result; null when the turn ran no tool (it submitted, or a gate ended the
   *  rollout on it) or the tool did not answer (the sandbox failed). */
  tool: { observation: string; exitCode: number | null; toolMs: number } | null;
}

/** The turns row of a finished turn: the generation's fields and the tool's. */
function turnRow(t: TurnOutcome): TurnRow {
  const g = t.generated;
  const call = g.verdict.ok ? g.verdict.call : null;
  return {
    rolloutId: t.rolloutId,
    turnIndex: t.turnIndex,
    engineId: g.engineId,
    rawText: g.rawText,
    promptTokens: g.promptTokens,
    completionTokens: g.completionTokens,
    finishReason: g.finishReason,
    weightVersions: g.versions,
    formatOk: g.verdict.ok,
    formatReason: g.verdict.ok ? null : g.verdict.reason,
    toolName: call?.name ?? null,
    toolArgs: call ? call.arguments : null,
    observation: t.tool?.observation ?? null,
    exitCode: t.tool?.exitCode ?? null,
    shortcutFlags: t.shortcutFlags,
    genMs: g.genMs,
    toolMs: t.tool?.toolMs ?? null,
  };
}

export function createAuditActivities(pool: pg.Pool) {
  return {
    async getTask(taskId: string): Promise<Task> {
      const task = await getTask(pool, taskId);
      if (!task) throw ApplicationFailure.nonRetryable(`task ${taskId} is not in the tasks table; load the pool first`, 'UnknownTask');
      return task;
    },

    async recordRolloutStart(s: RolloutStart): Promise<void> {
      await insertRollout(pool, s);
    },

    /** A turn's row, written once with everything known about it. Its ids are already in
     *  turn_tokens (written by generateTurn); the next turn's generation reads both. */
    async recordTurn(t: TurnOutcome): Promise<void> {
      await insertTurn(pool, turnRow(t));
    },

    async recordSubmission(s: { rolloutId: string; diff: string; bytes: number; truncated: boolean }): Promise<void> {
      await upsertSubmission(pool, s);
    },

    async recordGateDecision(d: { rolloutId: string; gate: string; reward: number; detail: unknown; grade?: unknown }): Promise<void> {
      await upsertGateDecision(pool, { rolloutId: d.rolloutId, gate: d.gate, reward: d.reward, detail: d.detail });
      if (d.grade !== undefined) await setSubmissionGrade(pool, d.rolloutId, d.grade);
    },

    async recordRolloutEnd(e: RolloutEnd): Promise<void> {
      await finishRollout(pool, e);
    },
  };
}

export type AuditActivities = ReturnType<typeof createAuditActivities>;
