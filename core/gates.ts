import type { FormatVerdict } from './toolFormat.js';
import { canonicalCallKey, validateToolCall, type ToolCall } from './tools.js';
import { parseHermes } from './hermesParser.js';
import type { Budgets, Gate, Layers } from './contracts.js';

export type { Budgets, Gate, Layers } from './contracts.js';

/** The reward gates. A rollout ends at the first invalid format, the first duplicate tool
 *  call or an exhausted budget, with reward 0 and a reason code; no hint-and-continue. Only
 *  an explicit submit reaches grading, and only grading can give reward 1.
 *  That is the recipe with every layer on (gateTurn). Each layer is a switch (config
 *  `recipe`): planTurn below plans a turn under any setting of them, and with all on decides
 *  exactly what gateTurn does. */

export const GATE_REWARD_ZERO: readonly Gate[] = ['tests_failed', 'format', 'duplicate_call', 'budget_turns', 'budget_tokens', 'budget_time', 'diff_too_large', 'sandbox_error', 'engine_error'];

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

// ---------------------------------------------------------------------------------------
// The recipe's layers (config `recipe`, docs/design.md "The recipe as switches"). With every layer on, planTurn
// decides exactly what gateTurn decides; a layer switched off behaves as public harnesses do.


export const ALL_LAYERS_ON: Layers = { rewardGate: true, rawFormatCheck: true, explicitSubmit: true };

/** An exhausted budget is graded (the final state of the repository) unless the gate and
 *  explicit submission are both on: either off, and the harness grades whatever the repo holds. */
export function gradesOnBudget(l: Layers): boolean {
  return !l.rewardGate || !l.explicitSubmit;
}

/** How a rollout ends at an exhausted budget: with 0 under the gate, else the final state graded. */
export function budgetEnding(over: Ended, l: Layers): { action: 'end'; ended: Ended } | { action: 'grade'; trigger: Ended } {
  return gradesOnBudget(l) ? { action: 'grade', trigger: over } : { action: 'end', ended: over };
}

/** One step of a turn, run in order by the rollout workflow. */
export type TurnStep =
  | { kind: 'execute'; call: ToolCall; key: string }
  | { kind: 'submit' }
  /** hint-and-continue: an error observation instead of a tool result */
  | { kind: 'hint'; observation: string; reason: string; detail: Record<string, unknown> }
  /** the rollout ends here with reward 0 (a gate) */
  | { kind: 'end'; ended: Ended }
  /** the rollout ends here and the repository's final state is graded */
  | { kind: 'grade'; trigger: Ended };

/** What the model asked for in a turn, as the layers read it: the raw verdict (always computed,
 *  core/toolFormat.ts) and the decoded text (for the Hermes parser). */
export interface TurnOutput { verdict: FormatVerdict; rawText: string }

/** The hint a harness shows for a turn it could not run (hint-and-continue). In the spirit of
 *  mini-swe-agent's format-error template: what went wrong and the expected shape, no more. */
export function hintObservation(reason: string, detail: string): string {
  return `error (${reason}): ${detail}\nReply with a tool call: <tool_call>{"name": "bash", "arguments": {"command": "..."}}</tool_call>, or <tool_call>{"name": "submit", "arguments": {}}</tool_call> when done.`;
}

type Problem = { gate: 'format' | 'duplicate_call'; reason: string; detail: Record<string, unknown>; text: string };

