// The recipe's layers: config switches (core/config.ts `recipe`), the presets of the published
// ablation (core/recipeLayers.ts), the turn planner under each setting (core/gates.ts planTurn),
// and real rollouts with the gate and the raw check switched off (Temporal test server,
// Postgres, podman sandboxes, the scripted engine double — as test/rollout.test.ts).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedRolloutSettings } from './helpers/scriptedEngine.js';
import { parseRunConfig } from '../core/config.js';
import { ALL_LAYERS_ON, budgetEnding, gateTurn, planTurn, type Layers, type RolloutState } from '../core/gates.js';
import { checkRawOutput, type FormatVerdict } from '../core/toolFormat.js';
import { canonicalCallKey, renderToolCall, type ToolCall } from '../core/tools.js';
import { LAYER_NAMES, layerOverrides, parseLayerList, withLayer } from '../core/recipeLayers.js';
import { recheckDue } from '../core/eviction.js';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { createTaskActivities } from '../activities/tasks.js';
import { insertRun } from '../store/runs.js';
import { getGateDecision, listTurns } from '../store/rollouts.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { RolloutInput, RolloutResult } from '../workflows/rollout.js';
import type { RolloutSettings } from '../core/contracts.js';

const budgets = { maxTurns: 4, maxTotalTokens: 1000, maxWallSeconds: 60 };
const state = (over: Partial<RolloutState> = {}): RolloutState => ({ turns: 1, tokens: 10, startedAtMs: 0, seenCalls: [], ...over });
const ls: ToolCall = { name: 'bash', arguments: { command: 'ls' } };
const submitCall: ToolCall = { name: 'submit', arguments: {} };
const raw = (text: string): FormatVerdict => checkRawOutput({ text, finishReason: 'stop' });
const out = (text: string) => ({ verdict: raw(text), rawText: text });
const layers = (l: Partial<Layers>): Layers => ({ ...ALL_LAYERS_ON, ...l });

describe('the recipe block of the run config', () => {
  it('every layer is on by default, and each parses as a switch', () => {
    expect(parseRunConfig({}).recipe).toEqual({ rewardGate: true, rawFormatCheck: true, explicitSubmit: true, cacheRebuild: true, recheck: true });
    expect(parseRunConfig({ recipe: { rewardGate: false } }).recipe.rewardGate).toBe(false);
    expect(() => parseRunConfig({ recipe: { gate: false } })).toThrow(/recipe/);
  });
});

describe('layer presets', () => {
  it('each preset parses through parseRunConfig; full equals the defaults', () => {
    for (const n of LAYER_NAMES) expect(() => parseRunConfig(withLayer({}, n))).not.toThrow();
    expect(parseRunConfig(withLayer({}, 'full'))).toEqual(parseRunConfig({}));
  });

  it('the ladder: naive → gate (+ gated reward, explicit submit) → raw (+ raw check) → full (+ cache rebuild, least-loaded)', () => {
    expect(layerOverrides('naive')).toEqual({ recipe: { rewardGate: false, rawFormatCheck: false, explicitSubmit: false, cacheRebuild: false }, engines: { router: 'sticky' } });
    expect(layerOverrides('gate')).toEqual({ recipe: { rewardGate: true, rawFormatCheck: false, explicitSubmit: true, cacheRebuild: false }, engines: { router: 'sticky' } });
    expect(layerOverrides('raw')).toEqual({ recipe: { rewardGate: true, rawFormatCheck: true, explicitSubmit: true, cacheRebuild: false }, engines: { router: 'sticky' } });
    expect(layerOverrides('full')).toEqual({ recipe: { rewardGate: true, rawFormatCheck: true, explicitSubmit: true, cacheRebuild: true }, engines: { router: 'least-loaded' } });
  });

  it('a preset keeps the rest of the config and overrides a config\'s own switches', () => {
    const c = parseRunConfig(withLayer({ engines: { count: 3, router: 'round-robin' }, recipe: { recheck: false }, trainer: { advantage: 'reward' } }, 'naive'));
    expect(c.engines).toMatchObject({ count: 3, router: 'sticky' });
    expect(c.recipe).toMatchObject({ recheck: false, rewardGate: false });
    expect(c.trainer.advantage).toBe('reward');
  });

  it('parses a --layers list', () => {
    expect(parseLayerList('naive, gate,raw,full')).toEqual(['naive', 'gate', 'raw', 'full']);
    expect(() => parseLayerList('naive,fancy')).toThrow(/unknown layer "fancy"/);
    expect(() => parseLayerList('raw,raw')).toThrow(/twice/);
  });

  it('recheck off: retired tasks are never due', () => {
    const p = { masteredK: 4, hopelessM: 4, recheckEvery: 2, reviveBelow: 0.75 };
    expect(recheckDue(10, null, 2, p)).toBe(true);
    expect(recheckDue(10, null, 2, { ...p, recheck: true })).toBe(true);
    expect(recheckDue(10, null, 2, { ...p, recheck: false })).toBe(false);
  });
});

