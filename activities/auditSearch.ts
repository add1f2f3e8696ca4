import fs from 'node:fs';
import type Docker from 'dockerode';
import type { Task } from '../core/taskModel.js';
import { parseRunConfig } from '../core/config.js';
import { patchFiles, repoDirOf, type SandboxLimits } from '../core/sandboxPolicy.js';
import { behaviourDifference, discardReason, type BehaviourDifference, type BehaviourTrace } from '../core/dataAudit.js';

import { AGENT_USER, runScript } from './sandbox/exec.js';
import { removeContainer, startLockedContainer, unixNow } from './sandbox/containerSpec.js';
import { READ_FILES, decodeFiles, imageFor, prepareRepository } from './sandbox/repository.js';
import { preparedRepository } from './sandbox/prepared.js';
import { execCommand } from './sandbox/command.js';
import { heartbeat } from './sandbox/heartbeat.js';
import { stageDir, stageFile, tarArchive } from './sandbox/tar.js';
import { PYTEST_PLUGIN, STAGE } from './grading.js';
import { HarnessServer } from './harness.js';

/** The data audit's search for wrong patches that a task's tests accept, in one fresh locked
 *  container of the task's image (no network, the sandbox's limits), never one an agent used:
 *  the repository at base; the changed files read before and after the gold patch; candidates
 *  from floe_harness (audit/candidates.py: partial fixes, symbol-only fixes, mutations of the
 *  lines the gold patch wrote); each candidate applied to the base and graded by the task's own
 *  harness script (the same script and parser as a rollout's grading); for each that passes
 *  every test, a differential check (diffcheck.py) of its behaviour against the gold patch's on
 *  perturbed variants of the task's tests. The candidates are floe's own code, plus the fixes
 *  an auditor agent submitted (input.extra, when an engine is configured): they share the
 *  container, reset to the base between them. */

const DIFFCHECK = fs.readFileSync(new URL('../harness/floe_harness/audit/diffcheck.py', import.meta.url));
const MAX_TRACE_BYTES = 8 * 1024 * 1024;

/** Reset the repository to the base, apply $1 (when given) and the test patch. Exit 10: $1
 *  does not apply. */
const CHECKOUT = `set -u
cd "$FLOE_REPO"
git checkout -q -- . && git clean -fdq
if [ -n "\${1:-}" ] && [ -s "$1" ]; then git apply --whitespace=nowarn "$1" || exit 10; fi`;

export interface CandidateOutcome {
  id: string;
  kind: string;
  description: string;
  diff: string;
  /** The task's harness resolved it: every FAIL_TO_PASS and PASS_TO_PASS test passed. */
  testsPassed: boolean;
  /** Tests that did not pass (the first few), when testsPassed is false. */
  failing: string[];
  /** For a candidate that passed: the first variant of a test on which it behaves differently
   *  from the gold patch (null: none seen — an equivalent change, or one the variants miss). */
  difference: BehaviourDifference | null;
  /** For a candidate that passed every test and showed no difference: why it was discarded
   *  (core/dataAudit.ts discardReason: equivalent on every observed call, or no call observed). */
  discarded?: string | null;
}

/** Stronger tests for a task that accepts a wrong patch: its test patch with a new file of
 *  checks, and FAIL_TO_PASS with their ids (null testPatch: none kept, and why). */
export interface Strengthened { testPatch: string | null; failToPass: string[]; checks: number; reason: string | null }

export interface SearchResult { candidates: number; outcomes: CandidateOutcome[]; traceVariants: number; note: string | null; strengthened: Strengthened | null }

/** A candidate from elsewhere (the auditor agent's fix): graded and checked like floe's own. */
export interface ExtraCandidate { id: string; kind: string; description: string; diff: string }

export interface SearchInput { task: Task; limits?: SandboxLimits; timeoutSeconds?: number; maxCandidates?: number; labels?: Record<string, string>; extra?: ExtraCandidate[] }


/** Python files of the gold patch, outside the tests. */
export function auditTargets(task: Pick<Task, 'patch' | 'testPatch'>): string[] {
  const tests = new Set(patchFiles(task.testPatch).map((f) => f.path));
  return patchFiles(task.patch).filter((f) => !f.isDeleted && f.path.endsWith('.py') && !tests.has(f.path)).map((f) => f.path);
}

/** The test files the differential check runs: those FAIL_TO_PASS and PASS_TO_PASS ids name
 *  (the pytest form, `path::name`) and the Python files the test patch writes (ids of other
 *  forms, as django's and sympy's, do not name their file). */
export function auditTestFiles(task: Pick<Task, 'failToPass' | 'passToPass' | 'testPatch'>): string[] {
  const named = [...task.failToPass, ...task.passToPass].filter((id) => id.includes('::')).map((id) => id.split('::')[0]);
  const patched = patchFiles(task.testPatch).filter((f) => !f.isDeleted && f.path.endsWith('.py')).map((f) => f.path);
  return [...new Set([...named, ...patched])].sort();
}

