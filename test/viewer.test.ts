import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../core/config.js';
import { checkRawOutput } from '../core/toolFormat.js';
import { claimBatch, upsertPolicyVersion } from '../store/batches.js';
import { insertEvictions } from '../store/evictions.js';
import {
  discardRollouts, finishRollout, insertRollout, insertTurn, setSubmissionGrade, upsertGateDecision, upsertSubmission, upsertTurnTokens, type TurnRow,
} from '../store/rollouts.js';
import { readOnlyPool } from '../store/rolloutView.js';
import { insertRun } from '../store/runs.js';
import { floe, floeBin, killGroup } from './helpers/cli.js';
import { settings } from './helpers/platform.js';

/** `floe view` against a run made here through the store's own insert functions (no Temporal
 *  run needed): a rollout that spans a weight update, one refused by the format gate, a graded
 *  one with per-test outcomes, one trained and one discarded as stale, and a 64k-token rollout.
 *  Headless Chromium browses the three pages; the viewer binds 127.0.0.1 only and Postgres'
 *  row counts are the same after browsing. Screenshots go to test/out/viewer/. */

const outDir = path.join(import.meta.dirname, 'out', 'viewer');
const pool = new pg.Pool({ connectionString: settings.postgres.url, max: 4 });
const runId = `viewer-test-${process.pid}-${Date.now()}`;
const id = (s: string) => `${runId}-${s}`;
const bytes = (s: string) => [...Buffer.from(s)];
const BIG_TURNS = [32768, 16384, 8192, 8192]; // 65,536 generated tokens; the first turn is half of them
const REFUSED_TEXT = 'I will look. <TOOL_CALL>{"name": "bash", "arguments": {"command": "ls"}}</TOOL_CALL>';
const TABLES = ['runs', 'rollouts', 'turns', 'turn_tokens', 'gate_decisions', 'submissions', 'batch_members', 'policy_versions', 'evictions', 'task_stats', 'tasks', 'evaluations', 'engine_events', 'engine_requests'];

async function rowCounts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES) out[t] = (await pool.query<{ n: number }>(`select count(*)::int as n from ${t}`)).rows[0].n;
  return out;
}

const call = { name: 'bash', arguments: { command: 'ls' } };
const okText = `<tool_call>${JSON.stringify(call)}</tool_call>`;

/** One turn: its ids (turn_tokens) first, as the generate activity writes them, then its row. */
async function addTurn(rolloutId: string, turnIndex: number, t: { text: string; versions: number[]; ok?: boolean; reason?: string; engine?: string; observation?: string | null; ids?: number[] }): Promise<void> {
  const ids = t.ids ?? bytes(t.text);
  await upsertTurnTokens(pool, {
    rolloutId, turnIndex, inputIds: bytes(turnIndex === 0 ? 'system: fix the bug\nuser: tests fail\nassistant: ' : '\ntool: a.py\nassistant: '),
    promptLen: 40, completionIds: ids, logprobs: ids.map((_, i) => -((i % 7) + 1) / 10), tokenVersions: t.versions, renderDrift: null,
  });
  const row: TurnRow = {
    rolloutId, turnIndex, engineId: t.engine ?? 'e0', rawText: t.text, promptTokens: 40, completionTokens: ids.length, finishReason: 'stop',
    weightVersions: [...new Set(t.versions)], formatOk: t.ok ?? true, formatReason: t.reason ?? null, toolName: t.ok === false ? null : 'bash',
    toolArgs: t.ok === false ? null : call.arguments, observation: t.ok === false ? null : (t.observation ?? 'a.py\nb.py'), exitCode: t.ok === false ? null : 0,
    shortcutFlags: [], genMs: 100, toolMs: t.ok === false ? null : 20,
  };
  await insertTurn(pool, row);
}

