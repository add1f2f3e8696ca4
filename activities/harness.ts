import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { ApplicationFailure } from '@temporalio/common';
import type { Task } from '../core/taskModel.js';
import type { TestGroup, TestOutcome } from '../core/sandboxPolicy.js';

/** The bridge to floe_harness (harness/): the datasets' own evaluation rules, in Python, where
 *  the official swebench package lives. One short process per call: JSON in, JSON out. */

export interface HarnessPlan {
  /** 'swebench', 'r2e-gym' or 'pytest'. */
  harness: string;
  /** The bash script the grader runs in the task's container (as the agent). */
  script: string;
  /** The log parser that reads the script's output (the harness's name for it). */
  parser: string;
  testCommand: string;
}

export interface HarnessVerdict {
  /** Every test the parser saw, with its status as the harness names it (PASSED, FAILED, …). */
  statuses: Record<string, string>;
  tests: { id: string; group: TestGroup; outcome: TestOutcome }[];
  resolved: boolean;
  /** The log reached the harness's end marker (false: killed, timed out, or cut). */
  logComplete: boolean;
}

export class Harness {
  constructor(private readonly python: string) {}

  /** task.runTestsSh: R2E-Gym rows, the image's run_tests.sh (the grader reads it). */
  plan(req: { task: Task & { runTestsSh?: string }; baseCommit: string; repoDir: string; stageDir: string }): Promise<HarnessPlan> {
    return this.call<HarnessPlan>('plan', req);
  }

  parse(req: { task: Task; harness: string; log: string }): Promise<HarnessVerdict> {
    return this.call<HarnessVerdict>('parse', req);
  }

  private call<T>(cmd: 'plan' | 'parse', req: unknown): Promise<T> {
    if (!fs.existsSync(this.python)) {
      throw ApplicationFailure.nonRetryable(`the grading harness environment is missing (${this.python}); run \`floe up\` (harness/setup.sh installs the swebench package there)`, 'HarnessMissing');
    }
    return new Promise<T>((resolve, reject) => {
      const child = spawn(this.python, ['-m', 'floe_harness', cmd], { stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      let err = '';
      child.stdout.on('data', (b: Buffer) => out.push(b));
      child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
      child.on('error', (e) => reject(new Error(`floe_harness ${cmd} did not start (${this.python}): ${e.message}`)));
      child.on('close', (code) => {
        if (code !== 0) {
          reject(ApplicationFailure.nonRetryable(`floe_harness ${cmd} failed (exit ${code}): ${err.trim().split('\n').slice(-3).join(' | ')}`, 'HarnessFailed'));
          return;
        }
        try {
          resolve(JSON.parse(Buffer.concat(out).toString('utf8')) as T);
        } catch (e) {
          reject(new Error(`floe_harness ${cmd} printed no JSON (${(e as Error).message})`));
        }
      });
      child.stdin.end(JSON.stringify(req));
    });
  }
}