describe('planTurn', () => {
  it('with every layer on it decides what gateTurn decides', () => {
    const cases: [RolloutState, string][] = [
      [state(), renderToolCall(ls)],
      [state(), renderToolCall(submitCall)],
      [state(), 'no call here'],
      [state(), `${renderToolCall(ls)}\n`],
      [state({ seenCalls: [canonicalCallKey(ls)] }), renderToolCall(ls)],
      [state({ tokens: 5000 }), renderToolCall(ls)],
    ];
    for (const [s, text] of cases) {
      const g = gateTurn(s, raw(text), budgets);
      const steps = planTurn(s, out(text), budgets, ALL_LAYERS_ON);
      expect(steps).toHaveLength(1);
      const want = g.action === 'end' ? { kind: 'end', ended: g.ended } : g.action === 'submit' ? { kind: 'submit' } : { kind: 'execute', call: g.call, key: g.key };
      expect(steps[0]).toEqual(want);
    }
  });

  it('gate off (hint-and-continue): a malformed turn gets an error observation instead of ending', () => {
    const [step] = planTurn(state(), out(`${renderToolCall(ls)} trailing`), budgets, layers({ rewardGate: false }));
    expect(step).toMatchObject({ kind: 'hint', reason: 'trailing_text' });
    expect(step.kind === 'hint' && step.observation).toMatch(/^error \(trailing_text\)/);
  });

  it('gate off: a duplicate call gets an error observation, and is not run again', () => {
    const steps = planTurn(state({ seenCalls: [canonicalCallKey(ls)] }), out(renderToolCall(ls)), budgets, layers({ rewardGate: false }));
    expect(steps).toMatchObject([{ kind: 'hint', reason: 'duplicate_call' }]);
  });

  it('raw check off: every call the Hermes parser finds runs, in order; submit ends the turn there', () => {
    const pwd: ToolCall = { name: 'bash', arguments: { command: 'pwd' } };
    const text = `thinking <tool_call>${JSON.stringify(ls)}</tool_call> and <tool_call>${JSON.stringify(pwd)}</tool_call>`;
    expect(planTurn(state(), out(text), budgets, layers({ rawFormatCheck: false })).map((s) => s.kind === 'execute' && s.call)).toEqual([ls, pwd]);
    const withSubmit = `<tool_call>${JSON.stringify(ls)}</tool_call><tool_call>${JSON.stringify(submitCall)}</tool_call><tool_call>${JSON.stringify(pwd)}</tool_call>`;
    expect(planTurn(state(), out(withSubmit), budgets, layers({ rawFormatCheck: false })).map((s) => s.kind)).toEqual(['execute', 'submit']);
  });

  it('raw check off, gate on: the gate checks each call after the parser (no call, unknown tool, duplicate in the turn)', () => {
    const l = layers({ rawFormatCheck: false });
    expect(planTurn(state(), out('just talking'), budgets, l)).toMatchObject([{ kind: 'end', ended: { gate: 'format', detail: { reason: 'no_tool_call' } } }]);
    expect(planTurn(state(), out('<tool_call>{"name": "python", "arguments": {}}</tool_call>'), budgets, l)).toMatchObject([{ kind: 'end', ended: { gate: 'format', detail: { reason: 'unknown_tool' } } }]);
    const twice = `<tool_call>${JSON.stringify(ls)}</tool_call><tool_call>${JSON.stringify(ls)}</tool_call>`;
    expect(planTurn(state(), out(twice), budgets, l).map((s) => s.kind === 'end' ? s.ended.gate : s.kind)).toEqual(['execute', 'duplicate_call']);
    // gate off: the same duplicate is an error observation after the first runs
    expect(planTurn(state(), out(twice), budgets, layers({ rawFormatCheck: false, rewardGate: false })).map((s) => s.kind)).toEqual(['execute', 'hint']);
  });

  it('raw check off: a cut-off output whose call parses runs (its raw verdict is still a failure)', () => {
    const text = `<tool_call>${JSON.stringify(ls)}`;
    const verdict = checkRawOutput({ text, finishReason: 'length' });
    expect(verdict.ok).toBe(false);
    expect(planTurn(state(), { verdict, rawText: text }, budgets, layers({ rawFormatCheck: false }))).toMatchObject([{ kind: 'execute', call: ls }]);
  });

  it('explicit submission off: an answer without a tool call ends the rollout and the final state is graded', () => {
    expect(planTurn(state(), out('I am done.'), budgets, layers({ explicitSubmit: false }))).toMatchObject([{ kind: 'grade', trigger: { gate: 'format', detail: { reason: 'missing_tool_call' } } }]);
    expect(planTurn(state(), out('I am done.'), budgets, layers({ explicitSubmit: false, rawFormatCheck: false }))).toMatchObject([{ kind: 'grade', trigger: { detail: { reason: 'no_tool_call' } } }]);
    // a malformed call is not an answer: the gate still ends the rollout on it
    expect(planTurn(state(), out(`${renderToolCall(ls)}x`), budgets, layers({ explicitSubmit: false }))).toMatchObject([{ kind: 'end' }]);
  });

  it('an exhausted budget earns 0 under the gate with explicit submission, else the final state is graded', () => {
    const over = { gate: 'budget_turns' as const, detail: {} };
    expect(budgetEnding(over, ALL_LAYERS_ON)).toEqual({ action: 'end', ended: over });
    expect(budgetEnding(over, layers({ rewardGate: false }))).toEqual({ action: 'grade', trigger: over });
    expect(budgetEnding(over, layers({ explicitSubmit: false }))).toEqual({ action: 'grade', trigger: over });
    expect(planTurn(state({ tokens: 5000 }), out(renderToolCall(ls)), budgets, layers({ rewardGate: false }))).toMatchObject([{ kind: 'grade', trigger: { gate: 'budget_tokens' } }]);
  });
});