async function makeRun(): Promise<void> {
  await insertRun(pool, { runId, workflowId: `floe-run-${runId}`, name: 'viewer test', config: parseRunConfig({ name: 'viewer test' }) });
  const start = (key: string, task: string, purpose: 'train' | 'recheck' = 'train') =>
    insertRollout(pool, { runId, rolloutId: id(key), taskId: task, groupId: id(`g-${task}`), attempt: 0, purpose, workflowId: `floe-rollout-${id(key)}` });
  const end = (key: string, e: { reward: number; gate: string; turns: number; tokens: number; v0: number; v1: number; flags?: string[] }) =>
    finishRollout(pool, { rolloutId: id(key), reward: e.reward, gate: e.gate, nTurns: e.turns, promptTokens: 80, completionTokens: e.tokens, versionStart: e.v0, versionEnd: e.v1, shortcutFlags: e.flags ?? [], status: 'finished' });
  const grade = async (key: string, passed: boolean, tests: [string, string, string][]) => {
    await upsertSubmission(pool, { rolloutId: id(key), diff: '--- a/x.py\n+++ b/x.py\n@@\n-bug\n+fix\n', bytes: 30, truncated: false });
    await setSubmissionGrade(pool, id(key), { passed, harness: 'pytest', tests: tests.map(([group, tid, outcome]) => ({ group, id: tid, outcome })), applyError: null, timedOut: false, durationMs: 300, log: '' });
    await upsertGateDecision(pool, { rolloutId: id(key), gate: passed ? 'passed' : 'tests_failed', reward: passed ? 1 : 0, detail: { failing: tests.filter((t) => t[2] !== 'passed').map((t) => t[1]) } });
  };

  // "cross": its first turn spans the update from v1 to v2 at token 7
  await start('cross', 'tA');
  const t0 = okText;
  await addTurn(id('cross'), 0, { text: t0, versions: bytes(t0).map((_, i) => (i < 7 ? 1 : 2)) });
  const t1 = `<tool_call>${JSON.stringify({ name: 'submit', arguments: {} })}</tool_call>`;
  await addTurn(id('cross'), 1, { text: t1, versions: bytes(t1).map(() => 2), engine: 'e1', observation: 'submitted' });
  await end('cross', { reward: 1, gate: 'passed', turns: 2, tokens: bytes(t0 + t1).length, v0: 1, v1: 2 });
  await grade('cross', true, [['FAIL_TO_PASS', 'tests/test_x.py::test_fixed', 'passed'], ['PASS_TO_PASS', 'tests/test_x.py::test_old', 'passed']]);

  // "refused": the second turn writes its tags in capitals; the gate ends the rollout there
  await start('refused', 'tB');
  await addTurn(id('refused'), 0, { text: okText, versions: bytes(okText).map(() => 2) });
  await addTurn(id('refused'), 1, { text: REFUSED_TEXT, versions: bytes(REFUSED_TEXT).map(() => 2), ok: false, reason: 'wrong_tag_case' });
  const verdict = checkRawOutput({ text: REFUSED_TEXT, finishReason: 'stop' });
  if (verdict.ok) throw new Error('the refused turn passes the format gate: the fixture is wrong');
  await end('refused', { reward: 0, gate: 'format', turns: 2, tokens: bytes(okText + REFUSED_TEXT).length, v0: 2, v1: 2, flags: ['git_history'] });
  await upsertGateDecision(pool, { rolloutId: id('refused'), gate: 'format', reward: 0, detail: { reason: verdict.reason, detail: verdict.detail, turn: 1 } });

  // "graded": submitted, one test of two fails
  await start('graded', 'tA');
  await addTurn(id('graded'), 0, { text: t1, versions: bytes(t1).map(() => 2), engine: 'e1' });
  await end('graded', { reward: 0, gate: 'tests_failed', turns: 1, tokens: bytes(t1).length, v0: 2, v1: 2 });
  await grade('graded', false, [['FAIL_TO_PASS', 'tests/test_x.py::test_fixed', 'failed'], ['PASS_TO_PASS', 'tests/test_x.py::test_old', 'passed']]);

  // "stale": ran to a reward, then discarded as too old
  await start('stale', 'tB');
  await addTurn(id('stale'), 0, { text: t1, versions: bytes(t1).map(() => 0) });
  await end('stale', { reward: 1, gate: 'passed', turns: 1, tokens: bytes(t1).length, v0: 0, v1: 0 });
  await upsertGateDecision(pool, { rolloutId: id('stale'), gate: 'passed', reward: 1, detail: {} });
  await discardRollouts(pool, { rolloutIds: [id('stale')], reason: 'stale: 3 versions behind (max 2)', staleness: { [id('stale')]: 3 } });

  // "big": 65,536 generated tokens over four turns, an update landing in each
  await start('big', 'tC');
  let v = 0;
  for (const [k, n] of BIG_TURNS.entries()) {
    const ids = Array.from({ length: n }, (_, i) => 97 + (i % 26));
    const versions = ids.map((_, i) => v + (i >= n / 2 ? 1 : 0));
    v += 1;
    await addTurn(id('big'), k, { text: String.fromCharCode(...ids.slice(0, 200)), ids, versions });
  }
  await end('big', { reward: 0, gate: 'budget_tokens', turns: BIG_TURNS.length, tokens: 65536, v0: 0, v1: 4 });
  await upsertGateDecision(pool, { rolloutId: id('big'), gate: 'budget_tokens', reward: 0, detail: { tokens: 65536 } });

  // the update of v3 trained "cross" and "graded"; tA was retired at v2 and revived at v3
  await claimBatch(pool, { runId, version: 3, advantages: { [id('cross')]: 0.5, [id('graded')]: -0.5 } });
  await upsertPolicyVersion(pool, {
    runId, version: 3, checkpointPath: null, batchRollouts: 2, batchMeanReward: 0.5, discardedStale: 1, trainMs: 10, publishMs: 1, loadMs: {}, updateMs: 20,
    metrics: { loss: 0.1, mismatch_mean_abs_logprob: 0.0123, mismatch_kl: 1e-4, mismatch_current_mean_abs_logprob: 0.001, offpolicy_mean_abs_logprob: 0.02 }, pool: {},
  });
  await insertEvictions(pool, runId, 2, [{ taskId: 'tA', decision: 'retire_mastered', evidence: { rewards: [1, 1, 1, 1] } }]);
  await insertEvictions(pool, runId, 3, [{ taskId: 'tA', decision: 'revive', evidence: { rewards: [0, 1] } }]);
}

