import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { parseRunConfig } from '../core/config.js';
import { renderToolCall, type ToolCall } from '../core/tools.js';
import { createTaskActivities } from '../activities/tasks.js';
import { insertRun } from '../store/runs.js';
import { countShortcutFlags, getGateDecision, listRunTurns, listTurns } from '../store/rollouts.js';
import { Renderers } from '../activities/renderer.js';
import type { RenderSpec } from '../core/renderSpec.js';
import { repoRoot } from '../infra/settings.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { RolloutInput, RolloutResult } from '../workflows/rollout.js';
import type { RolloutSettings } from '../core/contracts.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { recording, saveHistory } from './helpers/histories.js';
import { EOS, startScriptedEngine, type ScriptedEngine, type ScriptedOutput, scriptedRolloutSettings } from './helpers/scriptedEngine.js';

/** Real rollouts: real Temporal workflows, real podman sandboxes, real grading, Postgres —
 *  driven by a scripted policy (test double) that speaks the engine's HTTP interface. */

interface CorpusEntry { id: string; text: string; finishReason: 'stop' | 'length' | 'abort'; tokenIds?: number[]; bytes?: number[]; expect: string }
const corpus: CorpusEntry[] = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, 'fixtures', 'malformed-outputs.json'), 'utf8'));

const runId = `rollout-test-${process.pid}-${Date.now()}`;
const tasks = loadToySuite({ onBadRow: 'fail' }).tasks;
let platform: Platform;
let engine: ScriptedEngine;
/** Text-only corpus outputs are generated as a real BPE model's ids: Qwen's tokenizer (builtin:qwen3.6). */
const QWEN: RenderSpec = { tokenizer: 'builtin:qwen3.6', chatTemplate: '' };
const renderers = new Renderers({ python: settings.python.bin, home: settings.home, repoRoot });
let db: pg.Pool;

function rolloutSettings(e: ScriptedEngine = engine, render?: RenderSpec): RolloutSettings {
  return scriptedRolloutSettings(e.url, { maxTurns: 4, ...(render ? { render } : {}) });
}

let counter = 0;
async function runRollout(taskId: string, outputs: ScriptedOutput[], e: ScriptedEngine = engine, render?: RenderSpec): Promise<RolloutResult> {
  const rolloutId = `${runId}-${counter++}`;
  e.script(rolloutId, outputs);
  const input: RolloutInput = { runId, rolloutId, taskId, groupId: `${runId}-${taskId}`, attempt: 0, purpose: 'test', settings: rolloutSettings(e, render) };
  return platform.client.workflow.execute('rollout', { taskQueue: CONTROL_QUEUE, workflowId: `floe-rollout-${rolloutId}`, args: [input] });
}

