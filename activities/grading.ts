import crypto from 'node:crypto';
import fs from 'node:fs';
import { ApplicationFailure } from '@temporalio/common';
import type Docker from 'dockerode';
import type { Task } from '../core/taskModel.js';
import { parseRunConfig } from '../core/config.js';
import { repoDirOf, tailText, type ExecResult, type GradeResult, type SandboxLimits } from '../core/sandboxPolicy.js';
import { removeContainer, startLockedContainer, unixNow, type ContainerSpec } from './sandbox/containerSpec.js';
import { imageFor, prepareRepository } from './sandbox/repository.js';
import { preparedRepository } from './sandbox/prepared.js';
import { graderOnlyRepoFiles } from '../core/taskLayouts.js';
import { commandAsFirstProcess, execCommand } from './sandbox/command.js';
import { heartbeat } from './sandbox/heartbeat.js';
import { stageDir, stageFile, tarArchive } from './sandbox/tar.js';
import { HarnessServer, type HarnessPlan } from './harness.js';

/** Grading: the hidden tests run in a fresh container of the task's image (never the agent's),
 *  on the task's repository at base with the agent's diff applied, by the task's own harness
 *  (floe_harness: the swebench package's eval script and log parser for SWE-bench-family rows
 *  it covers, R2E-Gym's rules for R2E-Gym rows, floe's pytest plugin runner otherwise). The
 *  harness's script applies the test patch over the diff, so the agent's versions of the test
 *  files it touches never count. */

export interface GradingOptions { host: string; image: string; workerId: string; harnessPython: string }

export interface GradePatchInput {
  task: Task;
  diff: string;
  /** Default: the run config's sandbox defaults. */
  limits?: SandboxLimits;
  /** Wall-clock limit of the test run. Default: the run config's gradeTimeoutSeconds. */
  timeoutSeconds?: number;
  /** Extra labels of the grader container (run, rollout, purpose). */
  labels?: Record<string, string>;
}

/** Where a grader's staged files are (the data audit's container too). */
export const STAGE = '/tmp/floe-grade';
const LOG_CHARS = 64 * 1024;
const TEST_LOG_TAIL_BYTES = 1024 * 1024;
export const PYTEST_PLUGIN = fs.readFileSync(new URL('../harness/floe_harness/grading/floe_pytest_report.py', import.meta.url));

/** Apply the agent's diff in the repository ($1): git apply, else patch -p1 after a dry run
 *  (never half-applied). Exit 10: it does not apply. */
const APPLY = `set -u
cd "$1"
d=${STAGE}
if [ -s $d/agent.diff ]; then
  if git apply --whitespace=nowarn $d/agent.diff > $d/git-apply.log 2>&1; then
    echo "agent diff: applied with git apply"
  elif patch -p1 --batch --forward --dry-run --no-backup-if-mismatch -i $d/agent.diff > $d/patch.log 2>&1 \\
       && patch -p1 --batch --forward --no-backup-if-mismatch -i $d/agent.diff > $d/patch.log 2>&1; then
    echo "agent diff: applied with patch -p1 (git apply refused it: $(tr '\\n' ' ' < $d/git-apply.log))"
  else
    echo "git apply: $(cat $d/git-apply.log)"
    echo "patch -p1: $(cat $d/patch.log)"
    exit 10
  fi
else
  echo "agent diff: empty"
fi`;

/** Grade a diff against a task's hidden tests, in a fresh container of the task's image: used by
 *  rewardGate (gradeSubmission) and by the data audit (gold / wrong patches). The repository (a
 *  directory source's fresh history made once per task on this host: sandbox/prepared.ts) and
 *  the staged files go in by putArchive with the container's mount roots, and the test run is
 *  the container's own first process (commandAsFirstProcess); an image source's repository is
 *  extracted and committed in one exec (R2E-Gym's run_tests.sh read in the same exec, before
 *  the fresh history removes it), and the test run is another. The test run applies the agent's
 *  diff (APPLY) and, when it applied, runs the harness's script: a per-grading nonce marks where
 *  the apply log ends, so nothing the tests print can pass for it. The harness is the worker's
 *  long-lived process, and plans are cached per task and base commit. The grader gets no sealed
 *  copy (nothing diffs in it) and is always removed. */
