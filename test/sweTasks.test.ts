import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { parseRunConfig } from '../core/config.js';
import { renderToolCall, type ToolCall } from '../core/tools.js';
import type { Task } from '../core/taskModel.js';
import type { TaskLayout } from '../core/taskLayouts.js';
import type { GradeResult, SandboxLimits } from '../core/sandboxPolicy.js';
import { loadJsonl } from '../tasks/loaders.js';
import { createTaskActivities } from '../activities/tasks.js';
import { gradePatch } from '../activities/grading.js';
import { createSandboxActivities, workerIdentity } from '../activities/sandbox/index.js';
import { insertRun } from '../store/runs.js';
import { listTurns } from '../store/rollouts.js';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import type { RolloutInput, RolloutResult } from '../workflows/rollout.js';
import type { RolloutSettings } from '../core/contracts.js';
import { buildSweFixtures } from './fixtures/swe/build.js';
import { buildR2eFixtures, R2E_ROWS_FILE } from './fixtures/r2e/build.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { scriptedRolloutSettings, startScriptedEngine, type ScriptedEngine, type ScriptedOutput } from './helpers/scriptedEngine.js';
import { floe } from './helpers/cli.js';
import { startRun } from '../client/runs.js';
import { eventually } from './helpers/wait.js';

/** Real SWE task layouts at small scale (test/fixtures/swe, test/fixtures/r2e): SWE-bench
 *  instance images with the repository at /testbed installed in editable mode into a conda-style
 *  `testbed` env (pytest, Django's runtests.py, sympy's bin/test), SWE-Gym and SWE-rebench rows
 *  of a repository outside the swebench tables (colour forced on, odd parametrize ids), and an
 *  R2E-Gym image with its hidden tests and expected outputs. Each is graded by its own harness,
 *  in real podman containers, and run through the real rollout loop. */

const docker = dockerFromSettings(settings);
const runId = `swe-tasks-test-${process.pid}-${Date.now()}`;
const opts = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity(), harnessPython: settings.harness.bin };
const limits: SandboxLimits = { cpus: 1, memoryMb: 512, pidsLimit: 256, diskMb: 256, commandTimeoutSeconds: 120, maxOutputBytes: 64 * 1024 };
const GRADE_TIMEOUT = 300;

const fixturesDir = path.join(import.meta.dirname, 'fixtures', 'swe');
/** Every fixture row, with the layout its dataset publishes it in and the harness that grades it. */
const POOLS: { file: string; layout: TaskLayout }[] = [
  { file: path.join(fixturesDir, 'rows', 'swe-bench.jsonl'), layout: 'swe-bench' },
  { file: path.join(fixturesDir, 'rows', 'swe-gym.jsonl'), layout: 'swe-gym' },
  { file: path.join(fixturesDir, 'rows', 'swe-rebench.jsonl'), layout: 'swe-rebench' },
  { file: R2E_ROWS_FILE, layout: 'r2e-gym' },
];
const HARNESS: Record<string, string> = { 'django/django': 'swebench', 'pallets/flask': 'swebench', 'sympy/sympy': 'swebench', 'floe-fixtures/colorful': 'pytest', tinyfmt: 'r2e-gym' };

/** Each fixture task under a name unique across the pools (SWE-Gym and SWE-rebench share a row). */
interface Case { name: string; task: Task }
const cases: Case[] = POOLS.flatMap(({ file, layout }) => loadJsonl(file, { onBadRow: 'fail', layout }).tasks.map((task) => ({ name: `${layout}/${task.instanceId}`, task })));

let platform: Platform;
let engine: ScriptedEngine;
let db: pg.Pool;