async function deleteRun(): Promise<void> {
  const inRun = 'rollout_id in (select rollout_id from rollouts where run_id = $1)';
  for (const t of ['gate_decisions', 'batch_members', 'turn_tokens', 'turns', 'submissions']) await pool.query(`delete from ${t} where ${inRun}`, [runId]);
  for (const t of ['rollouts', 'evictions', 'policy_versions', 'runs']) await pool.query(`delete from ${t} where run_id = $1`, [runId]);
}

let viewer: ChildProcess;
let url: string;
let browser: Browser;
let before: Record<string, number>;
const errors: string[] = [];
const offsite: string[] = [];

async function open(p: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`${p}: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`${p}: ${e.message}`));
  page.on('request', (r) => { if (!r.url().startsWith(url) && !r.url().startsWith('file://') && !r.url().startsWith('data:')) offsite.push(r.url()); });
  return page;
}

beforeAll(async () => {
  fs.mkdirSync(outDir, { recursive: true });
  await deleteRun();
  await makeRun();
  before = await rowCounts();
  viewer = spawn(floeBin, ['view', runId, '--port', '0'], { env: process.env, detached: true });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`floe view printed no address in 60 s: ${out}`)), 60_000);
    viewer.stdout!.on('data', (d: Buffer) => { out += d.toString(); const m = /floe view {2}(http:\/\/\S+)/.exec(out); if (m) { clearTimeout(timer); resolve(m[1]); } });
    viewer.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
    viewer.once('exit', (code) => reject(new Error(`floe view exited (${code}): ${out}`)));
  });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  if (viewer) killGroup(viewer, 'SIGTERM');
  await deleteRun();
  await pool.end();
});

describe('floe view', () => {
  it('binds 127.0.0.1 only', async () => {
    const u = new URL(url);
    expect(u.hostname).toBe('127.0.0.1');
    const connects = (host: string) => new Promise<boolean>((resolve) => {
      const s = net.connect({ host, port: Number(u.port) }, () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    expect(await connects('127.0.0.1')).toBe(true); // the control
    const others = Object.values(os.networkInterfaces()).flat().filter((a) => a && !a.internal && a.family === 'IPv4').map((a) => a!.address);
    for (const host of others) expect(await connects(host), host).toBe(false);
    expect(await connects('::1').catch(() => false)).toBe(false);
  });

  it('lists the run\'s rollouts and filters them by gate reason, with links to Temporal', async () => {
    const page = await open('list');
    await page.goto(url);
    expect(page.url()).toContain(`/run/${runId}/`);
    expect(await page.locator('table.list tbody tr:visible').count()).toBe(5);
    await page.selectOption('#f-gate', 'format');
    expect(await page.locator('table.list tbody tr:visible').count()).toBe(1);
    expect(await page.locator('table.list tbody tr:visible code').first().textContent()).toBe(id('refused'));
    await page.selectOption('#f-gate', 'format:wrong_tag_case');
    expect(await page.locator('#shown').textContent()).toBe('1 of 5');
    await page.selectOption('#f-gate', 'tests_failed');
    expect(await page.locator('table.list tbody tr:visible code').allTextContents()).toEqual([id('graded')]);
    await page.selectOption('#f-gate', '');
    await page.selectOption('#f-fate', 'discarded');
    expect(await page.locator('table.list tbody tr:visible code').allTextContents()).toEqual([id('stale')]);
    await page.selectOption('#f-fate', '');
    await page.selectOption('#f-flag', 'git_history');
    expect(await page.locator('#shown').textContent()).toBe('1 of 5');
    // the address sets a filter too
    await page.goto(`${url}run/${runId}/?gate=passed`);
    expect(await page.locator('table.list tbody tr:visible code').allTextContents()).toEqual([id('cross'), id('stale')]);
    expect(await page.locator('a[href*="/workflows/floe-rollout-"]').count()).toBe(5);
    await page.goto(url);
    await page.screenshot({ path: path.join(outDir, 'list.png'), fullPage: true });
    await page.close();
  });

  it('shows a rollout that spanned a weight update with both versions and the boundary token, its tests and its batch', async () => {
    const page = await open('cross');
    await page.goto(`${url}run/${runId}/rollout/${id('cross')}`);
    const first = page.locator('details.turn[data-turn="0"] .tokens[data-ready="1"]');
    await first.waitFor();
    const versions = await first.locator('.tok-gen i').evaluateAll((els) => els.map((e) => e.className));
    expect(new Set(versions)).toEqual(new Set(['v1', 'v2', 'v2 b']));
    expect(versions.indexOf('v2 b')).toBe(7); // the boundary token: the first of v2
    expect(await first.locator('.bnd').allTextContents()).toEqual(['v1→v2']);
    // hovering a token titles it with its id, version and the engine's log-prob
    await first.locator('i.b').hover();
    expect(await first.locator('i.b').getAttribute('title')).toBe(`token 7 · id ${bytes(okText)[7]} · v2 · engine log-prob -0.1`);
    expect(await page.locator('details.turn[data-turn="1"] .tokens').getAttribute('data-ready')).toBeNull(); // collapsed: not loaded
    expect(await page.locator('#fate').textContent()).toBe('trained in the batch of v3');
    expect(await page.locator('table.tests tbody tr').count()).toBe(2);
    expect(await page.locator('#mismatch').textContent()).toContain('0.0123');
    expect(await page.locator('#mismatch').textContent()).toContain('not stored');
    await first.locator('i.b').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(outDir, 'rollout-update.png'), fullPage: true });
    await page.close();
  });

  it('shows a format-refused turn with its reason and the offending span marked', async () => {
    const page = await open('refused');
    await page.goto(`${url}run/${runId}/rollout/${id('refused')}`);
    const turn = page.locator('details.turn[data-turn="1"]');
    await turn.locator('summary').click();
    await turn.locator('.tokens[data-ready="1"]').waitFor();
    expect(await turn.locator('mark.span').textContent()).toBe('<TOOL_CALL>');
    expect(await turn.locator('.refusal').textContent()).toContain('wrong_tag_case');
    expect(await turn.locator('summary').textContent()).toContain('refused: wrong_tag_case');
    await page.screenshot({ path: path.join(outDir, 'rollout-refused.png'), fullPage: true });
    await page.close();
  });

  it('shows a graded rollout\'s per-test outcomes, and a discarded one\'s reason', async () => {
    const page = await open('graded');
    await page.goto(`${url}run/${runId}/rollout/${id('graded')}`);
    expect(await page.locator('table.tests tbody tr').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).innerText.replace(/\s+/g, ' ').trim())))
      .toEqual(['FAIL_TO_PASS tests/test_x.py::test_fixed failed', 'PASS_TO_PASS tests/test_x.py::test_old passed']);
    await page.goto(`${url}run/${runId}/rollout/${id('stale')}`);
    expect(await page.locator('#fate').textContent()).toBe('discarded: stale: 3 versions behind (max 2) (staleness 3)');
    await page.close();
  });

  it('shows a task across the run, by version, with its retire and revive', async () => {
    const page = await open('task');
    await page.goto(`${url}run/${runId}/task/tA`);
    expect(await page.locator('tr[data-version]').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.version))).toEqual(['1', '2', '3']); // v3: the revive, no rollout
    expect(await page.locator('.timeline li').allTextContents()).toEqual([expect.stringContaining('retire mastered'), expect.stringContaining('revive')]);
    await page.screenshot({ path: path.join(outDir, 'task.png'), fullPage: true });
    await page.close();
  });

  it('renders the first turn of a 64k-token rollout in under 2 s', async () => {
    const page = await open('big');
    const t0 = Date.now();
    await page.goto(`${url}run/${runId}/rollout/${id('big')}`);
    await page.locator('details.turn[data-turn="0"] .tokens[data-ready="1"]').waitFor();
    const ms = Date.now() - t0;
    expect(await page.locator('details.turn[data-turn="0"] .tok-gen i').count()).toBe(BIG_TURNS[0]);
    expect(await page.locator('.tok-gen i').count()).toBe(BIG_TURNS[0]); // the other turns wait to be opened
    console.log(`[viewer] 64k-token rollout: first turn (${BIG_TURNS[0]} tokens) rendered ${ms} ms after navigation`);
    fs.writeFileSync(path.join(outDir, 'timing.json'), `${JSON.stringify({ firstTurnTokens: BIG_TURNS[0], rolloutTokens: 65536, ms }, null, 2)}\n`);
    expect(ms).toBeLessThan(2000);
    await page.close();
  });

  it('exports a rollout as one offline file that renders its turns lazily', async () => {
    const file = path.join(outDir, 'big-export.html');
    const r = await floe(['view', '--export', id('big'), '--out', file]);
    expect(r.code, r.stderr).toBe(0);
    const page = await open('export');
    const t0 = Date.now();
    await page.goto(pathToFileURL(file).href);
    await page.locator('details.turn[data-turn="0"] .tokens[data-ready="1"]').waitFor();
    const ms = Date.now() - t0;
    console.log(`[viewer] static export of the 64k-token rollout: first turn rendered ${ms} ms after navigation`);
    expect(await page.locator('.tok-gen i').count()).toBe(BIG_TURNS[0]);
    await page.locator('details.turn[data-turn="1"] summary').click();
    await page.locator('details.turn[data-turn="1"] .tokens[data-ready="1"]').waitFor();
    expect(await page.locator('.tok-gen i').count()).toBe(BIG_TURNS[0] + BIG_TURNS[1]);
    expect(ms).toBeLessThan(2000);
    await page.close();
    // the control: an unknown rollout is refused, naming it
    const bad = await floe(['view', '--export', id('nope'), '--out', path.join(outDir, 'nope.html')]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain(`no rollout ${id('nope')}`);
  });

  it('logged no console error, fetched nothing off the viewer, and wrote nothing to Postgres', async () => {
    expect(errors).toEqual([]);
    expect(offsite).toEqual([]);
    expect(await rowCounts()).toEqual(before);
    // the viewer's pool refuses a write (the control: the test's own pool may write)
    const ro = readOnlyPool(settings.postgres.url);
    try {
      await expect(ro.query(`update runs set name = name where run_id = $1`, [runId])).rejects.toThrow(/read-only transaction/);
    } finally {
      await ro.end();
    }
    await expect(pool.query(`update runs set name = name where run_id = $1`, [runId])).resolves.toBeTruthy();
  });
});
