import pg from 'pg';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { CONTROL_QUEUE } from '../../core/taskQueues.js';
import { parseRunConfig } from '../../core/config.js';
import { BASH_COMMAND_MAX_CHARS, renderToolCall, type ToolCall } from '../../core/tools.js';
import { createTaskActivities } from '../../activities/tasks.js';
import { insertRun } from '../../store/runs.js';
import { listTurnRequests } from '../../store/engines.js';
import { getGateDecision, listRollouts, listTurns, listTurnTokens } from '../../store/rollouts.js';
import { loadToySuite } from '../../tasks/loaders.js';
import type { RolloutInput, RolloutResult } from '../../workflows/rollout.js';
import type { RolloutSettings } from '../../core/contracts.js';
import { settings, withWorkers, type Platform } from '../helpers/platform.js';
import { EOS, startScriptedEngine, scriptedRolloutSettings, type ScriptedEngine, type ScriptedOutput } from '../helpers/scriptedEngine.js';
import { chaosCase, type ChaosOutcome } from '../helpers/chaos.js';
import { rng } from '../helpers/rng.js';

/** Chaos, bad model output (issue 17): an engine that emits random bytes, a huge output (at
 *  the turn's token limit, and far past it), invalid UTF-8, control characters (NUL, ESC, BEL)
 *  or a well-formed tool call whose argument is 1 MB. Each runs as a real rollout workflow
 *  (Temporal, Postgres, a podman sandbox) on the scripted engine double, which returns the raw
 *  token ids as given (byte tokenizer: ids 0-255 are bytes, 256 EOS). Each rollout must
 *  complete (not fail) with a gate decision in Postgres that rejects the turn with its specific
 *  reason, and the worker must go on running rollouts afterwards. */

const runId = `chaos-model-output-${process.pid}-${Date.now()}`;
const tasks = loadToySuite({ onBadRow: 'fail' }).tasks;
const TASK = tasks[0].instanceId;
let platform: Platform;
let engine: ScriptedEngine;
let db: pg.Pool;

