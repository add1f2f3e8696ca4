import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../settings.js';
import type { Component, Health } from './types.js';
import { log, mustRun, run } from '../proc.js';

/** The Python environment of the reference engine and trainer (engine/setup.sh). */

const setupScript = path.join(repoRoot, 'engine', 'setup.sh');

export const python: Component = {
  name: 'python',
  async up(s) {
    if (!fs.existsSync(setupScript)) return;
    log('python', 'checking the engine environment (engine/setup.sh)…');
    mustRun('bash', [setupScript], 'engine/setup.sh', { env: { ...process.env, FLOE_HOME: s.home } });
  },
  async down() { /* nothing runs */ },
  async doctor(s): Promise<Health> {
    if (!fs.existsSync(setupScript)) return { ok: true, detail: 'no engine/ in this checkout' };
    const r = run(s.python.bin, ['-c', 'import torch, floe_engine; print(torch.__version__)']);
    return r.code === 0
      ? { ok: true, detail: `${s.python.bin} (torch ${r.stdout.trim()})` }
      : { ok: false, detail: `engine environment not importable: ${r.stderr.trim().split('\n').pop() ?? ''}`, fix: 'run `floe up` (creates .floe/venv)' };
  },
};

const harnessSetup = path.join(repoRoot, 'harness', 'setup.sh');

/** The grading harness's environment (harness/setup.sh: the official swebench package and
 *  floe_harness, apart from the engine's torch venv). */
export const harness: Component = {
  name: 'harness',
  async up(s) {
    log('harness', 'checking the grading harness environment (harness/setup.sh)…');
    mustRun('bash', [harnessSetup], 'harness/setup.sh', { env: { ...process.env, FLOE_HOME: s.home } });
  },
  async down() { /* nothing runs */ },
  async doctor(s): Promise<Health> {
    const r = run(s.harness.bin, ['-c', 'import floe_harness.grading.swebench_rules, swebench; print(swebench.__version__)']);
    return r.code === 0
      ? { ok: true, detail: `${s.harness.bin} (swebench ${r.stdout.trim()})` }
      : { ok: false, detail: `grading harness not importable: ${r.stderr.trim().split('\n').pop() ?? ''}`, fix: 'run `floe up` (creates .floe/harness-venv)' };
  },
};
