import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

interface ToyResult {
  id: string;
  ok: boolean;
  reason: string;
  loose: boolean | null;
  bug_class: string | null;
  solution_steps: number | null;
}

interface ToySummary {
  tasks: number;
  passed: number;
  failed: number;
  loose: number;
  sound: number;
  multi_step: number;
  bug_classes: Record<string, number>;
  seconds: number;
  results: ToyResult[];
}

// The validator runs pytest three times per task (base, gold, wrong patch): slow-ish, not flaky.
describe('toy task suite', () => {
  it('every toy task validates (base fails, gold passes, solution = gold, wrong patch audited)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-toy-'));
    const out = join(dir, 'summary.json');
    let status = 0;
    let output = '';
    try {
      try {
        output = execFileSync('python3', ['tasks/toy/validate.py', '--json', out], {
          cwd: root,
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
          maxBuffer: 16 * 1024 * 1024,
        });
      } catch (err) {
        const e = err as { status?: number | null; stdout?: string; stderr?: string };
        status = e.status ?? -1;
        output = `${e.stdout ?? ''}${e.stderr ?? ''}`;
      }
      const failures = output.split('\n').filter((line) => line.startsWith('FAIL'));
      expect(failures, output.slice(-4000)).toEqual([]);
      expect(status, output.slice(-4000)).toBe(0);

      const summary = JSON.parse(readFileSync(out, 'utf8')) as ToySummary;
      expect(summary.tasks).toBeGreaterThanOrEqual(44);
      expect(summary.loose).toBeGreaterThanOrEqual(12);
      expect(summary.sound).toBeGreaterThanOrEqual(30);
      expect(summary.multi_step).toBeGreaterThanOrEqual(4);
      expect(summary.failed).toBe(0);
      expect(summary.results.filter((r) => !r.ok).map((r) => `${r.id}: ${r.reason}`)).toEqual([]);
      expect(summary.results.every((r) => r.ok)).toBe(true);
      expect(Object.keys(summary.bug_classes).length).toBeGreaterThanOrEqual(8);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
