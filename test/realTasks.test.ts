// The realistic development set (tasks/real, issue 43): tasks made from real fixes between two
// PyPI releases. Its labels are proven by running the tests (tasks/real/validate.py: base fails,
// gold passes, a loose task's wrong patch passes every test and differs from gold on a probe, a
// sound task's wrong patches fail a test; each run as the grader runs it, in the sandbox's
// environment), a flipped label and a patch or environment the sandbox refuses are caught
// (negative controls), and `floe audit real` on two of its tasks flags the loose one with
// evidence and passes the sound one.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadFolderSet } from '../tasks/loaders.js';
import { floeBin, killGroup } from './helpers/cli.js';
import { repoRoot } from '../infra/settings.js';

const run = (args: string[]): { status: number; out: string } => {
  try {
    return { status: 0, out: execFileSync('python3', args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 16 * 1024 * 1024 }) };
  } catch (err) {
    const e = err as { status?: number | null; stdout?: string; stderr?: string };
    return { status: e.status ?? -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
};

interface Checked { id: string; loose: boolean; ok: boolean; problems: string[]; probe?: { gold: string; wrong: string } }

describe('the realistic development set', () => {
  it('builds from the pinned sdists, and every label holds when the tests run', () => {
    const built = run(['tasks/real/build.py']);
    expect(built.status, built.out.slice(-3000)).toBe(0);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-real-'));
    try {
      const v = run(['tasks/real/validate.py', '--json', path.join(dir, 'v.json')]);
      expect(v.status, v.out.slice(-3000)).toBe(0);
      const tasks = (JSON.parse(fs.readFileSync(path.join(dir, 'v.json'), 'utf8')) as { tasks: Checked[] }).tasks;
      expect(tasks.length).toBeGreaterThanOrEqual(21);
      expect(tasks.filter((t) => !t.ok).map((t) => `${t.id}: ${t.problems.join('; ')}`)).toEqual([]);
      expect(tasks.filter((t) => t.loose).length).toBeGreaterThanOrEqual(13);
      expect(tasks.filter((t) => !t.loose).length).toBeGreaterThanOrEqual(8);
      for (const t of tasks.filter((x) => x.loose)) expect(t.probe!.gold, t.id).not.toEqual(t.probe!.wrong);
      // the loaders read the set by name, as `floe audit real` and tasks.source do
      const loaded = loadFolderSet('real', 'fail').tasks;
      expect(loaded.map((t) => t.instanceId).sort()).toEqual(tasks.map((t) => t.id).sort());
      expect(loaded.every((t) => t.source.kind === 'directory' && t.looseTests !== null)).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it('a flipped label fails the validation (negative control, both ways)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-real-flip-'));
    try {
      for (const id of ['real__parse_subsecond', 'real__humanize_metric_precision']) {
        fs.cpSync(path.join(repoRoot, 'tasks', 'real', id), path.join(dir, id), { recursive: true });
        const file = path.join(dir, id, 'task.json');
        const row = JSON.parse(fs.readFileSync(file, 'utf8')) as { floe: { loose_tests: boolean; probe: string | null } };
        row.floe.loose_tests = !row.floe.loose_tests;
        if (row.floe.loose_tests) row.floe.probe = 'print(1)';
        fs.writeFileSync(file, JSON.stringify(row));
      }
      const v = run(['tasks/real/validate.py', '--root', dir]);
      expect(v.status).not.toBe(0);
      expect(v.out).toMatch(/FAIL real__parse_subsecond \(sound\): sound, but the wrong patch passes every test/);
      expect(v.out).toMatch(/FAIL real__humanize_metric_precision \(loose\): loose, but the wrong patch fails/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('validation runs the tests as the sandbox does: a patch git apply refuses, or a TERM the tests cannot take, fails it (negative controls)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-real-sandbox-'));
    try {
      // the test file taken whole, written as `--- a/<path>` (no `new file mode`): patch -p1 takes
      // it, git apply (the grader's) does not
      const b = 'real__boltons_windowed_fill';
      fs.cpSync(path.join(repoRoot, 'tasks', 'real', b), path.join(dir, b), { recursive: true });
      const file = path.join(dir, b, 'task.json');
      const row = JSON.parse(fs.readFileSync(file, 'utf8')) as { test_patch: string };
      expect(row.test_patch).toMatch(/^new file mode 100644\n--- \/dev\/null\n/m);
      row.test_patch = row.test_patch.replace(/new file mode 100644\n--- \/dev\/null\n\+\+\+ b\/(\S+)\n/, '--- a/$1\n+++ b/$1\n');
      fs.writeFileSync(file, JSON.stringify(row));
      // termcolor's tests under the sandbox's TERM=dumb, without the conftest line that unsets it
      const t = 'real__termcolor_strike';
      fs.cpSync(path.join(repoRoot, 'tasks', 'real', t), path.join(dir, t), { recursive: true });
      const conftest = path.join(dir, t, 'repo', 'conftest.py');
      const text = fs.readFileSync(conftest, 'utf8');
      expect(text).toContain('os.environ.pop("TERM", None)');
      fs.writeFileSync(conftest, text.replace('os.environ.pop("TERM", None)', ''));
      const v = run(['tasks/real/validate.py', '--root', dir]);
      expect(v.status).not.toBe(0);
      expect(v.out).toMatch(/FAIL real__boltons_windowed_fill \(loose\): the test patch does not apply with git apply/);
      expect(v.out).toMatch(/FAIL real__termcolor_strike \(sound\): base: a PASS_TO_PASS test does not pass/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('floe audit real flags the loose task with its evidence and passes the sound one (real Temporal, Postgres and podman graders)', async () => {
    const TASKS = ['real__parse_hyphen_field', 'real__humanize_metric_precision'];
    const res = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(floeBin, ['audit', 'real', '--tasks', TASKS.join(','), '--concurrency', '2'], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
      child.stdout.on('data', () => undefined);
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 420_000);
      child.on('error', reject);
      child.on('close', (code) => { clearTimeout(timer); resolve({ code, stderr }); });
    });
    expect(res.code, res.stderr.slice(-3000)).toBe(0);
    expect(res.stderr).toMatch(/against the labels it never saw: loose tasks flagged 1\/1; sound tasks flagged 0\/1/);
    const auditId = /audit (audit-real-[0-9a-f]+)/.exec(res.stderr)![1]!;
    const summary = JSON.parse(fs.readFileSync(path.join(repoRoot, 'runs', 'audits', auditId, 'summary.json'), 'utf8')) as { rows: { taskId: string; status: string; evidence: { diff: string; difference: { variant: string } | null } | null }[] };
    const flagged = summary.rows.find((r) => r.taskId === 'real__parse_hyphen_field')!;
    expect(flagged.status).toBe('flagged');
    expect(flagged.evidence!.diff).toMatch(/^diff --git a\/parse\.py/);
    expect(flagged.evidence!.difference!.variant).toMatch(/^replay::|#pytest$/);
  }, 480_000);
});
