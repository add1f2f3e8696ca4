import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { loadSettings } from '../infra/settings.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { Task } from '../core/taskModel.js';
import { patchFiles, type GradeResult, type SandboxLimits } from '../core/sandboxPolicy.js';
import { createGradingActivities, gradePatch } from '../activities/grading.js';
import { createSandboxActivities, workerIdentity } from '../activities/sandbox/index.js';
import { removeContainer } from '../activities/sandbox/containerSpec.js';

/** Grading against real podman with toy tasks: a fresh grader container per submission, the
 *  test patch winning over anything the diff did to tests, and a hanging test timed out. */

const settings = loadSettings();
const docker = dockerFromSettings(settings);
const RUN = `test-grading-${process.pid}-${Date.now()}`;
const opts = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity(), harnessPython: settings.harness.bin };
const grading = createGradingActivities(docker, opts);
const limits: SandboxLimits = { cpus: 1, memoryMb: 128, pidsLimit: 64, diskMb: 64, commandTimeoutSeconds: 10, maxOutputBytes: 8192 };
const tasks = loadToySuite({ onBadRow: 'fail' }).tasks;
const task = (id: string): Task => tasks.find((t) => t.instanceId === id)!;
const sound = task('toy__caesar_wrap'); // floe.loose_tests false
const loose = task('toy__c_to_f'); // floe.loose_tests true

let n = 0;
function grade(t: Task, diff: string, timeoutSeconds = 30): Promise<GradeResult> {
  return grading.gradeSubmission({ runId: RUN, rolloutId: `${RUN}-${n++}`, task: t, diff, limits, timeoutSeconds });
}

/** A git diff of the task's repository after edits (host-side git, like an agent's diff). */
function diffOf(t: Task, edits: Record<string, (text: string) => string>): string {
  if (t.source.kind !== 'directory') throw new Error('toy tasks are directories');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-grade-'));
  try {
    fs.cpSync(t.source.path, dir, { recursive: true });
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' });
    git('init', '-q');
    git('add', '-A');
    git('commit', '-qm', 'base');
    for (const [file, edit] of Object.entries(edits)) {
      const p = path.join(dir, file);
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, edit(fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : ''));
    }
    git('add', '-A');
    return git('diff', '--cached', '--binary');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function outcomes(g: GradeResult): Record<string, string> {
  return Object.fromEntries(g.tests.map((t) => [t.id, t.outcome]));
}

async function ourContainers(): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [`floe.run=${RUN}`] } });
  return list.map((c) => c.Id);
}

afterAll(async () => {
  for (const id of await ourContainers()) await removeContainer(docker.getContainer(id));
});

describe('reading patches (pure)', () => {
  it('lists the files a patch touches and which it creates', () => {
    expect(patchFiles(loose.testPatch)).toEqual([{ path: 'tests/test_hidden.py', isNew: true, isDeleted: false }]);
    expect(patchFiles(sound.patch)).toEqual([{ path: 'cipher.py', isNew: false, isDeleted: false }]);
    const plain = '--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ "b/q t.py"\n';
    expect(patchFiles(plain).map((f) => f.path)).toEqual(['x.py', 'q t.py']);
    const sql = 'diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- old\n+++ new\n keep\n';
    expect(patchFiles(sql).map((f) => f.path)).toEqual(['q.sql']);
    expect(patchFiles('diff --git "a/sp\\303\\251c.py" "b/sp\\303\\251c.py"\ndeleted file mode 100644\n')).toEqual([{ path: 'sp\u00e9c.py', isNew: false, isDeleted: true }]);
  });
});