export async function gradePatch(docker: Docker, opts: GradingOptions, input: GradePatchInput): Promise<GradeResult> {
  const started = Date.now();
  const defaults = parseRunConfig({}).sandbox;
  const limits = input.limits ?? defaults;
  const timeoutSeconds = input.timeoutSeconds ?? defaults.gradeTimeoutSeconds;
  const { task } = input;
  const harness = HarnessServer.for(opts.harnessPython);
  const repoDir = repoDirOf(task.source);
  const missing = () => [
    ...task.failToPass.map((id) => ({ id, group: 'FAIL_TO_PASS' as const, outcome: 'missing' as const })),
    ...task.passToPass.map((id) => ({ id, group: 'PASS_TO_PASS' as const, outcome: 'missing' as const })),
  ];
  const nonce = crypto.randomBytes(12).toString('hex');
  const marker = `>>>>> floe apply ${nonce}`;
  const grade = `bash ${STAGE}/apply.sh '${repoDir}' > ${STAGE}/apply.out 2>&1
rc=$?
cat ${STAGE}/apply.out
echo "${marker} $rc"
[ "$rc" = 0 ] || exit 10
exec bash ${STAGE}/eval.sh`;
  const stage = (plan: HarnessPlan) => {
    return tarArchive([
      stageDir(),
      stageFile('agent.diff', input.diff),
      stageFile('test.diff', task.testPatch),
      stageFile('floe_pytest_report.py', PYTEST_PLUGIN),
      stageFile('eval.sh', plan.script, 0o755),
      stageFile('apply.sh', APPLY, 0o755),
      stageFile('grade.sh', grade, 0o755),
    ]);
  };
  const planFor = (baseCommit: string, runTestsSh?: string) => harness.plan({ task: runTestsSh === undefined ? task : { ...task, runTestsSh }, baseCommit, repoDir, stageDir: STAGE });
  // R2E-Gym's tests are run by the image's run_tests.sh, which the agent never sees: read in
  // the container before the fresh history removes it
  const read = graderOnlyRepoFiles(task.layout).filter((f) => f === 'run_tests.sh');
  const prepared = read.length ? null : await preparedRepository(task);
  const early = prepared ? await planFor(prepared.baseCommit) : null;
  const command = { command: `bash ${STAGE}/grade.sh`, repoDir, timeoutSeconds, maxOutputBytes: TEST_LOG_TAIL_BYTES };
  let run: ExecResult;
  let plan: HarnessPlan;
  if (prepared && early) {
    // everything is known before the container starts: the test run is its first process
    plan = early;
    run = await commandAsFirstProcess(docker, graderSpec(opts, input, limits, repoDir, { '/work': prepared.work, '/tmp': stage(early) }), command, 'tail');
  } else {
    const c = await startLockedContainer(docker, graderSpec(opts, input, limits, repoDir));
    try {
      const inside = await prepareRepository(docker, c, task, { seal: false, read });
      if (read.length && !inside.files['run_tests.sh']) throw ApplicationFailure.nonRetryable(`task image ${imageFor(task, opts.image)} has no /testbed/run_tests.sh, which R2E-Gym's grading runs: rebuild the image as R2E-Gym publishes it`, 'ImageIncomplete');
      plan = await planFor(inside.baseCommit, inside.files['run_tests.sh']);
      await c.putArchive(stage(plan), { path: '/tmp' });
      heartbeat('grader ready');
      run = await execCommand(docker, c, command, 'tail');
    } finally {
      await removeContainer(c);
    }
  }
  // the apply log, then the marker line with APPLY's exit code, then the script's output
  const at = run.output.indexOf(`${marker} `);
  const eol = at < 0 ? -1 : run.output.indexOf('\n', at);
  const applyRc = at < 0 ? null : Number(run.output.slice(at + marker.length + 1, eol < 0 ? undefined : eol));
  const applyLog = at < 0 ? '' : run.output.slice(0, at);
  const output = at < 0 ? run.output : run.output.slice(eol < 0 ? run.output.length : eol + 1);
  const failed = (applyError: string, log: string): GradeResult => ({
    passed: false, harness: plan.harness, tests: missing(), applyError, timedOut: false, durationMs: Date.now() - started, log: tailText(log, LOG_CHARS),
  });
  if (applyRc !== null && applyRc !== 0) {
    const what = applyRc === 10 ? 'the diff does not apply' : `applying failed (exit ${applyRc})`;
    return failed(`${what}: ${applyLog.trim().slice(-4000)}`, applyLog);
  }
  if (applyRc === null && !run.timedOut && run.exitCode === 10 && !run.output.includes(TESTS_MARKER)) {
    return failed(`applying failed (no result from the apply step): ${run.output.trim().slice(-4000)}`, run.output);
  }
  const log = `${applyLog}\n${output}`;
  if (plan.harness === 'pytest' && run.exitCode === 11) return failed(`the test patch does not apply over the diff: ${output.trim().slice(-4000)}`, log);
  if (plan.harness === 'r2e-gym' && run.exitCode === 12) return failed(`the image lacks what R2E-Gym's test run needs: ${output.trim().slice(-2000)}`, log);
  return graded(harness.parse({ task, harness: plan.harness, log: output }), plan, run, log, timeoutSeconds, started);
}