beforeAll(async () => {
  const log = (m: string) => process.stderr.write(`[fixtures] ${m}\n`);
  await buildSweFixtures({ log });
  await buildR2eFixtures({ log });
  platform = await withWorkers(['control', 'sandbox']);
  engine = await startScriptedEngine();
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  await insertRun(db, { runId, workflowId: runId, name: 'swe-tasks-test', config: parseRunConfig({ name: 'swe-tasks-test' }) });
  const tasks = createTaskActivities(db);
  for (const p of POOLS) await tasks.loadTaskPool({ source: p.file, layout: p.layout, include: [], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
}, 1_800_000);

afterAll(async () => {
  await db?.end();
  await engine?.close();
  await platform?.close();
});

const grade = (task: Task, diff: string): Promise<GradeResult> => gradePatch(docker, opts, { task, diff, limits, timeoutSeconds: GRADE_TIMEOUT, labels: { 'floe.run': runId } });
const notPassed = (g: GradeResult) => g.tests.filter((t) => t.outcome !== 'passed').map((t) => `${t.group} ${t.id}: ${t.outcome}`);

describe('every fixture task of every layout is graded by its own harness', () => {
  it('covers each layout and harness', () => {
    expect(new Set(cases.map((c) => c.task.layout))).toEqual(new Set(['swe-bench', 'swe-gym', 'swe-rebench', 'r2e-gym']));
    expect(new Set(cases.map((c) => HARNESS[c.task.repo]))).toEqual(new Set(['swebench', 'pytest', 'r2e-gym']));
  });

  for (const { name, task } of cases) {
    describe(name, () => {
      it('the gold patch earns 1, with every test passing by the harness\'s parser', async () => {
        const g = await grade(task, task.patch);
        expect(g.harness).toBe(HARNESS[task.repo]);
        expect(notPassed(g), g.log.slice(-3000)).toEqual([]);
        expect(g.tests.length).toBe(task.failToPass.length + task.passToPass.length);
        expect(g.passed).toBe(true);
      }, 600_000);

      it('an empty patch earns 0: its FAIL_TO_PASS tests fail', async () => {
        const g = await grade(task, '');
        expect(g.passed).toBe(false);
        expect(g.applyError).toBeNull();
        if (task.failToPass.length) expect(g.tests.filter((t) => t.group === 'FAIL_TO_PASS').some((t) => t.outcome !== 'passed')).toBe(true);
        // the rest still pass: the harness read the run, it did not just fail everything
        expect(g.tests.filter((t) => t.group === 'PASS_TO_PASS').every((t) => t.outcome === 'passed'), g.log.slice(-3000)).toBe(true);
      }, 600_000);

      it('a patch that breaks a PASS_TO_PASS test earns 0', async () => {
        expect(task.wrongPatch).toBeTruthy();
        const g = await grade(task, task.wrongPatch!);
        expect(g.passed).toBe(false);
        expect(g.applyError).toBeNull();
        expect(g.tests.filter((t) => t.group === 'PASS_TO_PASS' && t.outcome !== 'passed').length, g.log.slice(-3000)).toBeGreaterThan(0);
      }, 600_000);
    });
  }

  it('the repository outside the tables forces colour, and its odd parametrize ids still grade 1', async () => {
    const colorful = cases.find((c) => c.task.layout === 'swe-rebench')!.task;
    const ids = [...colorful.failToPass, ...colorful.passToPass];
    expect(ids.some((id) => /\[[^\]]* [^\]]*\]/.test(id))).toBe(true); // a parametrize id with a space
    const g = await grade(colorful, colorful.patch);
    expect(g.log).toContain('\u001b['); // pytest's output really is coloured
    expect(g).toMatchObject({ passed: true, harness: 'pytest' });
  }, 600_000);
});

