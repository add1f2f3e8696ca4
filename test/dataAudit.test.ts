// The data audit (issue 13): its pure rules (core/dataAudit.ts), and `floe audit` on toy tasks
// through the real pipeline — Temporal, Postgres, podman graders — killed in the middle and run
// again, blind to the labels it is scored against, with stronger tests checked in real sandboxes
// against the toy suite's stored wrong patches (which the audit never saw).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAudit, auditStatus, curatedRow, auditTable, behaviourDifference, blindTask, scoreAgainstLabels, standardValidation, type BehaviourTrace } from '../core/dataAudit.js';
import type { GradeResult } from '../core/sandboxPolicy.js';
import { loadToySuite } from '../tasks/loaders.js';
import { floe, floeBin, killGroup } from './helpers/cli.js';
import { agentCandidateDiff, auditorTask } from '../core/auditorAgent.js';
import { repoRoot } from '../infra/settings.js';

/** Every payload of a workflow history, decoded (JSON text). */
function payloadTexts(x: unknown, out: string[] = []): string[] {
  if (x instanceof Uint8Array) out.push(Buffer.from(x).toString('utf8'));
  else if (Array.isArray(x)) x.forEach((v) => payloadTexts(v, out));
  else if (x && typeof x === 'object') Object.values(x).forEach((v) => payloadTexts(v, out));
  return out;
}

const toy = loadToySuite({ onBadRow: 'fail' }).tasks;
const byId = (id: string) => toy.find((t) => t.instanceId === id)!;

function grade(outcomes: Record<string, 'passed' | 'failed'>, passed: boolean): GradeResult {
  return { passed, harness: 'pytest', tests: Object.entries(outcomes).map(([id, outcome]) => ({ id, group: 'FAIL_TO_PASS' as const, outcome })), applyError: null, timedOut: false, durationMs: 1, log: '' };
}

describe('the audit is blind to the labels it is scored against', () => {
  it('blindTask drops loose_tests, the stored wrong patch and the gold trajectory, and keeps the rest', () => {
    const t = byId('toy__c_to_f');
    expect(t.looseTests).toBe(true);
    expect(t.wrongPatch).toBeTruthy();
    const b = blindTask(t);
    expect([b.looseTests, b.wrongPatch, b.solution]).toEqual([null, null, null]);
    expect({ ...b, looseTests: t.looseTests, wrongPatch: t.wrongPatch, solution: t.solution }).toEqual(t);
  });
});

describe('standard validation', () => {
  const task = { failToPass: ['t::f2p'], passToPass: ['t::p2p'] };
  it('passes when FAIL_TO_PASS fails and PASS_TO_PASS passes at base, and all pass with the gold patch', () => {
    const v = standardValidation(task, grade({ 't::f2p': 'failed', 't::p2p': 'passed' }, false), grade({ 't::f2p': 'passed', 't::p2p': 'passed' }, true));
    expect(v).toEqual({ ok: true, problems: [] });
    expect(auditStatus(v, 0)).toBe('passed');
    expect(auditStatus(v, 2)).toBe('flagged');
  });
  it('names each way it fails', () => {
    const v = standardValidation(task, grade({ 't::f2p': 'passed', 't::p2p': 'failed' }, false), grade({ 't::f2p': 'failed', 't::p2p': 'passed' }, false));
    expect(v.ok).toBe(false);
    expect(v.problems.join('\n')).toMatch(/FAIL_TO_PASS tests already pass before the gold patch: t::f2p/);
    expect(v.problems.join('\n')).toMatch(/PASS_TO_PASS tests do not pass before the gold patch: t::p2p \(failed\)/);
    expect(v.problems.join('\n')).toMatch(/tests do not pass with the gold patch: t::f2p \(failed\)/);
    expect(auditStatus(v, 3)).toBe('invalid');
  });
  it('a test the log never shows counts as not passed', () => {
    const v = standardValidation(task, grade({ 't::f2p': 'failed' }, false), grade({ 't::f2p': 'passed', 't::p2p': 'passed' }, true));
    expect(v.problems).toEqual(['PASS_TO_PASS tests do not pass before the gold patch: t::p2p (missing)']);
  });
});

