import type { SandboxActivities } from '../../activities/sandbox/index.js';
import type { createGradingActivities } from '../../activities/grading.js';
import type { ExecResult, GradeResult } from '../../core/sandboxPolicy.js';

/** TEST DOUBLE. The sandbox host's activities as the rollout and rewardGate workflows call them
 *  (activities/sandbox/index.ts createSandboxActivities: createSandbox, execInSandbox,
 *  takeDiffAndDestroy, destroySandbox; activities/grading.ts createGradingActivities:
 *  gradeSubmission), with no container: each call takes the configured time and answers with
 *  the shapes those files return (core/sandboxPolicy.ts ExecResult, GradeResult). A tool call
 *  echoes its command; grading passes. For measuring the control plane without podman
 *  (bench/scale.ts). Lives in test/ only. */

export interface SandboxDoubleTimes { createMs: number; toolMs: number; diffMs: number; gradeMs: number }

type Grading = ReturnType<typeof createGradingActivities>;
export type SandboxDoubleActivities = Pick<SandboxActivities, 'createSandbox' | 'execInSandbox' | 'takeDiffAndDestroy' | 'destroySandbox'> & Pick<Grading, 'gradeSubmission'>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createSandboxDouble(t: SandboxDoubleTimes): SandboxDoubleActivities & { calls: Record<string, number> } {
  const calls: Record<string, number> = {};
  const count = (k: string) => { calls[k] = (calls[k] ?? 0) + 1; };
  let seq = 0;
  return {
    calls,
    async createSandbox() {
      count('createSandbox');
      await sleep(t.createMs);
      return { containerId: `double-${++seq}` };
    },
    async execInSandbox(input) {
      count('execInSandbox');
      const started = Date.now();
      await sleep(t.toolMs);
      const output = `${input.command}\n`;
      const r: ExecResult = { exitCode: 0, output, outputBytes: Buffer.byteLength(output), truncated: false, timedOut: false, killedReason: null, durationMs: Date.now() - started };
      return r;
    },
    async takeDiffAndDestroy() {
      count('takeDiffAndDestroy');
      await sleep(t.diffMs);
      const diff = 'diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n';
      return { diff, bytes: diff.length, truncated: false };
    },
    async destroySandbox() {
      count('destroySandbox');
    },
    async gradeSubmission() {
      count('gradeSubmission');
      await sleep(t.gradeMs);
      const g: GradeResult = { passed: true, harness: 'pytest', tests: [{ id: 'test_x', group: 'FAIL_TO_PASS', outcome: 'passed' }], applyError: null, timedOut: false, durationMs: t.gradeMs, log: '1 passed' };
      return g;
    },
  };
}
