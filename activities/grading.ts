import type Docker from 'dockerode';
import type { Task } from '../core/taskModel.js';
import { parseRunConfig } from '../core/config.js';
import {
  parsePytestOutcomes, patchFiles, tailText, testFiles,
  type GradeResult, type SandboxLimits, type TestGroup,
} from '../core/sandboxPolicy.js';
import {
  AGENT_ENV, AGENT_USER, REPO_DIR, assertSupportedSource, execRaw, heartbeat, imageFor, killAgentProcesses,
  prepareRepository, removeContainer, startLockedContainer, tarArchive, unixNow,
} from './containers.js';
import { execCommand } from './sandbox.js';

/** Grading: the hidden tests run in a fresh container (never the agent's), on a clean checkout
 *  of the task at base with the agent's diff applied, then the test patch applied over it so
 *  that the agent's versions of test files never count. */

export interface GradingOptions { host: string; image: string; workerId: string }

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

const STAGE = '/tmp/floe-grade';
const LOG_CHARS = 64 * 1024;
const PYTEST_TAIL_BYTES = 1024 * 1024;

/** Apply the agent's diff (git apply, else patch -p1 after a dry run: never half-applied), then
 *  put back the base version of every test file that counts — those the test patch touches and
 *  those the test ids name — and apply the test patch. Exit 10: the agent's diff does not apply;
 *  11: the test patch does not. */
const APPLY = `set -u
cd ${REPO_DIR}
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
fi
for f in "$@"; do
  if git cat-file -e "HEAD:$f" 2>/dev/null; then
    git checkout -q HEAD -- "$f" 2>$d/restore.log || { echo "restoring $f: $(cat $d/restore.log)"; exit 11; }
  else
    rm -rf -- "$f"
  fi
done
if git apply --whitespace=nowarn $d/test.diff > $d/test-apply.log 2>&1; then
  echo "test patch: applied"
else
  echo "test patch: $(cat $d/test-apply.log)"
  exit 11
fi`;

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function allTests(task: Task): { id: string; group: TestGroup }[] {
  return [
    ...task.failToPass.map((id) => ({ id, group: 'FAIL_TO_PASS' as const })),
    ...task.passToPass.map((id) => ({ id, group: 'PASS_TO_PASS' as const })),
  ];
}

/** Grade a diff against a task's hidden tests. Used by rewardGate (gradeSubmission) and by the
 *  data audit (gold / wrong patches). The grader container is always removed. */
export async function gradePatch(docker: Docker, opts: GradingOptions, input: GradePatchInput): Promise<GradeResult> {
  const started = Date.now();
  const defaults = parseRunConfig({}).sandbox;
  const limits = input.limits ?? defaults;
  const timeoutSeconds = input.timeoutSeconds ?? defaults.gradeTimeoutSeconds;
  const { task } = input;
  assertSupportedSource(task);
  const tests = allTests(task);
  const missing = () => tests.map((t) => ({ ...t, outcome: 'missing' as const }));
  const c = await startLockedContainer(docker, {
    image: imageFor(task, opts.image),
    limits,
    hideTestbed: task.source.kind === 'image',
    labels: {
      'floe.sandbox': '1', 'floe.role': 'grader', 'floe.task': task.instanceId, 'floe.host': opts.host,
      'floe.worker': opts.workerId, 'floe.created': String(unixNow()), ...input.labels,
    },
  });
  try {
    await prepareRepository(docker, c, task);
    heartbeat('grader ready');
    const stage = tarArchive([
      { name: 'floe-grade/', type: 'dir', mode: 0o755, uid: 1000, gid: 1000 },
      { name: 'floe-grade/agent.diff', type: 'file', mode: 0o644, uid: 1000, gid: 1000, data: Buffer.from(input.diff, 'utf8') },
      { name: 'floe-grade/test.diff', type: 'file', mode: 0o644, uid: 1000, gid: 1000, data: Buffer.from(task.testPatch, 'utf8') },
    ]);
    await c.putArchive(stage, { path: '/tmp' });

    const ids = tests.map((t) => t.id);
    const restore = [...new Set([...patchFiles(task.testPatch).map((f) => f.path), ...testFiles(ids)])];
    const apply = await execRaw(docker, c, {
      cmd: ['bash', '-c', APPLY, 'floe', ...restore], user: AGENT_USER, env: AGENT_ENV,
      deadlineMs: 120_000, maxStdoutBytes: LOG_CHARS, onKill: () => killAgentProcesses(docker, c),
    });
    const applyLog = apply.stdout.toString('utf8') + apply.stderr;
    if (apply.exitCode !== 0) {
      const what = apply.exitCode === 10 ? 'the diff does not apply' : apply.exitCode === 11 ? 'the test patch does not apply over the diff' : `applying failed (exit ${apply.exitCode})`;
      return { passed: false, tests: missing(), applyError: `${what}: ${applyLog.trim().slice(-4000)}`, timedOut: false, durationMs: Date.now() - started, log: tailText(applyLog, LOG_CHARS) };
    }

    const files = testFiles(ids);
    const command = `python3 -m pytest -rA -p no:cacheprovider --continue-on-collection-errors --tb=short ${files.map(shellQuote).join(' ')}`;
    const run = await execCommand(docker, c, { command, timeoutSeconds, maxOutputBytes: PYTEST_TAIL_BYTES }, 'tail');
    const outcomes = parsePytestOutcomes(run.output, ids);
    const graded = tests.map((t) => ({ ...t, outcome: run.timedOut ? (outcomes[t.id] === 'passed' ? 'passed' : 'missing') : outcomes[t.id] }));
    const note = run.killedReason ? `\n[floe: pytest killed: ${run.killedReason}${run.timedOut ? `, no result within ${timeoutSeconds} s` : ''}]` : '';
    return {
      passed: !run.timedOut && graded.length > 0 && graded.every((t) => t.outcome === 'passed'),
      tests: graded,
      applyError: null,
      timedOut: run.timedOut,
      durationMs: Date.now() - started,
      log: tailText(`${applyLog}\n${run.output}${note}`, LOG_CHARS),
    };
  } finally {
    await removeContainer(c);
  }
}

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