/** A fresh, locked grader container of the task's image, labelled for the reaper (`content`:
 *  archives put in with the mount roots). */
function graderSpec(opts: GradingOptions, input: GradePatchInput, limits: SandboxLimits, repoDir: string, content?: Record<string, Buffer>): ContainerSpec {
  return {
    image: imageFor(input.task, opts.image),
    limits,
    repoDir,
    labels: {
      'floe.sandbox': '1', 'floe.role': 'grader', 'floe.task': input.task.instanceId, 'floe.host': opts.host,
      'floe.worker': opts.workerId, 'floe.created': String(unixNow()), ...input.labels,
    },
    ...(content ? { content } : {}),
  };
}

/** The grade of a test run that reached the harness's parser. */
async function graded(parsed: Promise<{ resolved: boolean; tests: GradeResult['tests'] }>, plan: HarnessPlan, run: { timedOut: boolean; killedReason?: string | null }, log: string, timeoutSeconds: number, started: number): Promise<GradeResult> {
  const verdict = await parsed;
  const note = run.killedReason ? `\n[floe: tests killed: ${run.killedReason}${run.timedOut ? `, no result within ${timeoutSeconds} s` : ''}]` : '';
  return {
    passed: verdict.resolved && !run.timedOut,
    harness: plan.harness,
    tests: verdict.tests,
    applyError: null,
    timedOut: run.timedOut,
    durationMs: Date.now() - started,
    log: tailText(`${log}${note}`, LOG_CHARS),
  };
}

/** What every harness script prints before its tests (pytest_runner, swebench's eval script). */
const TESTS_MARKER = '>>>>> Start Test Output';

export function createGradingActivities(docker: Docker, opts: GradingOptions) {
  return {
    async gradeSubmission(input: { runId: string; rolloutId: string; task: Task; diff: string; limits: SandboxLimits; timeoutSeconds: number }): Promise<GradeResult> {
      return gradePatch(docker, opts, {
        task: input.task, diff: input.diff, limits: input.limits, timeoutSeconds: input.timeoutSeconds,
        labels: { 'floe.run': input.runId, 'floe.rollout': input.rolloutId },
      });
    },

    /** The same grading without a rollout (data audit: gold and wrong patches). */
    async gradePatch(input: GradePatchInput & { purpose?: string }): Promise<GradeResult> {
      return gradePatch(docker, opts, { ...input, labels: { 'floe.purpose': input.purpose ?? 'audit', ...input.labels } });
    },
  };
}

export type GradingActivities = ReturnType<typeof createGradingActivities>;
