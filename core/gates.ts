import type { FormatVerdict } from './toolFormat.js';
import { canonicalCallKey, type ToolCall } from './tools.js';

/** The reward gates. A rollout ends at the first invalid format, the first duplicate tool
 *  call or an exhausted budget, with reward 0 and a reason code; no hint-and-continue. Only
 *  an explicit submit reaches grading, and only grading can give reward 1. */

export type Gate =
  | 'passed' // submitted and every FAIL_TO_PASS and PASS_TO_PASS test passed
  | 'tests_failed' // submitted, tests did not all pass (or the diff did not apply)
  | 'format' // the raw output failed the format check (detail: the FormatReason)
  | 'duplicate_call' // same tool with the same arguments as an earlier turn
  | 'budget_turns'
  | 'budget_tokens'
  | 'budget_time'
  | 'diff_too_large'
  | 'sandbox_error'
  | 'engine_error';

export const GATE_REWARD_ZERO: readonly Gate[] = ['tests_failed', 'format', 'duplicate_call', 'budget_turns', 'budget_tokens', 'budget_time', 'diff_too_large', 'sandbox_error', 'engine_error'];

export interface Budgets { maxTurns: number; maxTotalTokens: number; maxWallSeconds: number }

export interface RolloutState {
  turns: number;
  /** Conversation length so far: prompt + completion tokens of the latest turn. */
  tokens: number;
  startedAtMs: number;
  seenCalls: string[];
}

export type Ended = { gate: Exclude<Gate, 'passed' | 'tests_failed'>; detail: Record<string, unknown> };

/** Before generating a turn: is any budget exhausted? */
export function budgetGate(s: RolloutState, b: Budgets, nowMs: number): Ended | null {
  if (s.turns >= b.maxTurns) return { gate: 'budget_turns', detail: { turns: s.turns, maxTurns: b.maxTurns } };
  if (s.tokens >= b.maxTotalTokens) return { gate: 'budget_tokens', detail: { tokens: s.tokens, maxTotalTokens: b.maxTotalTokens } };
  const elapsed = (nowMs - s.startedAtMs) / 1000;
  if (elapsed >= b.maxWallSeconds) return { gate: 'budget_time', detail: { seconds: Math.round(elapsed), maxWallSeconds: b.maxWallSeconds } };
  return null;
}

export type TurnDecision = { action: 'submit' } | { action: 'execute'; call: ToolCall; key: string } | { action: 'end'; ended: Ended };

/** After a turn was generated (counted in s.turns) and its raw output checked. Details name
 *  the offending turn by its 0-based index. */
export function gateTurn(s: RolloutState, verdict: FormatVerdict, b: Budgets): TurnDecision {
  if (!verdict.ok) return { action: 'end', ended: { gate: 'format', detail: { reason: verdict.reason, detail: verdict.detail, turn: s.turns - 1 } } };
  const key = canonicalCallKey(verdict.call);
  if (s.seenCalls.includes(key)) return { action: 'end', ended: { gate: 'duplicate_call', detail: { call: verdict.call, turn: s.turns - 1, firstTurn: s.seenCalls.indexOf(key) } } };
  if (s.tokens > b.maxTotalTokens) return { action: 'end', ended: { gate: 'budget_tokens', detail: { tokens: s.tokens, maxTotalTokens: b.maxTotalTokens } } };
  if (verdict.call.name === 'submit') return { action: 'submit' };
  return { action: 'execute', call: verdict.call, key };
}