export async function searchWrongPatches(docker: Docker, opts: { image: string; host: string; workerId: string; harnessPython: string }, input: SearchInput): Promise<SearchResult> {
  const { task } = input;
  const defaults = parseRunConfig({}).sandbox;
  const limits = input.limits ?? defaults;
  const timeoutSeconds = input.timeoutSeconds ?? defaults.gradeTimeoutSeconds;
  const repoDir = repoDirOf(task.source);
  const harness = HarnessServer.for(opts.harnessPython);
  const targets = auditTargets(task);
  const testFiles = auditTestFiles(task);
  // a directory source's repository with its fresh history comes in with the mount roots (made
  // once per task on this host: sandbox/prepared.ts); an image's is copied and committed inside
  const prepared = await preparedRepository(task);
  const c = await startLockedContainer(docker, {
    image: imageFor(task, opts.image), limits, repoDir,
    labels: { 'floe.sandbox': '1', 'floe.role': 'auditor', 'floe.task': task.instanceId, 'floe.host': opts.host, 'floe.worker': opts.workerId, 'floe.created': String(unixNow()), ...input.labels },
    ...(prepared ? { content: { '/work': prepared.work } } : {}),
  });
  try {
    const baseCommit = prepared ? prepared.baseCommit : (await prepareRepository(docker, c, task, { seal: false })).baseCommit;
    const plan = await harness.plan({ task, baseCommit, repoDir, stageDir: STAGE });
    await c.putArchive(tarArchive([
      stageDir(),
      stageDir('cands/'),
      stageFile('gold.diff', task.patch), stageFile('test.diff', task.testPatch), stageFile('floe_pytest_report.py', PYTEST_PLUGIN),
      stageFile('eval.sh', plan.script, 0o755), stageFile('checkout.sh', CHECKOUT, 0o755), stageFile('diffcheck.py', DIFFCHECK),
    ]), { path: '/tmp' });
    heartbeat('auditor ready');

    // the changed files before and after the gold patch
    const changed = patchFiles(task.patch).filter((f) => !f.isDeleted).map((f) => f.path);
    const base = decodeFiles(await runScript(docker, c, AGENT_USER, READ_FILES, [repoDir, ...changed], { what: 'reading the files the gold patch changes' }));
    const gold = decodeFiles(await runScript(docker, c, AGENT_USER, `FLOE_REPO="$1" bash ${STAGE}/checkout.sh ${STAGE}/gold.diff && ${READ_FILES}`, [repoDir, ...changed], { what: 'applying the gold patch' }));
    const files = Object.fromEntries(changed.filter((p) => gold[p] !== undefined).map((p) => [p, { base: base[p] ?? null, gold: gold[p] }]));
    const own = await harness.candidates({ files, limit: input.maxCandidates ?? 200 });
    // the auditor agent's fixes first: the most plausible wrong patches there are
    const candidates = [...(input.extra ?? []), ...own.candidates];
    const seeds = own.seeds;
    // the FAIL_TO_PASS tests in pytest's form: the differential check replays their calls first
    const focus = task.failToPass.filter((id) => id.includes('::'));
    await c.putArchive(tarArchive([...candidates.map((k) => stageFile(`cands/${k.id}.diff`, k.diff)), stageFile('seeds.json', JSON.stringify(seeds)), stageFile('focus.json', JSON.stringify(focus)), stageFile('deep.json', JSON.stringify(own.changed ?? {})), stageFile('siblings.json', JSON.stringify(own.siblings ?? {}))]), { path: '/tmp' });

    const run = (command: string, maxOutputBytes = 1024 * 1024) =>
      execCommand(docker, c, { command: `export FLOE_REPO='${repoDir}'; ${command}`, repoDir, timeoutSeconds, maxOutputBytes }, 'tail');
    /** One traced run of the tests on ``diff``, under a fixed string-hash seed: the two gold runs
     *  take different seeds, so a call whose result depends on set or dict-of-str order is seen to
     *  vary and is not compared; every candidate runs under the first gold run's seed. */
    const trace = async (diff: string, hashSeed = 0): Promise<BehaviourTrace | null> => {
      if (!targets.length || !testFiles.length) return null;
      const r = await run(`bash ${STAGE}/checkout.sh ${diff} && git apply --whitespace=nowarn ${STAGE}/test.diff && PYTHONHASHSEED=${hashSeed} python3 ${STAGE}/diffcheck.py . --targets '${targets.join(',')}' --tests '${testFiles.join(',')}' --seeds "$(cat ${STAGE}/seeds.json)" --focus "$(cat ${STAGE}/focus.json)" --deep "$(cat ${STAGE}/deep.json)" --siblings "$(cat ${STAGE}/siblings.json)"`, MAX_TRACE_BYTES);
      const line = r.output.trim().split('\n').pop() ?? '';
      try { return JSON.parse(line) as BehaviourTrace; } catch { return null; }
    };

    /** Stronger tests (floe_harness/audit/strengthen.py), kept only when, run here by the task's own
     *  harness, they pass on the gold patch and fail on every wrong patch found. */
    const strengthen = async (gold: [BehaviourTrace, BehaviourTrace], wrong: CandidateOutcome[]): Promise<Strengthened> => {
      // the swebench and R2E-Gym harnesses run the dataset's own test command, which does not
      // run a new test file: only tasks graded by floe's pytest runner can take one
      if (plan.harness !== 'pytest') return { testPatch: null, failToPass: [], checks: 0, reason: `the ${plan.harness} harness runs the dataset's own test command, which would not run a new test file` };
      const s = await harness.strengthen({ gold1: gold[0], gold2: gold[1], testPatch: task.testPatch, first: wrong.map((w) => w.difference!.variant) });
      if (!s.testPatch || !s.tests) return { testPatch: null, failToPass: [], checks: 0, reason: s.reason ?? 'no tests written' };
      const stronger: Task = { ...task, testPatch: s.testPatch, failToPass: [...task.failToPass, ...s.tests] };
      const plan2 = await harness.plan({ task: stronger, baseCommit, repoDir, stageDir: STAGE });
      await c.putArchive(tarArchive([stageFile('test.diff', s.testPatch), stageFile('eval.sh', plan2.script, 0o755)]), { path: '/tmp' });
      const passes = async (diff: string) => {
        const r = await run(`bash ${STAGE}/checkout.sh ${diff} || exit 10; bash ${STAGE}/eval.sh`);
        const v = await harness.parse({ task: stronger, harness: plan2.harness, log: r.output });
        return v.resolved && !r.timedOut;
      };
      const reject = (reason: string): Strengthened => ({ testPatch: null, failToPass: [], checks: 0, reason });
      if (!(await passes(`${STAGE}/gold.diff`))) return reject('the stronger tests did not pass on the gold patch');
      for (const w of wrong) {
        if (await passes(`${STAGE}/cands/${w.id}.diff`)) return reject(`the stronger tests still accept ${w.id} (${w.description})`);
      }
      return { testPatch: s.testPatch, failToPass: stronger.failToPass, checks: s.checks ?? 0, reason: null };
    };

    const untraced = !targets.length ? 'the gold patch changes no Python file outside the tests'
      : !testFiles.length ? 'no test file is known (no path::name ids, no Python file in the test patch)' : null;
    const outcomes: CandidateOutcome[] = [];
    let goldTraces: [BehaviourTrace, BehaviourTrace] | null | undefined;
    for (const [i, k] of candidates.entries()) {
      const r = await run(`bash ${STAGE}/checkout.sh ${STAGE}/cands/${k.id}.diff || exit 10; bash ${STAGE}/eval.sh`);
      const verdict = r.exitCode === 10 && !r.output.includes('>>>>>') ? null : await harness.parse({ task, harness: plan.harness, log: r.output });
      const testsPassed = !!verdict && verdict.resolved && !r.timedOut;
      let difference: BehaviourDifference | null = null;
      if (testsPassed) {
        if (goldTraces === undefined) {
          const g1 = await trace(`${STAGE}/gold.diff`);
          const g2 = g1 && await trace(`${STAGE}/gold.diff`, 1);
          goldTraces = g1 && g2 ? [g1, g2] : null;
        }
        const t = goldTraces && await trace(`${STAGE}/cands/${k.id}.diff`);
        difference = goldTraces && t ? behaviourDifference(goldTraces[0], goldTraces[1], t) : null;
      }
      const failing = verdict ? verdict.tests.filter((t) => t.outcome !== 'passed').slice(0, 5).map((t) => `${t.id} (${t.outcome})`) : ['(the candidate did not apply)'];
      const discarded = testsPassed && !difference ? discardReason(goldTraces ?? null, untraced) : null;
      outcomes.push({ ...k, testsPassed, failing: testsPassed ? [] : failing, difference, discarded });
      heartbeat({ candidate: i + 1, of: candidates.length, wrong: outcomes.filter((o) => o.difference).length });
    }
    const wrong = outcomes.filter((o) => o.difference !== null);
    const strengthened = wrong.length && goldTraces ? await strengthen(goldTraces, wrong) : null;
    const traceVariants = goldTraces ? Object.keys(goldTraces[0].variants).length : 0;
    const note = !targets.length ? 'the gold patch changes no Python file outside the tests: no differential check'
      : !testFiles.length ? 'no test file is known (no path::name ids, no Python file in the test patch): no differential check'
        : goldTraces === null ? 'the gold patch could not be traced (diffcheck.py printed no result)' : null;
    return { candidates: candidates.length, outcomes, traceVariants, note, strengthened };
  } finally {
    await removeContainer(c);
  }
}

export function createAuditSearchActivities(docker: Docker, opts: { image: string; host: string; workerId: string; harnessPython: string }) {
  return {
    async searchWrongPatches(input: SearchInput): Promise<SearchResult> {
      return searchWrongPatches(docker, opts, input);
    },
  };
}

export type AuditSearchActivities = ReturnType<typeof createAuditSearchActivities>;
