import { spawnSync } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversation, renderObservation, SYSTEM_PROMPT, toolSchemas, truncateMiddle } from '../core/harness.js';
import { renderToolCall } from '../core/tools.js';
import type { ExecResult } from '../core/sandboxPolicy.js';
import { createAuditActivities } from '../activities/audit.js';
import { createGenerateActivities, type GenerateTurnInput } from '../activities/generate.js';
import { rolloutSamples } from '../activities/gpu.js';
import { createTaskActivities } from '../activities/tasks.js';
import { getRolloutSequence, listTurns, listTurnTokens } from '../store/rollouts.js';
import { insertRun } from '../store/runs.js';
import { getProblemStatement } from '../store/tasks.js';
import { parseRunConfig } from '../core/config.js';
import { LiveRouter } from '../activities/router.js';
import { Renderers, resolveTokenizer, type Renderer } from '../activities/renderer.js';
import { repoRoot } from '../infra/settings.js';
import { settings } from './helpers/platform.js';
import { startScriptedEngine, type ScriptedEngine } from './helpers/scriptedEngine.js';

/** The token path end to end on the real Qwen vocabulary (the builtin:qwen3.6 folder `floe up`
 *  builds) and floe's Qwen3-style template: 10 turns through the generate activity against an
 *  engine double that returns token ids, with tool results holding code, non-ASCII text, NUL
 *  bytes and truncated long output. Postgres is real; the renderer is the real Python one. */

const QWEN = { tokenizer: 'builtin:qwen3.6', chatTemplate: '' };
const runId = `token-path-test-${process.pid}-${Date.now()}`;
const TASK = 'toy__bucket_refill';
let pool: pg.Pool;
let renderers: Renderers;
let qwen: Renderer;
let engine: ScriptedEngine;
let acts: ReturnType<typeof createGenerateActivities>;
let audit: ReturnType<typeof createAuditActivities>;

const exec = (output: string, exitCode = 0): ExecResult => ({ exitCode, output, outputBytes: Buffer.byteLength(output), truncated: false, timedOut: false, killedReason: null, durationMs: 3 });
const OUTPUTS: ExecResult[] = [
  exec('bucket.py\ntest_bucket.py\n'),
  exec('def refill(level, capacity):\n    """Top up to capacity."""\n    if level < 0:\n        raise ValueError("negative")\n    return capacity - level\n'),
  exec('héllo wörld — 日本語のテキスト 🎉 ñ café\u0301\n'),
  exec('binary\u0000with\u0000nuls\u0000\n'),
  exec('x'.repeat(3000) + '\nTraceback (most recent call last):\n  File "bucket.py", line 3\nAssertionError\n', 1),
  exec(''),
  exec('<tool_response>not a real tag</tool_response> and {"json": [1, 2]}\n'),
  exec('\t\ttabs   and    spaces\n\n\n'),
  exec('1 passed in 0.01s\n'),
];
const COMMANDS = ['ls', 'cat bucket.py', 'echo héllo', "printf 'a\\0b'", 'python -m pytest -q', 'true', 'cat notes.txt', 'cat -A data.txt', 'pytest -q test_bucket.py'];

function input(rolloutId: string, turnIndex: number): GenerateTurnInput {
  return {
    runId, rolloutId, turnIndex, taskId: TASK, groupId: `${rolloutId}-g`, engines: [{ id: 'double', url: engine.url, node: 'local', kind: 'reference' }], router: 'least-loaded',
    render: QWEN, systemPrompt: SYSTEM_PROMPT, sampling: { temperature: 1, topP: 1, maxTokensPerTurn: 512 }, generateTimeoutSeconds: parseRunConfig({}).engines.generateTimeoutSeconds,
  };
}

async function startRollout(rolloutId: string): Promise<void> {
  await audit.recordRolloutStart({ runId, rolloutId, taskId: TASK, groupId: `${rolloutId}-g`, attempt: 0, purpose: 'test', workflowId: rolloutId });
}

/** transformers' own apply_chat_template over the same folder: the reference for turn 0. */
function transformersChatTemplate(messages: unknown, tools: unknown): number[] {
  const folder = resolveTokenizer(QWEN.tokenizer, { home: settings.home, repoRoot });
  const code = 'import json,sys; from transformers import AutoTokenizer\nd=json.load(sys.stdin); t=AutoTokenizer.from_pretrained(d["folder"])\n'
    + 'r=t.apply_chat_template(d["messages"], tools=d["tools"], add_generation_prompt=True, tokenize=True)\n'
    + 'ids=r["input_ids"] if hasattr(r, "keys") else r\nprint(json.dumps(list(ids)))';
  const r = spawnSync(settings.python.bin, ['-c', code], { input: JSON.stringify({ folder, messages, tools }), encoding: 'utf8', env: { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_VERBOSITY: 'error' } });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as number[];
}