describe('rollouts with layers switched off (scripted engine, real sandboxes)', () => {
  // imported lazily: the unit tests above need no services
  let platform: Awaited<ReturnType<typeof import('./helpers/platform.js')['withWorkers']>>;
  let engine: import('./helpers/scriptedEngine.js').ScriptedEngine;
  let db: pg.Pool;
  const runId = `recipe-layers-test-${process.pid}-${Date.now()}`;
  const tasks = loadToySuite({ onBadRow: 'fail' }).tasks;
  let counter = 0;

  beforeAll(async () => {
    const { settings, withWorkers } = await import('./helpers/platform.js');
    const { startScriptedEngine } = await import('./helpers/scriptedEngine.js');
    platform = await withWorkers(['control', 'sandbox']);
    engine = await startScriptedEngine();
    db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
    await insertRun(db, { runId, workflowId: runId, name: 'recipe-layers-test', config: parseRunConfig({ name: 'recipe-layers-test' }) });
    await createTaskActivities(db).loadTaskPool({ source: 'toy', include: [], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
  }, 600_000);

  afterAll(async () => {
    await db?.end();
    await engine?.close();
    await platform?.close();
  }, 600_000);

  function settingsFor(recipe: Partial<Layers>): RolloutSettings {
    return scriptedRolloutSettings(engine.url, { maxTurns: 4, recipe });
  }

  async function run(taskId: string, outputs: import('./helpers/scriptedEngine.js').ScriptedOutput[], recipe: Partial<Layers>): Promise<RolloutResult> {
    const rolloutId = `${runId}-${counter++}`;
    engine.script(rolloutId, outputs);
    const input: RolloutInput = { runId, rolloutId, taskId, groupId: `${runId}-${taskId}`, attempt: 0, purpose: 'test', settings: settingsFor(recipe) };
    return platform.client.workflow.execute('rollout', { taskQueue: CONTROL_QUEUE, workflowId: `floe-rollout-${rolloutId}`, args: [input] });
  }

  const fixOf = (i: number): ToolCall => tasks[i].solution!.filter((c) => c.name === 'bash').at(-1) as ToolCall; // the edit that fixes it
  const json = (c: ToolCall) => JSON.stringify(c);

  it('gate off: a malformed turn and a duplicate get error observations, and the rollout still earns its reward', async () => {
    const fix = fixOf(0);
    const r = await run(tasks[0].instanceId, [{ text: 'let me think about it' }, { text: renderToolCall(fix) }, { text: renderToolCall(fix) }, { text: renderToolCall(submitCall) }], { rewardGate: false });
    expect(r).toMatchObject({ reward: 1, gate: 'passed', nTurns: 4 });
    const turns = await listTurns(db, r.rolloutId);
    expect(turns.map((t) => t.formatOk)).toEqual([false, true, true, true]);
    expect(turns[0].observation).toMatch(/^error \(missing_tool_call\)/);
    expect(turns[2].observation).toMatch(/^error \(duplicate_call\)/);
  }, 300_000);

  it('gate off: a rollout that never submits has its final state graded at the budget', async () => {
    const r = await run(tasks[1].instanceId, [{ text: renderToolCall(fixOf(1)) }, { text: renderToolCall({ name: 'bash', arguments: { command: 'ls' } }) }, { text: 'hmm' }, { text: renderToolCall({ name: 'bash', arguments: { command: 'pwd' } }) }], { rewardGate: false });
    expect(r).toMatchObject({ reward: 1, gate: 'passed', nTurns: 4 });
    expect((await getGateDecision(db, r.rolloutId))?.detail).toMatchObject({ finalState: { gate: 'budget_turns' } });
  }, 300_000);

  it('raw check off: every parsed call runs, text around is ignored, a cut-off call runs and the rollout goes on', async () => {
    const ls1: ToolCall = { name: 'bash', arguments: { command: 'ls' } };
    const r = await run(tasks[2].instanceId, [
      { text: `I will list files first.\n<tool_call>${json(ls1)}</tool_call>\n<tool_call>${json(fixOf(2))}</tool_call>\nDone.` },
      { text: `<tool_call>${json({ name: 'bash', arguments: { command: 'pwd' } })}`, finishReason: 'length' },
      { text: `<tool_call>${json(submitCall)}</tool_call>` },
    ], { rawFormatCheck: false });
    expect(r).toMatchObject({ reward: 1, gate: 'passed', nTurns: 3 });
    const turns = await listTurns(db, r.rolloutId);
    // the raw verdict is recorded for every turn, though the parser decided what ran
    expect(turns.map((t) => [t.formatOk, t.formatReason])).toEqual([[false, 'multiple_tool_calls'], [false, 'truncated'], [true, null]]);
    expect(turns[0].observation).toContain('\n');
  }, 300_000);

  it('naive (gate, raw check and explicit submit off): an answer without a call ends the rollout and is graded', async () => {
    const r = await run(tasks[3].instanceId, [{ text: renderToolCall(fixOf(3)) }, { text: 'The fix is in.' }], { rewardGate: false, rawFormatCheck: false, explicitSubmit: false });
    expect(r).toMatchObject({ reward: 1, gate: 'passed', nTurns: 2 });
    expect((await getGateDecision(db, r.rolloutId))?.detail).toMatchObject({ finalState: { gate: 'format', reason: 'no_tool_call' } });
  }, 300_000);
});