/** The calls of a turn, checked against the registry, or why the turn has none. */
function callsOf(out: TurnOutput, turn: number, l: Layers): { calls: (ToolCall | Problem)[]; none: Problem | null; noToolCall: boolean } {
  if (l.rawFormatCheck) {
    const v = out.verdict;
    if (v.ok) return { calls: [v.call], none: null, noToolCall: false };
    return { calls: [], none: { gate: 'format', reason: v.reason, detail: { reason: v.reason, detail: v.detail, turn }, text: v.detail }, noToolCall: v.reason === 'missing_tool_call' };
  }
  const parsed = parseHermes(out.rawText);
  if (parsed.calls.length === 0) {
    const text = parsed.dropped.length ? `no tool call could be parsed (${parsed.dropped.map((d) => d.error).join('; ')})` : 'the reply has no tool call';
    return { calls: [], none: { gate: 'format', reason: 'no_tool_call', detail: { reason: 'no_tool_call', parser: 'hermes', dropped: parsed.dropped, turn }, text }, noToolCall: true };
  }
  return {
    calls: parsed.calls.map((c): ToolCall | Problem => {
      const v = validateToolCall({ name: c.name, arguments: c.arguments });
      return v.ok ? v.call : { gate: 'format', reason: v.reason, detail: { reason: v.reason, detail: v.detail, parser: 'hermes', call: c.match, turn }, text: v.detail };
    }),
    none: null,
    noToolCall: false,
  };
}

/**
 * After a turn was generated (counted in s.turns): the steps it takes, in order. Does not
 * change s; the workflow adds each executed call's key to s.seenCalls as it runs it.
 *
 *   - The calls: the raw verdict's one call (rawFormatCheck), or every call the Hermes parser
 *     found, each checked against the tool registry.
 *   - No call at all (raw: missing_tool_call; Hermes: none parsed): with explicitSubmit off the
 *     rollout ends and its final state is graded (the model answered); otherwise it is a format
 *     failure.
 *   - A format failure (of the turn, or of one parsed call) or a duplicate (of an earlier turn's
 *     call, or of an earlier call in this turn): the gate ends the rollout there; without the
 *     gate it gets an error observation and the turn's next call, if any, goes on.
 *   - A conversation over maxTotalTokens, checked once, after the first call's duplicate check
 *     (gateTurn's order): ends the rollout, or is graded when gradesOnBudget.
 *   - submit: the rollout ends there and is graded; calls after it do not run.
 */
export function planTurn(s: RolloutState, out: TurnOutput, b: Budgets, l: Layers): TurnStep[] {
  const turn = s.turns - 1;
  const { calls, none, noToolCall } = callsOf(out, turn, l);
  if (none) {
    if (noToolCall && !l.explicitSubmit) return [{ kind: 'grade', trigger: { gate: 'format', detail: { ...none.detail, answered: 'no_tool_call' } } }];
    return [problemStep(none, l)];
  }
  const steps: TurnStep[] = [];
  const seen = [...s.seenCalls];
  let tokensChecked = false;
  for (const c of calls) {
    let step: TurnStep;
    if ('gate' in c) {
      step = problemStep(c, l);
    } else {
      const key = canonicalCallKey(c);
      if (seen.includes(key)) {
        step = problemStep({ gate: 'duplicate_call', reason: 'duplicate_call', detail: { call: c, turn, firstTurn: s.seenCalls.indexOf(key) }, text: 'this exact call was already made; its result will not change' }, l);
      } else {
        if (!tokensChecked && s.tokens > b.maxTotalTokens) {
          const over: Ended = { gate: 'budget_tokens', detail: { tokens: s.tokens, maxTotalTokens: b.maxTotalTokens } };
          steps.push(gradesOnBudget(l) ? { kind: 'grade', trigger: over } : { kind: 'end', ended: over });
          return steps;
        }
        if (c.name === 'submit') {
          steps.push({ kind: 'submit' });
          return steps;
        }
        seen.push(key);
        step = { kind: 'execute', call: c, key };
      }
    }
    tokensChecked = true;
    steps.push(step);
    if (step.kind === 'end') return steps;
  }
  return steps;
}

function problemStep(p: Problem, l: Layers): TurnStep {
  if (l.rewardGate) return { kind: 'end', ended: { gate: p.gate, detail: p.detail } };
  return { kind: 'hint', observation: hintObservation(p.reason, p.text), reason: p.reason, detail: p.detail };
}