beforeAll(async () => {
  platform = await withWorkers(['control', 'sandbox']);
  engine = await startScriptedEngine();
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  await insertRun(db, { runId, workflowId: runId, name: 'chaos-model-output', config: parseRunConfig({ name: 'chaos-model-output' }) });
  await createTaskActivities(db).loadTaskPool({ source: 'toy', include: [], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
});

afterAll(async () => {
  await db?.end();
  await engine?.close();
  await platform?.close();
});

const bytes = (s: string): number[] => [...Buffer.from(s, 'utf8')];
const call = (c: ToolCall): string => renderToolCall(c);
/** A well-formed bash call, written out by hand: renderToolCall refuses an over-long argument. */
const bashCall = (command: string): string => `<tool_call>{"name":"bash","arguments":{"command":${JSON.stringify(command)}}}</tool_call>`;
/** A turn the engine ended with EOS: its raw bytes, then 256. */
const stopped = (b: number[]): ScriptedOutput => ({ tokenIds: [...b, EOS], finishReason: 'stop' });
/** The run config's default token limit per turn (what the engine is asked for). */
const MAX_TOKENS = parseRunConfig({}).policy.maxTokensPerTurn;

interface Outcome {
  result: RolloutResult;
  /** Temporal's status of the rollout workflow. */
  workflow: string;
  /** The rollouts row's status (failed: the rollout was lost). */
  status: string;
  gate: { gate: string; reward: number; detail: { reason?: string; detail?: string; error?: string } };
}

let counter = 0;
/** One real rollout whose first turn is `out`; its workflow's status, its row, its gate decision. */
async function rolloutOf(name: string, out: ScriptedOutput, tune: (s: RolloutSettings) => RolloutSettings = (s) => s): Promise<Outcome> {
  const rolloutId = `${runId}-${name}-${counter++}`;
  engine.script(rolloutId, [out]);
  // what a run with the default config asks an engine for per turn (the double ignores it)
  const base = scriptedRolloutSettings(engine.url, { maxTurns: 2 });
  const tuned = tune({ ...base, sampling: { ...base.sampling, maxTokensPerTurn: MAX_TOKENS } });
  const input: RolloutInput = { runId, rolloutId, taskId: TASK, groupId: `${runId}-${name}`, attempt: 0, purpose: 'test', settings: tuned };
  const handle = await platform.client.workflow.start('rollout', { taskQueue: CONTROL_QUEUE, workflowId: `floe-rollout-${rolloutId}`, args: [input] });
  const result = (await handle.result()) as RolloutResult;
  const workflow = (await handle.describe()).status.name;
  const row = (await listRollouts(db, runId)).find((r) => r.rolloutId === rolloutId);
  const gate = (await getGateDecision(db, rolloutId)) as Outcome['gate'] | null;
  if (!row || !gate) throw new Error(`rollout ${rolloutId}: no rollouts row or no gate decision in Postgres`);
  return { result, workflow, status: row.status, gate };
}

/** The checks every case shares: completed, not lost, rejected by the format gate with `reason`. */
function rejected(o: Outcome, reason: string): void {
  expect(o.workflow).toBe('COMPLETED');
  expect(o.status, JSON.stringify(o.gate)).toBe('finished');
  expect(o.result).toMatchObject({ reward: 0, gate: 'format', nTurns: 1 });
  expect(o.gate).toMatchObject({ gate: 'format', reward: 0, detail: { reason } });
}

const line = (o: Outcome): string => `${o.gate.gate}/${o.gate.detail.reason ?? o.gate.detail.error}: ${String(o.gate.detail.detail ?? '').replace(/\s+/g, ' ').slice(0, 200)}`;
const outcome = (o: Outcome, facts: Record<string, unknown> = {}): ChaosOutcome => ({ detail: line(o), rolloutsLost: o.status === 'failed' ? 1 : 0, facts: { workflow: o.workflow, rollout: o.status, ...facts } });

describe('chaos: bad model output', () => {
  chaosCase('model-output', 'random bytes', async () => {
    const r = rng(17);
    // as many as the turn holds (its EOS included)
    const noise = Array.from({ length: MAX_TOKENS - 1 }, () => Math.floor(r() * 256));
    const o = await rolloutOf('random', stopped(noise));
    rejected(o, 'invalid_utf8');
    // the ids are kept exactly as generated (the trainer would score these, were the turn kept)
    const [t] = await listTurnTokens(db, o.result.rolloutId);
    expect(t.completionIds).toEqual([...noise, EOS]);
    return outcome(o, { bytes: noise.length });
  }, 120_000);

  chaosCase('model-output', 'token ids outside the vocabulary (an engine serving another model)', async () => {
    // a valid call after reasoning that holds ids the byte tokenizer (259 ids) does not have:
    // decoded, they read as text; kept, they would reach the next prompt and the trainer
    const ids = [...bytes('hm '), 5000, 70000, ...bytes(call({ name: 'bash', arguments: { command: 'ls' } }))];
    const o = await rolloutOf('oov', stopped(ids));
    expect(o.workflow).toBe('COMPLETED');
    expect(o.result).toMatchObject({ reward: 0, gate: 'engine_error', nTurns: 0 });
    expect(o.gate.detail.error).toMatch(/returned token id 5000, outside the vocabulary of the policy's tokenizer byte \[0, 259\): it serves a model with another tokenizer/);
    // not one id of it was kept, and no command ran
    expect(await listTurnTokens(db, o.result.rolloutId)).toEqual([]);
    expect(await listTurns(db, o.result.rolloutId)).toEqual([]);
    // an attempt the engine spoiled, ended by the engine_error gate: never trained on (status failed)
    expect(o.status).toBe('failed');
    return { detail: `engine_error: ${String(o.gate.detail.error).slice(0, 200)}`, rolloutsLost: 0, facts: { workflow: o.workflow, rollout: o.status } };
  }, 120_000);

  chaosCase('model-output', 'a huge output cut at the turn\'s token limit', async () => {
    // a well-formed call that needs more than the turn's tokens: the engine stops at the limit
    const full = bytes(call({ name: 'bash', arguments: { command: `echo ${'x'.repeat(MAX_TOKENS * 4)}` } }));
    const o = await rolloutOf('at-limit', { tokenIds: full.slice(0, MAX_TOKENS), finishReason: 'length' });
    rejected(o, 'truncated');
    expect((await listTurns(db, o.result.rolloutId))[0]).toMatchObject({ completionTokens: MAX_TOKENS, finishReason: 'length', formatOk: false, formatReason: 'truncated' });
    return outcome(o, { maxTokensPerTurn: MAX_TOKENS });
  }, 120_000);

  chaosCase('model-output', 'a huge output far past the token limit (an engine that ignores max_tokens)', async () => {
    // 1 MiB of a well-formed call, stopped by EOS, from an engine asked for MAX_TOKENS
    const huge = bytes(bashCall(`echo ${'y'.repeat(1 << 20)}`));
    const o = await rolloutOf('past-limit', stopped(huge));
    rejected(o, 'truncated');
    // what the turn holds is what was asked for: the ids past the limit are not the policy's turn
    const [t] = await listTurnTokens(db, o.result.rolloutId);
    expect(t.completionIds).toEqual(huge.slice(0, MAX_TOKENS));
    // and the engine's request record says what it sent and what it was asked for
    const [req] = await listTurnRequests(db, o.result.rolloutId, 0);
    expect(req).toMatchObject({ outcome: 'answered', generated: MAX_TOKENS, finishReason: 'length', detail: { overLimit: { generated: huge.length + 1, maxTokens: MAX_TOKENS } } });
    return outcome(o, { generated: huge.length + 1, kept: t.completionIds.length, maxTokensPerTurn: MAX_TOKENS });
  }, 180_000);

  chaosCase('model-output', 'invalid UTF-8 byte sequences', async () => {
    // each inside an otherwise valid call: stray continuation, overlong '/', a UTF-16 surrogate,
    // a cut 3-byte sequence, above U+10FFFF, bytes never valid (FE, FF)
    const seqs: Record<string, number[]> = {
      continuation: [0x80], overlong: [0xc0, 0xaf], surrogate: [0xed, 0xa0, 0x80], cut: [0xe2, 0x82], above_max: [0xf4, 0x90, 0x80, 0x80], fe_ff: [0xfe, 0xff],
    };
    const outs = await Promise.all(Object.entries(seqs).map(async ([name, seq]) => {
      const [head, tail] = call({ name: 'bash', arguments: { command: 'echo @' } }).split('@');
      return { name, o: await rolloutOf(`utf8-${name}`, stopped([...bytes(head), ...seq, ...bytes(tail)])) };
    }));
    for (const { o } of outs) rejected(o, 'invalid_utf8');
    return { detail: line(outs[2].o), rolloutsLost: outs.filter(({ o }) => o.status === 'failed').length, facts: Object.fromEntries(outs.map(({ name, o }) => [name, line(o)])) };
  }, 180_000);

  chaosCase('model-output', 'control characters (NUL, ESC, BEL) in the call', async () => {
    // terminal noise around the call and raw inside its JSON string, where JSON needs them escaped
    const text = '\u001b[2J\u001b[H\u0007thinking\u0000\b\u007f\n<tool_call>{"name":"bash","arguments":{"command":"printf \u001b[31mred\u0000"}}</tool_call>';
    const o = await rolloutOf('control', stopped(bytes(text)));
    rejected(o, 'invalid_json');
    expect(o.gate.detail.detail).toMatch(/raw control character U\+001B inside a string/);
    // the turns row keeps the text (NUL shown as U+FFFD: Postgres text holds no NUL)
    expect((await listTurns(db, o.result.rolloutId))[0].rawText).toContain('thinking\uFFFD');
    return outcome(o);
  }, 120_000);

  chaosCase('model-output', 'a well-formed tool call with a 1 MB argument', async () => {
    const arg = `echo ${'z'.repeat(1 << 20)}`;
    const text = bashCall(arg);
    // a turn budget that holds the whole call, so the gate (not the token limit) must refuse it
    const o = await rolloutOf('1mb-arg', stopped(bytes(text)), (s) => ({ ...s, sampling: { ...s.sampling, maxTokensPerTurn: text.length + 16 }, budgets: { ...s.budgets, maxTotalTokens: 4 * text.length } }));
    rejected(o, 'argument_too_long');
    expect(o.gate.detail.detail).toBe(`bash.command has ${arg.length} characters; the limit is ${BASH_COMMAND_MAX_CHARS}`);
    return outcome(o, { argumentChars: arg.length });
  }, 180_000);

  chaosCase('model-output', 'the worker runs rollouts as before afterwards', async () => {
    const gold = tasks[0].solution!.map((c) => call(c as ToolCall));
    const rolloutId = `${runId}-after-${counter++}`;
    engine.script(rolloutId, gold.map((t) => stopped(bytes(t))));
    const input: RolloutInput = { runId, rolloutId, taskId: TASK, groupId: `${runId}-after`, attempt: 0, purpose: 'test', settings: scriptedRolloutSettings(engine.url, { maxTurns: 4 }) };
    const r = (await platform.client.workflow.execute('rollout', { taskQueue: CONTROL_QUEUE, workflowId: `floe-rollout-${rolloutId}`, args: [input] })) as RolloutResult;
    expect(r).toMatchObject({ reward: 1, gate: 'passed' });
    const all = await listRollouts(db, runId);
    // every rollout has its decision; the only failed one is the engine that spoke another vocabulary
    const lost = all.filter((x) => x.status !== 'finished' && x.gate !== 'engine_error');
    expect(lost.map((x) => `${x.rolloutId}: ${x.status} ${x.gate}`)).toEqual([]);
    return { detail: `gold fix after ${all.length - 1} bad-output rollouts: ${r.gate}, reward ${r.reward}`, rolloutsLost: lost.length, facts: { rollouts: all.length } };
  }, 180_000);
});
