import { blindTask } from './dataAudit.js';
import { patchFiles } from './sandboxPolicy.js';
import type { Task } from './taskModel.js';

/** The data audit's auditor agent (workflows/dataAudit.ts runs it when an engine is
 *  configured): a rollout, on an engine, of a task whose issue is a brief asking for a plausible
 *  *wrong* fix. The brief gives the issue, the gold patch and the tests; the agent has the shell
 *  of an ordinary locked sandbox at the base commit. What it leaves in the repository, less any
 *  test file, is one more candidate for the same grading and differential check as floe's own
 *  (activities/auditSearch.ts): an agent's word that its fix is wrong is not evidence. */

/** The auditor's task id for a task: its own row in `tasks`, its rollouts in `rollouts`. */
export function auditorTaskId(taskId: string): string {
  return `${taskId}@auditor`;
}

/** The task an auditor rollout works on: the row blind to its labels, with the brief as its issue. */
export function auditorTask(task: Task): Task {
  const blind = blindTask(task);
  return { ...blind, instanceId: auditorTaskId(task.instanceId), problemStatement: auditorBrief(task), hintsText: '' };
}

export function auditorBrief(task: Pick<Task, 'problemStatement' | 'patch' | 'testPatch' | 'failToPass' | 'passToPass'>): string {
  const tests = patchFiles(task.testPatch).filter((f) => !f.isDeleted).map((f) => f.path);
  return [
    'You are auditing a training task for coding agents. Its tests decide the reward, and a task is only useful when they reject every wrong fix.',
    'Write a plausible WRONG fix: a change a hurried developer might make for the issue below, which does not do what the correct fix does on some input (a special case, a partial fix, an alias or stub, an off-by-one), yet passes all of the tests below.',
    'Do not copy the correct fix. To run the tests, apply the test patch (git apply) and run them; before you submit, remove the test files again (' + (tests.join(', ') || 'those the test patch writes') + '): floe grades your change with the tests itself.',
    'When your wrong fix passes the tests, submit. If you find no wrong fix that passes them, submit with the repository unchanged.',
    '',
    '## The issue',
    task.problemStatement.trim(),
    '',
    '## The correct fix (do not submit this)',
    '```diff',
    task.patch.trimEnd(),
    '```',
    '',
    '## The tests (a patch that adds them)',
    '```diff',
    task.testPatch.trimEnd(),
    '```',
    '',
    `Tests that must pass: ${[...task.failToPass, ...task.passToPass].join(', ') || '(none listed)'}`,
  ].join('\n');
}

/** The agent's change as a candidate: its diff without the files the test patch writes (the
 *  agent may have left the tests in; the grader applies them itself). '' when nothing is left. */
export function agentCandidateDiff(diff: string, testPatch: string): string {
  const tests = new Set(patchFiles(testPatch).map((f) => f.path));
  const sections = diff.split(/^(?=diff --git )/m).filter((s) => s.startsWith('diff --git '));
  const kept = sections.filter((s) => !patchFiles(s).some((f) => tests.has(f.path)));
  return kept.join('');
}