beforeAll(async () => {
  pool = new pg.Pool({ connectionString: settings.postgres.url, max: 4 });
  renderers = new Renderers({ python: settings.python.bin, home: settings.home, repoRoot });
  qwen = await renderers.get(QWEN);
  engine = await startScriptedEngine();
  acts = createGenerateActivities(pool, new LiveRouter(), renderers);
  audit = createAuditActivities(pool);
  await insertRun(pool, { runId, workflowId: runId, name: 'token-path-test', config: parseRunConfig({ name: 'token-path-test' }) });
  await createTaskActivities(pool).loadTaskPool({ source: 'toy', include: [TASK], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
}, 120_000);

afterAll(async () => {
  await renderers?.closeAll();
  await engine?.close();
  await pool?.end();
});

describe('token in, token out', () => {
  it('a 10-turn conversation: each prompt extends the last prompt + completion; turn 0 is the chat template; one masked sample', async () => {
    const rolloutId = `${runId}-ten`;
    await startRollout(rolloutId);
    const replies = [...COMMANDS.map((command) => renderToolCall({ name: 'bash', arguments: { command } })), renderToolCall({ name: 'submit', arguments: {} })];
    // the model's reasoning in turn 3 holds a NUL byte: it must survive in the ids
    replies[3] = `thinking\u0000 about it\n${replies[3]}`;
    const completions = await Promise.all(replies.map((t) => qwen.assistantIds(t)));
    engine.script(rolloutId, completions.map((tokenIds) => ({ tokenIds })));

    for (let t = 0; t < 10; t++) {
      const gen = await acts.generateTurn(input(rolloutId, t));
      expect(gen.kind).toBe('generated');
      if (gen.kind !== 'generated') return;
      expect(gen.verdict.ok, JSON.stringify(gen.verdict)).toBe(true);
      // the turn's row, once, as the rollout workflow writes it: with the tool's result (the last turn submits)
      const tool = t < 9 ? { observation: renderObservation(OUTPUTS[t], 400, 20), exitCode: OUTPUTS[t].exitCode, toolMs: 1 } : null;
      await audit.recordTurn({ rolloutId, turnIndex: t, generated: gen, shortcutFlags: [], tool });
    }
    const prompts = engine.requests.filter((r) => r.user === rolloutId).map((r) => r.prompt);
    expect(prompts).toHaveLength(10);
    for (let t = 1; t < 10; t++) {
      const prefix = [...prompts[t - 1], ...completions[t - 1]];
      expect(prompts[t].slice(0, prefix.length)).toEqual(prefix);
      expect(prompts[t].length).toBeGreaterThan(prefix.length);
    }
    // real vocabulary: ids far beyond the byte range, the end-of-turn token where each reply ends
    expect(Math.max(...prompts[9])).toBeGreaterThan(248000);
    expect(completions.every((c) => c[c.length - 1] === qwen.info.eos_token_id)).toBe(true);
    // the raw NUL the model wrote is in its ids (and so in every later prompt); the text column is a view
    expect(await qwen.decode(completions[3])).toContain('\u0000');
    const turns = await listTurns(pool, rolloutId);
    expect(turns.map((t) => t.turnIndex)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(turns[3].rawText).toContain('thinking\uFFFD');
    // the truncated long output was shown cut in the middle
    expect(turns[4].observation).toContain('chars omitted');
    expect(turns[4]).toMatchObject({ observation: renderObservation(OUTPUTS[4], 400, 20), exitCode: 1, toolName: 'bash', toolArgs: { command: COMMANDS[4] }, formatOk: true });
    expect(turns[9]).toMatchObject({ toolName: 'submit', observation: null, exitCode: null, toolMs: null });
    expect(truncateMiddle('x'.repeat(3000), 400).length).toBeLessThanOrEqual(400);

    // turn 0 is exactly what the tokenizer's own apply_chat_template gives
    const messages0 = conversation(SYSTEM_PROMPT, (await getProblemStatement(pool, TASK))!, []);
    expect(prompts[0]).toEqual(transformersChatTemplate(messages0, toolSchemas()));
    expect(await qwen.decode(prompts[0])).toContain('"name": "bash"'); // the tools' JSON schemas are in the system turn

    // the template's full rendering agrees with the concatenation until the NUL: the text view
    // re-rendered has U+FFFD where the ids have NUL, so from turn 4 on the drift is recorded there
    const drift = await listTurnTokens(pool, rolloutId);
    expect(drift.slice(0, 4).map((r) => r.renderDrift)).toEqual([null, null, null, null]);
    for (const r of drift.slice(4)) {
      expect(r.renderDrift!.at).toBeGreaterThanOrEqual(prompts[3].length);
      expect(r.renderDrift!.at).toBeLessThan(prompts[3].length + completions[3].length);
    }

    // one training sample: the final sequence, masked over exactly the generated tokens
    const [sample] = await rolloutSamples(pool, [rolloutId], { [rolloutId]: 1 });
    const finalLength = prompts[9].length + completions[9].length;
    expect(sample.ids).toHaveLength(finalLength);
    expect(sample.ids).toEqual([...prompts[9], ...completions[9]]);
    expect(sample.loss_mask.filter((m) => m === 1)).toHaveLength(completions.reduce((n, c) => n + c.length, 0));
    expect(sample.behaviour_logprobs).toHaveLength(finalLength);
    expect(sample.token_versions.filter((v) => v >= 0)).toHaveLength(completions.reduce((n, c) => n + c.length, 0));
    // …and the documented view of it says the same
    const view = await getRolloutSequence(pool, rolloutId);
    expect(view!.ids).toEqual(sample.ids);
    expect(view!.lossMask).toEqual(sample.loss_mask);
  }, 180_000);

  it('keeps what the model saw when its ids are not the canonical tokenization, and records the drift', async () => {
    const rolloutId = `${runId}-drift`;
    await startRollout(rolloutId);
    const text = renderToolCall({ name: 'bash', arguments: { command: 'ls' } });
    const canonical = await qwen.assistantIds(text);
    // the same text spelled token by token from its pieces: a non-canonical tokenization
    const split = [...(await qwen.assistantIds(text.slice(0, 5))).slice(0, -1), ...(await qwen.assistantIds(text.slice(5)))];
    expect(await qwen.decode(split)).toBe(await qwen.decode(canonical));
    expect(split).not.toEqual(canonical);
    engine.script(rolloutId, [{ tokenIds: split }, { tokenIds: await qwen.assistantIds(renderToolCall({ name: 'submit', arguments: {} })) }]);
    const gen0 = await acts.generateTurn(input(rolloutId, 0));
    if (gen0.kind !== 'generated') throw new Error(`turn 0: ${gen0.kind}`);
    // the ids are recorded as soon as they are generated; the turn's row only once the turn is
    // over, and the next turn is not generated before it
    expect(await listTurnTokens(pool, rolloutId)).toHaveLength(1);
    expect(await listTurns(pool, rolloutId)).toEqual([]);
    await expect(acts.generateTurn(input(rolloutId, 1))).rejects.toThrow(/expected 1 earlier turns/);
    await audit.recordTurn({ rolloutId, turnIndex: 0, generated: gen0, shortcutFlags: [], tool: { observation: 'exit code 0\na.py', exitCode: 0, toolMs: 1 } });
    // a retried recordTurn finds the row written and leaves it
    await audit.recordTurn({ rolloutId, turnIndex: 0, generated: gen0, shortcutFlags: [], tool: { observation: 'a retry', exitCode: 0, toolMs: 2 } });
    expect(await listTurns(pool, rolloutId)).toMatchObject([{ turnIndex: 0, observation: 'exit code 0\na.py', toolMs: 1, toolName: 'bash' }]);
    const gen = await acts.generateTurn(input(rolloutId, 1));
    expect(gen.kind === 'generated' && gen.drift).toBeTruthy();
    const prompts = engine.requests.filter((r) => r.user === rolloutId).map((r) => r.prompt);
    expect(prompts[1].slice(0, prompts[0].length + split.length)).toEqual([...prompts[0], ...split]);
    const row = (await listTurnTokens(pool, rolloutId)).find((t) => t.turnIndex === 1);
    expect(row!.renderDrift).toMatchObject({ at: prompts[0].length + Math.min(...canonical.map((id, i) => (id === split[i] ? Infinity : i))) });
  }, 60_000);

  it('a renderer keeps its process alive while a reply is due, and not after', () => {
    const r = spawnSync(path.join(repoRoot, 'node_modules', '.bin', 'tsx'), [path.join(repoRoot, 'test', 'helpers', 'renderOnce.ts')], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe(JSON.stringify('SYSTEM:\nS\n\nISSUE:\nU\n\nASSISTANT:\n'));
  }, 90_000);

  it('the byte renderer gives the tiny policy the plain template, with EOS between turns', async () => {
    const byte = await renderers.get({ tokenizer: 'byte', chatTemplate: path.join('configs', 'templates', 'plain.jinja') });
    expect(byte.info).toMatchObject({ kind: 'byte', eos_token_id: 256, stop_token_ids: [256] });
    const start = await byte.start(conversation('S', ' It breaks. ', []), toolSchemas());
    expect(start.text).toBe('SYSTEM:\nS\n\nISSUE:\nIt breaks.\n\nASSISTANT:\n');
    const cont = await byte.continuation(conversation('S', 'It breaks.', [{ rawText: 'A', observation: 'exit code 0\nok' }]), toolSchemas());
    expect(cont.text).toBe('\n\nOBSERVATION:\nexit code 0\nok\n\nASSISTANT:\n');
    expect(cont.ids).toEqual([...Buffer.from(cont.text)]);
  }, 60_000);
});
