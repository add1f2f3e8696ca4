import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { parseRunConfig } from '../core/config.js';
import { renderToolCall, type ToolCall } from '../core/tools.js';
import { insertRun } from '../store/runs.js';
import { upsertTask } from '../store/tasks.js';
import { listEvaluations } from '../store/evaluations.js';
import { buildWarmStart } from '../infra/warmstart.js';
import { listPass, parseTaskList } from '../core/evalTasks.js';
import { frozenAttempt, scoreTasks } from '../core/passAtK.js';
import { selectTasks } from '../tasks/loaders.js';
import type { EvaluationInput, EvaluationResult } from '../workflows/evaluation.js';
import type { RolloutSettings } from '../core/contracts.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { floe } from './helpers/cli.js';
import { startScriptedEngine, type ScriptedEngine, type ScriptedOutput, scriptedRolloutSettings } from './helpers/scriptedEngine.js';

/** `floe eval` and the evaluation workflow it runs, on real Temporal, Postgres and podman
 *  sandboxes: bad input refused with its fix; a scripted policy's pass@1 / pass@k exact; the
 *  real CLI on a real checkpoint, two columns side by side, with new weights loaded into its
 *  engine in the middle of the evaluation, every attempt still scored with the frozen version. */

const tasks = selectTasks({ source: 'toy', include: [], limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
const byId = new Map(tasks.map((t) => [t.instanceId, t]));
let db: pg.Pool;
let platform: Platform;
let engine: ScriptedEngine;
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-eval-test-'));

const call = (c: ToolCall): ScriptedOutput => ({ text: renderToolCall(c) });
const solve = (taskId: string): ScriptedOutput[] => byId.get(taskId)!.solution!.map((c) => call(c as ToolCall));
const fail: ScriptedOutput[] = [call({ name: 'bash', arguments: { command: 'ls' } }), call({ name: 'submit', arguments: {} })];

function scriptedSettings(): RolloutSettings {
  return scriptedRolloutSettings(engine.url, { maxTurns: 6 });
}

beforeAll(async () => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  platform = await withWorkers(['control', 'sandbox']);
  engine = await startScriptedEngine();
  for (const t of tasks) await upsertTask(db, t);
});

afterAll(async () => {
  await engine?.close();
  await platform?.close();
  await db?.end();
  fs.rmSync(scratch, { recursive: true, force: true });
});

describe('task lists and frozen scoring (pure rules)', () => {
  it('reads one id per line (comments, blanks skipped) or a JSON array; refuses empty lists and duplicates', () => {
    expect(parseTaskList('# pool\ntoy__a\n\n  toy__b  # second\n', 'f')).toEqual(['toy__a', 'toy__b']);
    expect(parseTaskList(' ["toy__a", "toy__b"] ', 'f.json')).toEqual(['toy__a', 'toy__b']);
    expect(() => parseTaskList('\n# none\n', 'f')).toThrow(/f: no task ids in it/);
    expect(() => parseTaskList('[1, "x"]', 'f.json')).toThrow(/every entry must be a task id string/);
    expect(() => parseTaskList('a\nb\na\n', 'f')).toThrow(/task id a is listed twice/);
  });

  it('an attempt whose tokens carry another version is counted apart, never scored; lists are scored over their own tasks', () => {
    const attempts = [
      frozenAttempt({ taskId: 'a', reward: 1, gate: 'passed' }, [5, 5], 5),
      frozenAttempt({ taskId: 'a', reward: 1, gate: 'passed' }, [5, 6], 5),
      frozenAttempt({ taskId: 'a', reward: 0, gate: 'format' }, [null, null], 5),
      frozenAttempt({ taskId: 'b', reward: 1, gate: 'passed' }, [6, 6], 5),
    ];
    const scores = scoreTasks(['a', 'b'], attempts, 2);
    expect(scores.map((x) => [x.taskId, x.solved, x.attempts, x.failed])).toEqual([['a', 1, 2, 1], ['b', 0, 0, 1]]);
    expect(listPass(scores, [{ name: 'A', taskIds: ['a'] }, { name: 'AB', taskIds: ['a', 'b'] }])).toEqual([
      { name: 'A', tasks: 1, pass1: 0.5, passK: 1, failed: 1 },
      { name: 'AB', tasks: 2, pass1: 0.25, passK: 0.5, failed: 2 },
    ]);
  });
});

describe('floe eval refuses bad input, naming the problem and the fix', () => {
  it('k < 1, no --tasks, an unknown run id, a folder with no checkpoint, an empty list, unknown task ids', async () => {
    const ckptless = path.join(scratch, 'not-a-checkpoint');
    fs.mkdirSync(ckptless);
    const empty = path.join(scratch, 'empty.txt');
    fs.writeFileSync(empty, '# nothing here\n\n');
    const unknown = path.join(scratch, 'unknown.txt');
    fs.writeFileSync(unknown, 'toy__c_to_f\ntoy__no_such_task\n');
    const dup = path.join(scratch, 'dup.json');
    fs.writeFileSync(dup, '["toy__c_to_f", "toy__c_to_f"]');
    const cases: [string[], RegExp][] = [
      [['eval', ckptless, '--tasks', 'toy', '--k', '0'], /--k must be from 1 to 64/],
      [['eval', ckptless], /needs --tasks/],
      [['eval', 'no-such-run-4711', '--tasks', 'toy'], /'no-such-run-4711' is neither a checkpoint folder nor a run id known to Postgres \(see `floe run list`/],
      [['eval', ckptless, '--tasks', 'toy'], /has no checkpoint\.json: not a floe checkpoint folder/],
    ];
    for (const [args, msg] of cases) {
      const r = await floe(args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(msg);
    }
    // list errors come after the policy is known: give a real checkpoint folder's shape
    const fake = path.join(scratch, 'v0');
    fs.mkdirSync(fake);
    fs.writeFileSync(path.join(fake, 'checkpoint.json'), JSON.stringify({ version: 0 }));
    for (const [list, msg] of [[empty, /no task ids in it/], [unknown, /1 task id\(s\) not in toy: toy__no_such_task \(`floe tasks check toy` lists the ids/], [dup, /toy__c_to_f is listed twice/], [path.join(scratch, 'missing.txt'), /no such file/]] as const) {
      const r = await floe(['eval', fake, '--tasks', list]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(msg);
    }
  }, 300_000);
});

describe('the evaluation workflow scores a scripted policy exactly', () => {
  it('solves X on every attempt, Y on none, Z on two of four: pass@1 1, 0, 0.5; pass@4 1, 0, 1; recorded under label checkpoint', async () => {
    const runId = `eval-test-${process.pid}-${Date.now()}`;
    await insertRun(db, { runId, workflowId: runId, name: 'eval-test', config: parseRunConfig({ name: 'eval-test' }) });
    const [x, y, z] = ['toy__bucket_refill', 'toy__caesar_wrap', 'toy__hex_pad'];
    for (let a = 0; a < 4; a++) {
      engine.script(`${runId}-eval-checkpoint-${x}-${a}`, solve(x));
      engine.script(`${runId}-eval-checkpoint-${y}-${a}`, fail);
      engine.script(`${runId}-eval-checkpoint-${z}-${a}`, a < 2 ? solve(z) : fail);
    }
    const input: EvaluationInput = { runId, label: 'checkpoint', version: 0, taskIds: [x, y, z], attempts: 4, maxInFlight: 4, settings: scriptedSettings(), seed: 0, pool: 'all' };
    const r: EvaluationResult = await platform.client.workflow.execute('evaluation', { taskQueue: CONTROL_QUEUE, workflowId: `floe-eval-${runId}`, args: [input] });
    expect(r.scores.map((s) => [s.taskId, s.solved, s.attempts, s.failed, s.pass1, s.passK])).toEqual([[x, 4, 4, 0, 1, 1], [y, 0, 4, 0, 0, 0], [z, 2, 4, 0, 0.5, 1]]);
    expect(r.pass1).toBeCloseTo(0.5, 10);
    const rows = new Map((await listEvaluations(db, runId)).map((e) => [e.taskId, [e.label, e.solved, e.attempts, e.pass1, e.passK]]));
    expect([x, y, z].map((id) => rows.get(id))).toEqual([['checkpoint', 4, 4, 1, 1], ['checkpoint', 0, 4, 0, 0], ['checkpoint', 2, 4, 0.5, 1]]);
    // each attempt is a real rollout, graded by the hidden tests
    const gates = await db.query<{ task_id: string; gate: string; n: number }>(
      `select r.task_id, g.gate, count(*)::int as n from rollouts r join gate_decisions g using (rollout_id) where r.run_id = $1 and r.purpose = 'eval' group by 1, 2 order by 1, 2`, [runId]);
    const key = (g: { task_id: string; gate: string }) => `${g.task_id} ${g.gate}`;
    expect(gates.rows.map((g) => `${key(g)} ${g.n}`).sort()).toEqual([`${x} passed 4`, `${y} tests_failed 4`, `${z} passed 2`, `${z} tests_failed 2`].sort());
  }, 600_000);
});

describe('floe eval on a real checkpoint', () => {
  it('prints two columns side by side and writes JSON; new weights loaded into its engine mid-evaluation never score', async () => {
    const warm = selectTasks({ source: 'toy', include: ['toy__caesar_wrap', 'toy__hex_pad'], limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
    const checkpoint = await buildWarmStart(settings, warm, { steps: 20, lr: 3e-3, model: 'tiny', seed: 0 });
    // the same weights under another version: a second column whose tokens must all say v7
    const relabelled = path.join(scratch, 'v7');
    fs.cpSync(checkpoint, relabelled, { recursive: true });
    const side = JSON.parse(fs.readFileSync(path.join(relabelled, 'checkpoint.json'), 'utf8')) as { version: number };
    fs.writeFileSync(path.join(relabelled, 'checkpoint.json'), JSON.stringify({ ...side, version: 7 }));
    // and as version 3: what a training run's update publishes (an engine loads a folder as the version its sidecar says)
    const published = path.join(scratch, 'v3');
    fs.cpSync(checkpoint, published, { recursive: true });
    fs.writeFileSync(path.join(published, 'checkpoint.json'), JSON.stringify({ ...side, version: 3 }));
    const ids = ['toy__bucket_refill', 'toy__caesar_wrap', 'toy__hex_pad', 'toy__day_of_year', 'toy__counter_roll', 'toy__chunks_tail'];
    for (const id of ids) expect(byId.has(id), id).toBe(true);
    const list = path.join(scratch, 'tasks.txt');
    fs.writeFileSync(list, `# held-out\n${ids.join('\n')}\n`);
    const out = path.join(scratch, 'eval.json');
    const since = new Date();

    // While the first column runs: load other weights (version 3) into its engine, as a training
    // run's weight update would, once a few of its attempts are done.
    let loaded: { version: number } | null = null;
    const intruder = (async () => {
      const deadline = Date.now() + 400_000;
      while (Date.now() < deadline) {
        const e = await db.query<{ eval_id: string }>(`select eval_id from checkpoint_evaluations where started_at >= $1 and version = 0 and state = 'running'`, [since]);
        const evalId = e.rows[0]?.eval_id;
        if (evalId) {
          const done = await db.query<{ n: number }>(`select count(*)::int as n from rollouts where run_id = $1 and status = 'finished'`, [evalId]);
          const urls = await db.query<{ url: string }>('select url from engine_weights where run_id = $1', [evalId]);
          if (done.rows[0].n >= 2 && urls.rows.length) {
            const r = await fetch(new URL('/update_weights', urls.rows[0].url), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ path: published, version: 3 }) });
            loaded = (await r.json()) as { version: number };
            return evalId;
          }
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return null;
    })();
    // two attempts at a time: the load lands while most of the first column's are still to come
    const r = await floe(['eval', checkpoint, relabelled, '--tasks', list, '--k', '4', '--set', 'rollout.maxInFlight=2', '--out', out], {}, 900_000);
    const evalId = await intruder;
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(evalId, 'the test loaded no weights mid-evaluation: it proves nothing').not.toBeNull();
    expect(loaded).toMatchObject({ version: 3 });
    // the load landed, and floe noticed: ids of version 3 were dropped and the engine reloaded v0
    const dropped = await db.query<{ n: number }>(`select count(*)::int as n from engine_requests where run_id = $1 and outcome = 'dropped' and detail->>'reason' = 'not_frozen'`, [evalId]);
    expect(dropped.rows[0].n).toBeGreaterThan(0);
    const resynced = await db.query<{ version: number }>(`select version from engine_events where run_id = $1 and event = 'resynced'`, [evalId]);
    expect(resynced.rows.map((x) => x.version)).toContain(0);

    const json = JSON.parse(fs.readFileSync(out, 'utf8')) as { k: number; columns: { evalId: string; version: number; versionsSeen: number[]; pass1: number; tasks: { taskId: string; solved: number; attempts: number; failed: number }[] }[] };
    expect(json.columns.map((c) => [c.version, c.versionsSeen])).toEqual([[0, [0]], [7, [7]]]);
    expect(json.columns[0].evalId).toBe(evalId);
    for (const c of json.columns) {
      // every attempt finished, and its every token came from the frozen version
      const v = await db.query<{ n: number; frozen: number; solved: number }>(
        `select count(*)::int as n, count(*) filter (where version_start = $2 and version_end = $2)::int as frozen, count(*) filter (where reward = 1)::int as solved
         from rollouts where run_id = $1 and purpose = 'eval' and status = 'finished'`, [c.evalId, c.version]);
      expect(v.rows[0]).toEqual({ n: ids.length * 4, frozen: ids.length * 4, solved: c.tasks.reduce((a, t) => a + t.solved, 0) });
      const tok = await db.query<{ n: number }>(
        `select count(*)::int as n from turn_tokens t join rollouts r using (rollout_id), unnest(t.token_versions) as tv where r.run_id = $1 and tv <> $2`, [c.evalId, c.version]);
      expect(tok.rows[0].n).toBe(0);
      expect(c.tasks.map((t) => [t.taskId, t.attempts + t.failed])).toEqual(ids.map((id) => [id, 4]));
      expect(c.pass1).toBeCloseTo(c.tasks.reduce((a, t) => a + t.solved / t.attempts, 0) / ids.length, 10);
      const rec = await db.query<{ state: string; pass_at_1: number; versions_seen: number[] }>('select state, pass_at_1, versions_seen from checkpoint_evaluations where eval_id = $1', [c.evalId]);
      expect(rec.rows[0]).toEqual({ state: 'completed', pass_at_1: c.pass1, versions_seen: [c.version] });
    }
    // the table: a row per task and per list, one column per checkpoint
    expect(r.stdout).toMatch(/solved\/attempts\s+.*v0\)\s+.*v7\)/);
    expect(r.stdout).toMatch(new RegExp(`tasks\\.txt \\(6 tasks\\)\\s+${json.columns[0].pass1.toFixed(3)}\\s+${json.columns[1].pass1.toFixed(3)}`));
  }, 900_000);
});