async function inBatches<T, R>(items: T[], size: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

const call = (c: ToolCall): ScriptedOutput => ({ text: renderToolCall(c) });
const bash = (command: string) => call({ name: 'bash', arguments: { command } });
const submit = call({ name: 'submit', arguments: {} });

beforeAll(async () => {
  platform = await withWorkers(['control', 'sandbox']);
  engine = await startScriptedEngine();
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  await insertRun(db, { runId, workflowId: runId, name: 'rollout-test', config: parseRunConfig({ name: 'rollout-test' }) });
  await createTaskActivities(db).loadTaskPool({ source: 'toy', include: [], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
});

afterAll(async () => {
  await db?.end();
  await engine?.close();
  await renderers.closeAll();
  await platform?.close();
});

/** The gate decision; detail is the gate's evidence (jsonb), typed as far as these tests read it. */
const gateOf = async (rolloutId: string) => (await getGateDecision(db, rolloutId)) as { gate: string; reward: number; detail: { failing: string[]; reason: string } };

describe('rollouts with a scripted policy', () => {
  it('the gold fix plus submit earns 1 on every toy task', async () => {
    const results = await inBatches(tasks, 4, (t) => runRollout(t.instanceId, [...t.solution!.map((c) => call(c as ToolCall))]));
    const failed = results.filter((r) => r.reward !== 1).map((r) => `${r.taskId}: ${r.gate}`);
    expect(failed).toEqual([]);
    for (const r of results.slice(0, 3)) expect(await gateOf(r.rolloutId)).toMatchObject({ gate: 'passed', reward: 1 });
    const turns = (await listRunTurns(db, runId)).filter((t) => t.formatOk && t.observation !== null);
    expect(turns.length).toBeGreaterThanOrEqual(tasks.length);
    // every turn's row was written once, whole: the tool's fields are there wherever a tool ran
    for (const t of turns) expect(t).toMatchObject({ toolName: 'bash', exitCode: expect.any(Number), toolMs: expect.any(Number) });
    // a replay fixture of a rollout that earned 1: tool calls, a submission, a grading (test/replay.test.ts)
    if (recording()) saveHistory(`floe-rollout-${results[0].rolloutId}`);
  }, 900_000);

  it('a submit without a fix earns 0 (tests failed)', async () => {
    const r = await runRollout(tasks[0].instanceId, [bash('ls'), submit]);
    expect(r).toMatchObject({ reward: 0, gate: 'tests_failed' });
    const g = await gateOf(r.rolloutId);
    expect(g.detail.failing.length).toBeGreaterThan(0);
  });

  it('no submit earns 0 (budget)', async () => {
    const r = await runRollout(tasks[1].instanceId, [bash('ls'), bash('pwd'), bash('ls -a'), bash('cat conftest.py'), bash('echo 5')]);
    expect(r).toMatchObject({ reward: 0, gate: 'budget_turns', nTurns: 4 });
    if (recording()) saveHistory(`floe-rollout-${r.rolloutId}`);
    expect((await gateOf(r.rolloutId)).detail).toMatchObject({ maxTurns: 4 });
  });

  it('a repeated call earns 0 (duplicate), even when the fix is in', async () => {
    const t = tasks[2];
    const fix = t.solution!.find((c) => c.name === 'bash')!;
    const r = await runRollout(t.instanceId, [call(fix as ToolCall), bash('ls'), call(fix as ToolCall), submit]);
    expect(r).toMatchObject({ reward: 0, gate: 'duplicate_call', nTurns: 3 });
    expect((await gateOf(r.rolloutId)).detail).toMatchObject({ turn: 2, firstTurn: 0 });
  });

  it('every malformed output of the corpus earns 0 (format), with its reason in Postgres', async () => {
    // floe derives a turn's text from its ids with the model's own tokenizer, so an engine can no
    // longer report text that differs from its bytes: that corpus case is the gate's alone (toolFormat tests)
    const malformed = corpus.filter((c) => c.expect !== 'valid' && c.expect !== 'bytes_text_mismatch');
    expect(malformed.length).toBeGreaterThanOrEqual(24);
    const qwen = await renderers.get(QWEN);
    const results = await inBatches(malformed, 6, async (c) => {
      // Raw ids/bytes go through the byte tokenizer as given; a text-only output is what a BPE
      // model would emit: its Qwen token ids (+ the end-of-turn token when it stopped).
      const raw = c.tokenIds ?? (c.bytes && (c.finishReason === 'stop' ? [...c.bytes, EOS] : c.bytes));
      const ids = raw ?? (await qwen.assistantIds(c.text)).slice(0, c.finishReason === 'stop' ? undefined : -1);
      const r = await runRollout(tasks[3].instanceId, [{ text: c.text, finishReason: c.finishReason, tokenIds: ids }], engine, raw ? undefined : QWEN);
      return { c, r, g: await gateOf(r.rolloutId) };
    });
    const wrong = results.filter(({ c, r, g }) => r.reward !== 0 || g.gate !== 'format' || g.detail.reason !== c.expect).map(({ c, g }) => `${c.id}: expected format/${c.expect}, got ${g.gate}/${g.detail.reason}`);
    expect(wrong).toEqual([]);
    if (recording()) saveHistory(`floe-rollout-${results[0].r.rolloutId}`);
    const stored = (await listRunTurns(db, runId)).filter((t) => !t.formatOk);
    expect(stored).toHaveLength(malformed.length);
    expect(stored.every((t) => t.formatReason !== null && t.observation === null)).toBe(true);
  }, 600_000);

  it('an output with NUL bytes is recorded (Postgres text cannot hold NUL) and gated', async () => {
    const r = await runRollout(tasks[5].instanceId, [{ text: `thinking\u0000 ${renderToolCall({ name: 'submit', arguments: {} })}` }]);
    expect(r.reward).toBe(0);
    expect(['format', 'tests_failed']).toContain(r.gate);
    const [t] = await listTurns(db, r.rolloutId);
    expect(t.rawText).toContain('thinking\uFFFD');
  });

  it('shortcut attempts are flagged and counted per run', async () => {
    const r = await runRollout(tasks[4].instanceId, [bash('git log --all --oneline'), bash('curl https://github.com'), bash('find / -name "test_hidden*"'), submit]);
    expect(r.shortcutFlags).toEqual(['git_history', 'hidden_tests', 'network']);
    const v = await countShortcutFlags(db, runId);
    expect(v.map((x) => x.flag)).toEqual(['git_history', 'hidden_tests', 'network']);
    const turns = await listTurns(db, r.rolloutId);
    expect(turns.map((t) => t.shortcutFlags)).toEqual([['git_history'], ['network'], ['hidden_tests'], []]);
    expect(turns[0].observation!.split('\n').filter((l: string) => /^[0-9a-f]{7,}/.test(l))).toHaveLength(1); // one commit
  });
});