describe('inside the sandbox', () => {
  const sandbox = createSandboxActivities(docker, opts);

  for (const { name, task } of cases.filter((c, i, all) => all.findIndex((d) => d.task.source.kind === 'image' && c.task.source.kind === 'image' && d.task.source.image === c.task.source.image) === i)) {
    it(`${name}: the shell starts in /testbed, in the image's environment, and the installed package imports the agent's edits`, async () => {
      const { containerId } = await sandbox.createSandbox({ runId, rolloutId: `${runId}-import-${task.instanceId}`, task, limits });
      try {
        const pkg = packageOf(task);
        const r = await sandbox.execInSandbox({
          containerId, timeoutSeconds: 60, maxOutputBytes: 8192,
          command: `pwd; git log --all --oneline | wc -l; f=$(python -c 'import ${pkg}; print(${pkg}.__file__)') && echo "$f" && printf '\\nFLOE_EDIT_MARK = 7\\n' >> "$f" && python -c 'import ${pkg}; print(${pkg}.FLOE_EDIT_MARK)'`,
        });
        const lines = r.output.trim().split('\n');
        expect(lines[0]).toBe('/testbed');
        expect(lines[1]).toBe('1');
        expect(lines[2]).toMatch(/^\/testbed\//);
        expect(lines[3], r.output).toBe('7');
      } finally {
        await sandbox.destroySandbox({ containerId });
      }
    }, 300_000);
  }

  it('an R2E-Gym sandbox has neither the hidden tests nor run_tests.sh', async () => {
    const task = cases.find((c) => c.task.layout === 'r2e-gym')!.task;
    const { containerId } = await sandbox.createSandbox({ runId, rolloutId: `${runId}-r2e-hidden`, task, limits });
    try {
      const r = await sandbox.execInSandbox({ containerId, timeoutSeconds: 30, maxOutputBytes: 8192, command: 'ls -A /r2e_tests 2>&1 | head -3; ls run_tests.sh r2e_tests 2>&1 | wc -l; ls -A /r2e_tests 2>/dev/null | wc -l' });
      expect(r.output).toMatch(/Permission denied/);
      expect(r.output.trim().split('\n').pop()).toBe('0');
    } finally {
      await sandbox.destroySandbox({ containerId });
    }
  }, 300_000);
});

/** The installed package of a fixture task (test/fixtures/swe/repos/<name>/meta.json; R2E-Gym's is its repo name). */
function packageOf(task: Task): string {
  if (task.layout === 'r2e-gym') return task.repo;
  for (const dir of fs.readdirSync(path.join(fixturesDir, 'repos'))) {
    const meta = JSON.parse(fs.readFileSync(path.join(fixturesDir, 'repos', dir, 'meta.json'), 'utf8')) as { instance_id: string; package: string };
    if (meta.instance_id === task.instanceId) return meta.package;
  }
  throw new Error(`no fixture meta.json for ${task.instanceId}`);
}

describe('the real rollout loop', () => {
  function rolloutSettings(): RolloutSettings {
    const s = scriptedRolloutSettings(engine.url, { maxTurns: 4 });
    return {
      ...s,
      budgets: { maxTurns: 4, maxTotalTokens: 1_000_000, maxWallSeconds: 900 },
      maxObservationChars: 2000,
      sandbox: { ...s.sandbox, ...limits, gradeTimeoutSeconds: GRADE_TIMEOUT },
      maxDiffBytes: 256 * 1024,
    };
  }
  const call = (c: ToolCall): ScriptedOutput => ({ text: renderToolCall(c) });

  for (const { name, task } of cases) {
    it(`${name}: the scripted policy applies the gold fix and earns 1; the history inside is one commit`, async () => {
      const rolloutId = `${runId}-loop-${task.layout}-${task.instanceId}`;
      const patch = Buffer.from(task.patch, 'utf8').toString('base64');
      engine.script(rolloutId, [
        call({ name: 'bash', arguments: { command: `echo ${patch} | base64 -d | git apply -` } }),
        call({ name: 'bash', arguments: { command: 'git log --all --oneline | wc -l' } }),
        call({ name: 'submit', arguments: {} }),
      ]);
      const input: RolloutInput = { runId, rolloutId, taskId: task.instanceId, groupId: `${runId}-${task.instanceId}`, attempt: 0, purpose: 'test', settings: rolloutSettings() };
      const result: RolloutResult = await platform.client.workflow.execute('rollout', { taskQueue: CONTROL_QUEUE, workflowId: `floe-rollout-${rolloutId}`, args: [input] });
      const turns = await listTurns(db, rolloutId);
      expect(turns.map((t) => (t.observation === null ? null : t.observation.split('\n')[0]))).toEqual(['exit code 0', 'exit code 0', null]);
      expect(turns[1].observation).toBe('exit code 0\n1\n');
      expect(result, JSON.stringify(result)).toMatchObject({ reward: 1, gate: 'passed' });
      // the per-test outcomes are stored, as the task's harness read them
      const stored = await db.query<{ harness: string; outcome: string }>('select harness, outcome from v_test_outcomes where rollout_id = $1', [rolloutId]);
      expect(stored.rows.length).toBe(task.failToPass.length + task.passToPass.length);
      expect(new Set(stored.rows.map((r) => `${r.harness} ${r.outcome}`))).toEqual(new Set([`${HARNESS[task.repo]} passed`]));
    }, 900_000);
  }
});

describe('the image preflight', () => {
  it('a sandbox of an absent image fails at once, naming the image and its load command', async () => {
    const task = { ...cases[0].task, source: { kind: 'image' as const, image: 'docker.io/floe-missing/none:1' } };
    const err = await createSandboxActivities(docker, opts).createSandbox({ runId, rolloutId: `${runId}-absent`, task, limits }).catch((e: unknown) => e);
    expect(err).toMatchObject({ nonRetryable: true, type: 'ImagesMissing' });
    expect((err as Error).message).toMatch(/docker\.io\/floe-missing\/none:1 is not on this sandbox host; .*podman load -i/);
  });

  it('`floe tasks check` lists a pool\'s layouts and images, and names a missing one with its load command', async () => {
    const ok = await floe(['tasks', 'check', POOLS[1].file, '--layout', 'swe-gym']);
    expect(ok.stdout).toMatch(/1 task\(s\) in .*swe-gym\.jsonl: 1 swe-gym\n1 of 1 image\(s\) on /);
    expect(ok.code).toBe(0);
    // the same row read as SWE-bench names an image nobody built
    const bad = await floe(['tasks', 'check', POOLS[1].file]);
    expect(bad.stdout).toMatch(/missing {2}docker\.io\/swebench\/sweb\.eval\.x86_64\.floe-fixtures_1776_colorful-90004:latest\n {9}fix: .*podman load -i/);
    expect(bad.code).toBe(1);
  }, 120_000);

  it('refuses a pool that names an absent image before any rollout, naming the image and its load command', async () => {
    const absent = 'docker.io/floe-missing/sweb.eval.x86_64.nothing:latest';
    const row = { ...JSON.parse(fs.readFileSync(POOLS[2].file, 'utf8').split('\n')[0]) as Record<string, unknown>, instance_id: 'floe-missing__nothing-1', docker_image: absent };
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'floe-preflight-')), 'absent.jsonl');
    fs.writeFileSync(file, `${JSON.stringify(row)}\n`);
    // started by the client, not `floe run start`, whose own checks refuse it before any run
    // exists (test/chaos/badInput.test.ts): here the run's preflight, for every other client
    const { runId: started } = await startRun(platform.client, parseRunConfig({ name: 'preflight', tasks: { source: file, layout: 'swe-rebench', excludeLooseTests: false },
      engines: { endpoints: [{ id: 'scripted', url: engine.url, node: 'local' }] }, trainer: { url: 'http://127.0.0.1:9' }, rollout: { groupSize: 1 }, training: { groupsPerUpdate: 1000 } }));
    const row2 = await eventually('the run to fail', async () => (await db.query<{ status: string; summary: { error?: string } | null }>('select status, summary from runs where run_id = $1', [started])).rows[0], (x) => x?.status === 'failed', 120_000);
    expect(row2.summary?.error).toContain(absent);
    expect(row2.summary?.error).toMatch(/podman load -i/);
    expect(row2.summary?.error).toMatch(/no rollout was started/);
    expect(Number((await db.query('select count(*) from rollouts where run_id = $1', [started])).rows[0].count)).toBe(0);
  }, 300_000);
});