describe('gradeSubmission', () => {
  it('passes the gold patch, every test passed', async () => {
    for (const t of [sound, loose]) {
      const g = await grade(t, t.patch);
      expect(g).toMatchObject({ passed: true, applyError: null, timedOut: false });
      expect(g.tests).toHaveLength(t.failToPass.length + t.passToPass.length);
      expect(g.tests.every((x) => x.outcome === 'passed')).toBe(true);
      expect(g.tests.filter((x) => x.group === 'FAIL_TO_PASS').map((x) => x.id)).toEqual(t.failToPass);
    }
  });

  it('fails an empty diff: FAIL_TO_PASS failed, PASS_TO_PASS passed', async () => {
    const g = await grade(sound, '');
    expect(g).toMatchObject({ passed: false, applyError: null, timedOut: false });
    for (const x of g.tests) expect(x.outcome).toBe(x.group === 'FAIL_TO_PASS' ? 'failed' : 'passed');
  });

  it('fails the wrong patch of a sound task, and passes it on a loose one', async () => {
    const s = await grade(sound, sound.wrongPatch!);
    expect(s.passed).toBe(false);
    expect(s.tests.some((x) => x.group === 'FAIL_TO_PASS' && x.outcome === 'failed')).toBe(true);
    const l = await grade(loose, loose.wrongPatch!);
    expect(l.passed).toBe(true);
  });

  it('lets the test patch win over a diff that writes the hidden test file', async () => {
    const fake = diffOf(loose, { 'tests/test_hidden.py': () => 'def test_freezing_point():\n    pass\n' });
    expect(fake).toContain('new file mode');
    const g = await grade(loose, fake);
    expect(g).toMatchObject({ passed: false, applyError: null });
    expect(outcomes(g)['tests/test_hidden.py::test_freezing_point']).toBe('failed');
    // with the real fix as well, the real hidden test runs and passes
    const both = diffOf(loose, {
      'tests/test_hidden.py': () => 'def test_freezing_point():\n    assert False\n',
      'temp.py': (s) => s.replace('5 - 32', '5 + 32'),
    });
    expect((await grade(loose, both)).passed).toBe(true);
  });

  it('restores visible tests that the diff weakened', async () => {
    const weakened = diffOf(loose, {
      'temp.py': (s) => s.replace('5 - 32', '5 + 32').replace('(f - 32) * 5 / 9', '(f - 30) * 5 / 9'),
      'tests/test_visible.py': (s) => s.replace('assert f_to_c(212) == 100', 'assert True').replace('assert f_to_c(32) == 0', 'assert True'),
    });
    const g = await grade(loose, weakened);
    expect(g.passed).toBe(false);
    expect(outcomes(g)).toMatchObject({ 'tests/test_visible.py::test_boiling': 'failed', 'tests/test_visible.py::test_freezing': 'failed', 'tests/test_hidden.py::test_freezing_point': 'passed' });
  });

  it('reports a diff that does not apply', async () => {
    const bad = loose.patch.replace('-    return c * 9 / 5 - 32', '-    return c * 9 / 5 - 33');
    const g = await grade(loose, bad);
    expect(g.passed).toBe(false);
    expect(g.applyError).toMatch(/does not apply/);
    expect(g.tests.every((x) => x.outcome === 'missing')).toBe(true);
  });

  it('times out a hanging test, fails it, and removes the grader', async () => {
    const hang = diffOf(loose, { 'temp.py': (s) => s.replace('    """Celsius to Fahrenheit."""\n', '    """Celsius to Fahrenheit."""\n    while True:\n        pass\n') });
    const rollout = `${RUN}-hang`;
    const started = Date.now();
    const g = await grading.gradeSubmission({ runId: RUN, rolloutId: rollout, task: loose, diff: hang, limits, timeoutSeconds: 3 });
    expect(g).toMatchObject({ passed: false, timedOut: true, applyError: null });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(g.log).toMatch(/no result within 3 s/);
    const left = await docker.listContainers({ all: true, filters: { label: [`floe.rollout=${rollout}`] } });
    expect(left).toEqual([]);
  });

  it('grades a diff taken out of a sandbox like the gold patch', async () => {
    const sandbox = createSandboxActivities(docker, opts);
    const { containerId } = await sandbox.createSandbox({ runId: RUN, rolloutId: `${RUN}-sandbox`, task: sound, limits });
    try {
      const cmd = sound.solution!.filter((s) => s.name === 'bash').map((s) => String(s.arguments.command)).join(' && ');
      expect((await sandbox.execInSandbox({ containerId, command: cmd, timeoutSeconds: 10, maxOutputBytes: 8192 })).exitCode).toBe(0);
      const { diff } = await sandbox.extractDiff({ containerId, maxBytes: 100_000 });
      const g = await gradePatch(docker, opts, { task: sound, diff, limits, timeoutSeconds: 30, labels: { 'floe.run': RUN } });
      expect(g.passed).toBe(true);
    } finally {
      await sandbox.destroySandbox({ containerId });
    }
  });
});

describe('gradePatch from a plain script', () => {
  it('grades one patch, prints its result and exits 0 (the harness process keeps the loop alive while a reply is pending)', () => {
    // negative control: an empty diff grades as failed in the same script
    const run = (which: string) => execFileSync('npx', ['tsx', 'test/helpers/gradeOne.ts', loose.instanceId, which, RUN], { encoding: 'utf8', timeout: 120_000 });
    const gold = JSON.parse(run('gold').trim().split('\n').pop()!) as { passed: boolean; tests: unknown[] };
    expect(gold).toMatchObject({ passed: true });
    expect(gold.tests.length).toBe(loose.failToPass.length + loose.passToPass.length);
    expect(JSON.parse(run('empty').trim().split('\n').pop()!)).toMatchObject({ passed: false });
  }, 240_000);
});

describe('cleanup', () => {
  it('leaves no grader container of this test behind', async () => {
    expect(await ourContainers()).toEqual([]);
  });
});