describe('behaviourDifference', () => {
  const trace = (v: Record<string, unknown[]>, importError: string | null = null): BehaviourTrace => ({ variants: v, importError });
  it('is the first variant where the candidate differs, among those where two gold runs agree', () => {
    const g1 = trace({ a: [['f', '(1,)', '{}', 'return', '2', null]], clock: [['now', '()', '{}', 'return', '1', null]], b: [['f', '(2,)', '{}', 'return', '3', null]] });
    const g2 = trace({ ...g1.variants, clock: [['now', '()', '{}', 'return', '7', null]] });
    const cand = trace({ a: g1.variants.a, clock: [['now', '()', '{}', 'return', '9', null]], b: [['f', '(2,)', '{}', 'return', '4', null]] });
    expect(behaviourDifference(g1, g2, cand)).toEqual({ variant: 'b', gold: g1.variants.b, candidate: cand.variants.b, call: { function: 'f', args: '(2,)', kwargs: '{}', gold: 'return 3', candidate: 'return 4' } });
  });
  it('null for a candidate that behaves the same (an equivalent change is no evidence)', () => {
    const g = trace({ a: [['f', '(1,)', '{}', 'return', '2', null]] });
    expect(behaviourDifference(g, g, trace({ ...g.variants }))).toBeNull();
  });
  it('a candidate that does not import differs; a gold patch that does not import proves nothing', () => {
    const g = trace({ a: [['f', '(1,)', '{}', 'return', '2', null]] });
    expect(behaviourDifference(g, g, trace({}, 'SyntaxError: x'))?.variant).toBe('a');
    expect(behaviourDifference(trace({}, 'ImportError'), trace({}, 'ImportError'), g)).toBeNull();
  });
});

describe('the published table, the score against labels, and the versions a run can train on', () => {
  const rows = [
    { taskId: 'a', status: 'passed' as const, strengthened: false },
    { taskId: 'b', status: 'flagged' as const, strengthened: true },
    { taskId: 'c', status: 'flagged' as const, strengthened: false },
    { taskId: 'd', status: 'invalid' as const, strengthened: false },
  ];
  it('audited, valid, accepting a wrong patch, strengthened, curated', () => {
    expect(auditTable(rows)).toEqual({ audited: 4, valid: 3, acceptWrongPatch: 2, strengthened: 1, curated: 2 });
  });
  it('scores loose tasks found and sound tasks flagged', () => {
    const loose: Record<string, boolean | null> = { a: true, b: true, c: false, d: false };
    expect(scoreAgainstLabels(rows, (id) => loose[id])).toEqual({ loose: 2, looseFlagged: 1, sound: 1, soundFlagged: 1, missed: ['a'], falseAlarms: ['c'] });
  });
  it('original keeps every task; curated only those that passed; strengthened adds flagged ones with their stronger tests', () => {
    const ts = ['toy__c_to_f', 'toy__cart_remove', 'toy__bucket_refill', 'toy__join_url'].map(byId);
    const audited = new Map([
      ['toy__c_to_f', { status: 'flagged' as const, strengthened: { testPatch: 'NEW', failToPass: ['x::y'] } }],
      ['toy__cart_remove', { status: 'flagged' as const, strengthened: null }],
      ['toy__bucket_refill', { status: 'passed' as const, strengthened: null }],
      ['toy__join_url', { status: 'invalid' as const, strengthened: null }],
    ]);
    expect(applyAudit(ts, audited, 'original', 'A')).toEqual(ts);
    expect(applyAudit(ts, audited, 'curated', 'A').map((t) => t.instanceId)).toEqual(['toy__bucket_refill']);
    const s = applyAudit(ts, audited, 'strengthened', 'A');
    expect(s.map((t) => t.instanceId)).toEqual(['toy__c_to_f@A', 'toy__bucket_refill']);
    expect(s[0]).toMatchObject({ testPatch: 'NEW', failToPass: ['x::y'] });
    expect(() => applyAudit([byId('toy__day_of_year')], audited, 'curated', 'A')).toThrow(/audit A has no result for toy__day_of_year; run `floe audit`/);
  });
  it('the curated export: a passed row as it is, a flagged one with its stronger tests in the row\'s own encoding, no other', () => {
    const row = { instance_id: 'x', test_patch: 'OLD', FAIL_TO_PASS: '["a"]' };
    expect(curatedRow(row, { status: 'passed', strengthened: null })).toBe(row);
    expect(curatedRow(row, { status: 'flagged', strengthened: { testPatch: 'NEW', failToPass: ['a', 'b'] } })).toEqual({ instance_id: 'x', test_patch: 'NEW', FAIL_TO_PASS: '["a","b"]' });
    expect(curatedRow({ ...row, FAIL_TO_PASS: ['a'] }, { status: 'flagged', strengthened: { testPatch: 'NEW', failToPass: ['a', 'b'] } })?.FAIL_TO_PASS).toEqual(['a', 'b']);
    expect(curatedRow(row, { status: 'flagged', strengthened: null })).toBeNull();
    expect(curatedRow(row, { status: 'invalid', strengthened: null })).toBeNull();
  });
});

describe('floe audit on toy tasks (real Temporal, Postgres and podman graders)', () => {
  const TASKS = ['toy__c_to_f', 'toy__cart_remove', 'toy__bucket_refill', 'toy__join_url'];
  let db: pg.Pool;
  let auditId: string;
  let settings: typeof import('./helpers/platform.js')['settings'];

  beforeAll(async () => {
    settings = (await import('./helpers/platform.js')).settings;
    const { auditIdOf, auditSettings } = await import('../cli/audit.js');
    const { tasks } = (await import('../tasks/loaders.js')).selectTasks({ source: 'toy', layout: 'auto', include: TASKS, limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
    auditId = auditIdOf('toy', tasks, auditSettings(200));
    db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
    // a fresh audit: an earlier test run's rows would make the whole run a resume
    for (const table of ['audit_candidates', 'task_audits', 'audits']) await db.query(`delete from ${table} where audit_id = $1`, [auditId]).catch(() => undefined);
  }, 60_000);

  afterAll(async () => { await db?.end(); });

  const audit = (onStderr?: (text: string, kill: () => void) => void) => new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    // its own process group, like a terminal's job: kill -9 reaches tsx's node child too
    const child = spawn(floeBin, ['audit', 'toy', '--tasks', TASKS.join(','), '--concurrency', '1'], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const kill9 = () => killGroup(child, 'SIGKILL');
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); onStderr?.(stderr, kill9); });
    child.stdout.on('data', () => undefined);
    const timer = setTimeout(kill9, 300_000);
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stderr }); });
  });
  const finished = async () => (await db.query<{ task_id: string; finished_at: Date }>('select task_id, finished_at from task_audits where audit_id = $1', [auditId])).rows;

  it('killed after its first finished task and run again, it finishes the rest without redoing any', async () => {
    let killed = false;
    const first = await audit((text, kill) => {
      if (!killed && /\b[1-3]\/4 done/.test(text)) { killed = true; kill(); }
    });
    expect(killed).toBe(true);
    expect(first.code).not.toBe(0);
    const before = await finished();
    expect(before.length).toBeGreaterThanOrEqual(1);
    expect(before.length).toBeLessThan(4);

    const second = await audit();
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toMatch(new RegExp(`resuming audit ${auditId}`));
    const after = await finished();
    expect(after.map((r) => r.task_id).sort()).toEqual([...TASKS].sort());
    // a redone task would have its row written again (finished_at moves on)
    for (const r of before) expect(after.find((a) => a.task_id === r.task_id)!.finished_at).toEqual(r.finished_at);
    expect(second.stderr).toMatch(/against the labels it never saw: loose tasks flagged 2\/2; sound tasks flagged 0\/2/);
    // the export: the two sound tasks as they are, the two loose ones with their stronger tests
    const curated = fs.readFileSync(path.join(repoRoot, 'runs', 'audits', auditId, 'curated.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { instance_id: string; test_patch: string });
    expect(curated.map((r) => r.instance_id).sort()).toEqual([...TASKS].sort());
    for (const r of curated) expect(r.test_patch.includes('test_floe_strengthened.py')).toBe(r.instance_id === 'toy__c_to_f' || r.instance_id === 'toy__cart_remove');
  }, 600_000);

  it('flags the loose tasks with a wrong patch as evidence and passes the sound ones; nothing of the labels is in any history', async () => {
    const rows = (await db.query<{ task_id: string; status: string; evidence: { diff: string; difference: unknown; kind: string } | null }>(
      'select task_id, status, evidence from task_audits where audit_id = $1 order by task_id', [auditId])).rows;
    expect(Object.fromEntries(rows.map((r) => [r.task_id, r.status]))).toEqual({ toy__bucket_refill: 'passed', toy__c_to_f: 'flagged', toy__cart_remove: 'flagged', toy__join_url: 'passed' });
    for (const r of rows.filter((x) => x.status === 'flagged')) {
      expect(r.evidence!.diff).toMatch(/^diff --git /);
      expect(r.evidence!.difference).toBeTruthy();
      expect(r.evidence!.diff).not.toEqual(byId(r.task_id).patch);
    }
    const { temporalClient } = await import('../workers/connect.js');
    const client = await temporalClient(settings);
    try {
      for (const id of TASKS) {
        const decoded = payloadTexts(await client.workflow.getHandle(`floe-${auditId}-${id}`).fetchHistory()).join('\n');
        expect(decoded).toContain(JSON.stringify(byId(id).patch)); // the task row is there, with its gold patch
        expect(decoded).toContain('"wrongPatch":null');
        expect(decoded).not.toMatch(/"wrongPatch":"|"looseTests":(true|false)|"solution":\[/);
      }
    } finally {
      await client.connection.close();
    }
  }, 120_000);

  it('a run config picks the original, curated or strengthened version of the audited tasks', async () => {
    const { createTaskActivities } = await import('../activities/tasks.js');
    const acts = createTaskActivities(db);
    const pool = (use: 'original' | 'curated' | 'strengthened') => acts.loadTaskPool({ source: 'toy', include: TASKS, limit: 0, excludeLooseTests: false, onBadRow: 'fail', audit: { id: auditId, use } });
    expect((await pool('original')).taskIds.sort()).toEqual([...TASKS].sort());
    expect((await pool('curated')).taskIds.sort()).toEqual(['toy__bucket_refill', 'toy__join_url']);
    const strong = (await pool('strengthened')).taskIds.sort();
    expect(strong).toEqual(['toy__bucket_refill', `toy__c_to_f@${auditId}`, `toy__cart_remove@${auditId}`, 'toy__join_url']);
    // the strengthened task is a row of its own; the original keeps its tests
    const { getTask } = await import('../store/tasks.js');
    expect((await getTask(db, `toy__c_to_f@${auditId}`))!.testPatch).toMatch(/test_floe_strengthened\.py/);
    expect((await getTask(db, 'toy__c_to_f'))!.testPatch).toBe(byId('toy__c_to_f').testPatch);
    await expect(acts.loadTaskPool({ source: 'toy', include: ['toy__day_of_year'], limit: 0, excludeLooseTests: false, onBadRow: 'fail', audit: { id: auditId, use: 'curated' } })).rejects.toThrow(/has no result for toy__day_of_year/);
  }, 60_000);

  it('stronger tests pass on the gold patch and reject the stored wrong patches, graded in real sandboxes', async () => {
    const { dockerFromSettings } = await import('../infra/docker.js');
    const { sandboxImageTag } = await import('../infra/components/image.js');
    const { gradePatch } = await import('../activities/grading.js');
    const docker = dockerFromSettings(settings);
    const opts = { host: 'test', image: sandboxImageTag(settings), workerId: `test-${process.pid}`, harnessPython: settings.harness.bin };
    const rows = (await db.query<{ task_id: string; p: string | null; f: string[] | null }>(
      `select task_id, strengthened_test_patch as p, strengthened_fail_to_pass as f from task_audits where audit_id = $1 and status = 'flagged'`, [auditId])).rows;
    expect(rows.length).toBe(2);
    for (const r of rows) {
      expect(r.p, `${r.task_id} kept stronger tests`).toBeTruthy();
      const task = { ...byId(r.task_id), testPatch: r.p!, failToPass: r.f! };
      expect(task.failToPass.some((id) => id.startsWith('tests/test_floe_strengthened.py::'))).toBe(true);
      const gold = await gradePatch(docker, opts, { task, diff: task.patch });
      expect(gold.passed, `${r.task_id} gold: ${gold.log.slice(-800)}`).toBe(true);
      const wrong = await gradePatch(docker, opts, { task, diff: byId(r.task_id).wrongPatch! });
      expect(wrong.passed, `${r.task_id}: the stored wrong patch must fail the stronger tests`).toBe(false);
      // the original tests accept it (that is why the task is loose)
      expect((await gradePatch(docker, opts, { task: byId(r.task_id), diff: byId(r.task_id).wrongPatch! })).passed).toBe(true);
    }
  }, 300_000);
});

describe('the auditor agent (core/auditorAgent.ts)', () => {
  const t = byId('toy__digit_sum');

  it('works on a blind task of its own whose issue is the brief: the issue, the gold patch and the tests', () => {
    const a = auditorTask(t);
    expect(a.instanceId).toBe('toy__digit_sum@auditor');
    expect(a).toMatchObject({ looseTests: null, wrongPatch: null, solution: null, patch: t.patch, testPatch: t.testPatch, failToPass: t.failToPass });
    expect(a.problemStatement).toContain(t.problemStatement.trim());
    expect(a.problemStatement).toContain(t.patch.trimEnd());
    expect(a.problemStatement).toContain(t.testPatch.trimEnd());
    expect(a.problemStatement).toMatch(/plausible WRONG fix/);
    // the labels never reach the brief
    expect(a.problemStatement).not.toContain(t.wrongPatch!.trimEnd());
  });

  it("takes the test patch's files out of the agent's diff", () => {
    const fix = 'diff --git a/digits.py b/digits.py\n--- a/digits.py\n+++ b/digits.py\n@@ -1 +1 @@\n-a\n+b\n';
    expect(agentCandidateDiff(`${t.testPatch}${fix}`, t.testPatch)).toBe(fix);
    expect(agentCandidateDiff(`${fix}${t.testPatch}`, t.testPatch)).toBe(fix);
    expect(agentCandidateDiff(t.testPatch, t.testPatch)).toBe('');
    expect(agentCandidateDiff('', t.testPatch)).toBe('');
  });
});

describe('floe audit --auditor: an agent on an engine adds its fixes to the search (real Temporal, Postgres and podman; the engine a scripted test double)', () => {
  const TASK = 'toy__digit_sum';
  let db: pg.Pool;
  let engine: Awaited<ReturnType<typeof import('./helpers/scriptedEngine.js')['startScriptedEngine']>>;
  let cfgFile: string;
  let auditId: string;

  beforeAll(async () => {
    const { settings } = await import('./helpers/platform.js');
    db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
    engine = await (await import('./helpers/scriptedEngine.js')).startScriptedEngine();
    cfgFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'floe-auditor-')), 'auditor.json');
    // a turn's budget that holds the scripted replies (floe keeps no more of a turn than it asked for)
    fs.writeFileSync(cfgFile, JSON.stringify({ name: 'auditor-test', engines: { count: 0, endpoints: [{ id: 'scripted', url: engine.url }] }, policy: { maxTokensPerTurn: 4096 }, rollout: { maxTurns: 4, maxTotalTokens: 32768 } }));
    const { auditIdOf, auditSettings, auditorConfig } = await import('../cli/audit.js');
    auditId = auditIdOf('toy', [byId(TASK)], auditSettings(200, { config: await auditorConfig(cfgFile), attempts: 2 }));
    const rollout = (i: number) => `${auditId}-${TASK}@auditor-${i}`;
    const { renderToolCall } = await import('../core/tools.js');
    const bash = (command: string) => ({ text: renderToolCall({ name: 'bash', arguments: { command } }) });
    const submit = { text: renderToolCall({ name: 'submit', arguments: {} }) };
    // attempt 0: a partial fix (right for one digit only) that the task's one test accepts
    engine.script(rollout(0), [bash("sed -i 's/return sum(int(c) for c in str(n))$/return sum(int(c) for c in str(n)) if n >= 0 else -n/' digits.py"), submit]);
    // attempt 1: the tests applied and left in, and a fix that does what the gold patch does
    engine.script(rollout(1), [bash(`git apply <<'EOF'\n${byId(TASK).testPatch}EOF`), bash("sed -i 's/str(n)/str(abs(n))/' digits.py"), submit]);
  }, 60_000);

  afterAll(async () => { await db?.end(); await engine?.close(); });

  it("flags a task floe's own candidates pass, with the agent's wrong fix as evidence; the agent's rollouts are stored as rollouts", async () => {
    const r = await floe(['audit', 'toy', '--tasks', TASK, '--auditor', cfgFile, '--auditor-attempts', '2']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`audit ${auditId}`);
    const row = (await db.query<{ status: string; evidence: { kind: string; diff: string; difference: unknown } }>('select status, evidence from task_audits where audit_id = $1 and task_id = $2', [auditId, TASK])).rows[0];
    expect(row.status).toBe('flagged');
    expect(row.evidence).toMatchObject({ kind: 'auditor', difference: expect.anything() });
    expect(row.evidence.diff).toContain('else -n');
    const cands = (await db.query<{ candidate_id: string; kind: string; diff: string; tests_passed: boolean; difference: unknown }>(
      'select candidate_id, kind, diff, tests_passed, difference from audit_candidates where audit_id = $1 and task_id = $2 order by candidate_id', [auditId, TASK])).rows;
    const agent = cands.filter((c) => c.kind === 'auditor');
    expect(agent.map((c) => c.candidate_id)).toEqual(['agent-0', 'agent-1']);
    // the second agent left the tests in: taken out, its fix applies, passes and equals the gold's behaviour
    expect(agent[1].diff).not.toContain('tests/test_hidden.py');
    expect(agent[1]).toMatchObject({ tests_passed: true, difference: null });
    // without the agent this task passes the audit: none of floe's own candidates is a wrong patch it accepts
    expect(cands.filter((c) => c.kind !== 'auditor' && c.difference !== null)).toEqual([]);
    const rollouts = (await db.query<{ task_id: string; purpose: string; status: string }>('select task_id, purpose, status from rollouts where run_id = $1 order by rollout_id', [auditId])).rows;
    expect(rollouts).toEqual([0, 1].map(() => ({ task_id: `${TASK}@auditor`, purpose: 'audit', status: 'finished' })));
    // the engine was asked with the brief
    const prompt = Buffer.from(engine.requests.find((q) => q.user.endsWith('@auditor-0'))!.prompt.filter((id) => id < 256)).toString('utf8');
    expect(prompt).toContain('The correct fix (do not submit this)');
  }, 600_000);

  it('an auditor config without engines, or whose engine does not answer, is refused before anything starts', async () => {
    const none = path.join(path.dirname(cfgFile), 'none.json');
    fs.writeFileSync(none, JSON.stringify({ engines: { count: 0 } }));
    const a = await floe(['audit', 'toy', '--tasks', TASK, '--auditor', none]);
    expect(a.code).not.toBe(0);
    expect(a.stderr).toMatch(/engines\.endpoints is empty.*list it under engines\.endpoints/);
    const dead = path.join(path.dirname(cfgFile), 'dead.json');
    fs.writeFileSync(dead, JSON.stringify({ engines: { count: 0, endpoints: [{ id: 'gone', url: 'http://127.0.0.1:9' }] } }));
    const b = await floe(['audit', 'toy', '--tasks', TASK, '--auditor', dead]);
    expect(b.code).not.toBe(0);
    expect(b.stderr).toMatch(/engine gone at http:\/\/127\.0\.0\.1:9\/? does not answer \/health\. Start it/);
  }, 120_000);
});
