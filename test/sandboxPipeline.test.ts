import { afterAll, describe, expect, it } from 'vitest';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { loadSettings } from '../infra/settings.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { Task } from '../core/taskModel.js';
import type { GradeResult, SandboxLimits } from '../core/sandboxPolicy.js';
import { createGradingActivities } from '../activities/grading.js';
import { REPO_LABEL, createSandboxActivities, workerIdentity } from '../activities/sandbox/index.js';
import { ROOT_USER, execRaw } from '../activities/sandbox/exec.js';
import { removeContainer, startLockedContainer, unixNow } from '../activities/sandbox/containerSpec.js';
import { prepareRepository } from '../activities/sandbox/repository.js';
import { HarnessServer } from '../activities/harness.js';
import { runKeeperJob } from '../activities/sandbox/keeper.js';
import { repoDirOf } from '../core/sandboxPolicy.js';

/** The sandbox pipeline's shortcuts on real podman, each against the long way that gives the
 *  same answer: a directory source's repository put in by archive (the same repository,
 *  history, seal and owners as one prepared inside the container, the way image sources are);
 *  the diff taken by the keeper without an exec (the same diff as the agent's check and root's
 *  diff, the path taken where root cannot tell); the grader's test run as its first process;
 *  the diff taken as the sandbox is removed; the long-lived harness process restarting after it
 *  dies. */

const settings = loadSettings();
const docker = dockerFromSettings(settings);
const RUN = `test-pipeline-${process.pid}-${Date.now()}`;
const base = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity(), harnessPython: settings.harness.bin };
const acts = { ...createSandboxActivities(docker, base), ...createGradingActivities(docker, base) };
const limits: SandboxLimits = { cpus: 1, memoryMb: 128, pidsLimit: 64, diskMb: 64, commandTimeoutSeconds: 10, maxOutputBytes: 64 * 1024 };
const tasks = loadToySuite({ onBadRow: 'fail' }).tasks;
const pick = (id: string): Task => tasks.find((t) => t.instanceId === id)!;
const created: string[] = [];
let n = 0;

async function create(): Promise<string> {
  const { containerId } = await acts.createSandbox({ runId: RUN, rolloutId: `${RUN}-${n++}`, task: current, limits });
  created.push(containerId);
  return containerId;
}

/** A sandbox of the current task whose repository is prepared inside the container (the way of
 *  image sources), where createSandbox puts a directory source's in by archive. */
async function createPreparedInside(): Promise<string> {
  const repoDir = repoDirOf(current.source);
  const c = await startLockedContainer(docker, { image: base.image, limits, repoDir, labels: { 'floe.sandbox': '1', 'floe.role': 'agent', 'floe.run': RUN, [REPO_LABEL]: repoDir, 'floe.created': String(unixNow()) } });
  created.push(c.id);
  await prepareRepository(docker, c, current, { seal: true });
  return c.id;
}
let current: Task = pick('toy__c_to_f');

const run = async (id: string, command: string) => (await acts.execInSandbox({ containerId: id, command, timeoutSeconds: 10, maxOutputBytes: limits.maxOutputBytes })).output;

/** What the agent sees of its repository: files with owner, group and mode, the history, the index. */
const VIEW = [
  'find /work -path /work/repo/.git -prune -o -printf "%u %g %m %p\\n" | sort',
  'ls -a .git | tr "\\n" " "; echo',
  'git rev-parse HEAD; git log --all --format="%H %an <%ae> %ad %s" --date=iso-strict',
  'git ls-files -s; git status --porcelain; echo "whoami:$(whoami)"',
  'echo "base:$(cat /run/floe-base 2>/dev/null)"',
].join('; ');

afterAll(async () => {
  for (const id of created) await removeContainer(docker.getContainer(id));
  HarnessServer.for(settings.harness.bin).close();
});

describe('the sandbox pipeline', () => {
  for (const id of ['toy__c_to_f', 'toy__caesar_wrap']) {
    it(`${id}: the same repository, fresh commit, owners and sealed base put in by archive as prepared inside the container`, async () => {
      current = pick(id);
      const [L, F] = [await createPreparedInside(), await create()];
      const [l, f] = [await run(L, VIEW), await run(F, VIEW)];
      const sha = /^([0-9a-f]{40})$/m.exec(l)![1];
      expect(f).toBe(l);
      expect(f).toContain(`base:${sha}\n`);
      const sealed = async (c: string) => (await execRaw(docker, docker.getContainer(c), { cmd: ['bash', '-c', 'git --git-dir=/grade/base.git rev-parse HEAD; cat /grade/base.git/config /grade/base.git/info/exclude; stat -c "%u %a" /grade/base.git /grade/base.git/HEAD'], user: ROOT_USER, deadlineMs: 10_000, maxStdoutBytes: 4096 })).stdout.toString();
      expect(await sealed(F)).toBe(await sealed(L));
      expect(await sealed(F)).toContain(sha);
    });
  }

  it('takes the diff without an exec (the keeper\'s job) when root can tell the agent\'s check would change nothing, the same diff as the two-exec path', async () => {
    current = pick('toy__c_to_f');
    const edits = [
      'printf "x = 1\\n" >> temp.py', 'printf "new\\n" > added.txt', 'rm conftest.py', 'mkdir -p pkg && printf "y\\n" > pkg/z.py', 'chmod +x added.txt',
      'git add -A && git -c user.name=a -c user.email=a@a commit -qm mine', 'printf "more\\n" >> added.txt',
    ].join(' && ');
    let execs = 0;
    const counting = new Proxy(docker, { get: (t, p) => (p === 'getContainer' ? (id: string) => { const c = t.getContainer(id); return new Proxy(c, { get: (ct, cp) => (cp === 'exec' ? (...a: unknown[]) => { execs++; return (ct.exec as (...x: unknown[]) => unknown).apply(ct, a); } : (Reflect.get(ct, cp) as unknown)) }); } : (Reflect.get(t, p) as unknown)) }) as typeof docker;
    const counted = createSandboxActivities(counting, base);
    const F = await create();
    await run(F, edits);
    const f = await counted.extractDiff({ containerId: F, maxBytes: 64 * 1024 });
    expect(execs).toBe(0);
    expect(f.diff).toMatch(/new file mode 100755/);
    expect(f.diff).toContain('deleted file mode');
    // where root cannot tell (a changed .git/config, a file or folder root cannot read, an
    // execute bit the agent's chmod would add), the two-exec path decides: the agent's check
    // (which fixes the modes), then root's diff. A .git/config change alone changes nothing the
    // diff says: the two paths agree on the same edits
    const T = await create();
    await run(T, `${edits} && git config core.fileMode true`);
    execs = 0;
    expect(await counted.extractDiff({ containerId: T, maxBytes: 64 * 1024 })).toEqual(f);
    expect(execs).toBe(2);
    const small = await acts.extractDiff({ containerId: F, maxBytes: 100 });
    expect(small).toMatchObject({ truncated: true, bytes: f.bytes, diff: f.diff.slice(0, 100) });
    for (const odd of ['chmod 600 added.txt', 'chmod 710 pkg', 'printf "z\\n" > odd.sh && chmod 615 odd.sh']) {
      const F2 = await create();
      await run(F2, `${edits} && ${odd}`);
      execs = 0;
      const f2 = await counted.extractDiff({ containerId: F2, maxBytes: 64 * 1024 });
      expect(execs, odd).toBe(2);
      for (const path of ['added.txt', 'conftest.py', 'pkg/z.py', 'temp.py']) expect(f2.diff, odd).toContain(path);
    }
  }, 240_000);

  it('keeper jobs: root\'s script without an exec, its own answer only, killed past its time, out of the agent\'s reach', async () => {
    current = pick('toy__c_to_f');
    const F = await create();
    const c = docker.getContainer(F);
    // the keeper sleeps on its stdin (a pipe from conmon) and the caller's line wakes it;
    // podman closes that stdin when the attach ends, and later jobs are found by polling
    const woken = await runKeeperJob(c, { script: 'readlink /proc/1/fd/0', args: [], timeoutSeconds: 10 });
    expect(woken?.stdout.toString()).toMatch(/^pipe:/);
    const r = await runKeeperJob(c, { script: 'id -u; printf "%s|" "$@"; printf "\\377\\000\\n"; echo err >&2; exit 3', args: ['a b', '', 'c'], timeoutSeconds: 10 });
    expect(r).toEqual({ exitCode: 3, stdout: Buffer.from('0\na b||c|\xff\x00\n', 'latin1'), stderr: 'err\n' });
    // past its time limit the script is killed (timeout -s KILL: 137), and the keeper goes on
    expect(await runKeeperJob(c, { script: 'sleep 30', args: [], timeoutSeconds: 1 })).toMatchObject({ exitCode: 137 });
    // a job whose output looks like an answer cannot pass for one
    expect((await runKeeperJob(c, { script: 'echo "FLOE-JOB 00 0 1 0"; echo x; echo alive', args: [], timeoutSeconds: 5 }))?.stdout.toString()).toBe('FLOE-JOB 00 0 1 0\nx\nalive\n');
    // the keeper can take a job before podman has set the owner of `ready` (seen once in a demo
    // run): podman's copier then fails on lchown, yet the job ran and its answer is taken
    const copierSays = (what: string) => Object.assign(Object.create(c) as typeof c, {
      putArchive: async (...a: Parameters<typeof c.putArchive>) => { await c.putArchive(...a); throw new Error(`(HTTP code 500) server error - copier: put: ${what}`); },
    });
    const raced = await runKeeperJob(copierSays('error setting ownership of "/grade/floe-job/ready" to 0:0: lchown /grade/floe-job/ready: no such file or directory'), { script: 'echo raced', args: [], timeoutSeconds: 5 });
    expect(raced).toEqual({ exitCode: 0, stdout: Buffer.from('raced\n'), stderr: '' });
    // any other failure of the copier is still the caller's error
    await expect(runKeeperJob(copierSays('no space left on device'), { script: 'true', args: [], timeoutSeconds: 5 })).rejects.toThrow(/no space left/);
    // the agent can neither read /grade nor leave a request there
    const seen = await run(F, 'ls /grade 2>&1; mkdir /grade/floe-job 2>&1; echo rc=$?');
    expect(seen).toMatch(/Permission denied[\s\S]*Permission denied[\s\S]*rc=1/);
    // a container whose first process is not the keeper gives no answer: null, for the
    // caller's exec path
    const other = await startLockedContainer(docker, { image: base.image, limits, repoDir: '/work/repo', labels: { 'floe.sandbox': '1', 'floe.run': RUN, 'floe.created': String(unixNow()) }, main: { user: ROOT_USER, env: [], cmd: ['sleep', '60'] } });
    created.push(other.id);
    expect(await runKeeperJob(other, { script: 'echo x', args: [], timeoutSeconds: 0 })).toBeNull();
  }, 120_000);

  it('takeDiffAndDestroy takes the same diff as extractDiff, whatever the agent does to git, and removes the sandbox', async () => {
    current = pick('toy__c_to_f');
    const edits = [
      'printf "x = 1\\n" >> temp.py', 'printf "new\\n" > added.txt', 'rm conftest.py', 'mkdir -p pkg && printf "y\\n" > pkg/z.py',
      'git add -A && git -c user.name=a -c user.email=a@a commit -qm mine', 'printf "[core]\\n\\tbare = true\\n" >> .git/config', 'chmod 600 added.txt', 'chmod 710 pkg', 'printf "z\\n" > odd.sh && chmod 615 odd.sh',
    ].join(' && ');
    const [L, F] = [await create(), await create()];
    await run(L, edits);
    await run(F, edits);
    const l = await acts.extractDiff({ containerId: L, maxBytes: 64 * 1024 });
    const f = await acts.takeDiffAndDestroy({ containerId: F, maxBytes: 64 * 1024 });
    expect(f).toEqual(l);
    expect(l.diff).toContain('added.txt');
    expect(l.diff).toContain('deleted file mode');
    await expect(docker.getContainer(F).inspect()).rejects.toThrow(/no such container/i);
    // a broken repository is refused by both
    const [L2, F2] = [await create(), await create()];
    await run(L2, 'rm -rf .git');
    await run(F2, 'rm -rf .git');
    await expect(acts.extractDiff({ containerId: L2, maxBytes: 1024 })).rejects.toThrow(/\.git is gone/);
    await expect(acts.takeDiffAndDestroy({ containerId: F2, maxBytes: 1024 })).rejects.toThrow(/\.git is gone/);
    await expect(docker.getContainer(F2).inspect()).rejects.toThrow(/no such container/i);
  }, 120_000);

  it('grades a directory source with the test run as the grader\'s first process (no exec): the gold patch, an empty diff, a diff that does not apply, a test-file edit', async () => {
    const t = pick('toy__caesar_wrap');
    const diffs = {
      gold: t.patch,
      empty: '',
      broken: 'diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n',
      testEdit: 'diff --git a/tests/test_hidden.py b/tests/test_hidden.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_hidden.py\n@@ -0,0 +1,2 @@\n+def test_x():\n+    assert True\n',
    };
    let execs = 0;
    const counting = new Proxy(docker, {
      get: (t, p) => (p === 'createContainer'
        ? async (...a: unknown[]) => {
          const c = await (t.createContainer as (...x: unknown[]) => Promise<ReturnType<typeof t.getContainer>>).apply(t, a);
          return new Proxy(c, { get: (ct, cp) => (cp === 'exec' ? (...x: unknown[]) => { execs++; return (ct.exec as (...y: unknown[]) => unknown).apply(ct, x); } : (Reflect.get(ct, cp) as unknown)) });
        }
        : (Reflect.get(t, p) as unknown)),
    }) as typeof docker;
    const grading = createGradingActivities(counting, base);
    const grade = (diff: string) => grading.gradeSubmission({ runId: RUN, rolloutId: `${RUN}-${n++}`, task: t, diff, limits, timeoutSeconds: 60 });
    const [gold, empty, broken, testEdit] = await Promise.all([grade(diffs.gold), grade(diffs.empty), grade(diffs.broken), grade(diffs.testEdit)]);
    const outcomes = (g: GradeResult) => [...new Set(g.tests.map((x) => `${x.group}:${x.outcome}`))].sort();
    expect(gold).toMatchObject({ passed: true, harness: 'pytest', applyError: null, timedOut: false });
    expect(outcomes(gold)).toEqual(['FAIL_TO_PASS:passed', 'PASS_TO_PASS:passed']);
    expect(gold.log).toMatch(/agent diff: applied/);
    expect(empty).toMatchObject({ passed: false, applyError: null, timedOut: false });
    expect(outcomes(empty)).toContain('FAIL_TO_PASS:failed');
    expect(empty.log).toMatch(/agent diff: empty/);
    expect(broken).toMatchObject({ passed: false, timedOut: false });
    expect(broken.applyError).toMatch(/does not apply/);
    expect(outcomes(broken)).toEqual(['FAIL_TO_PASS:missing', 'PASS_TO_PASS:missing']);
    // the agent's own test file never counts: the hidden tests still fail without a fix
    expect(testEdit.passed).toBe(false);
    expect(execs).toBe(0);
  }, 240_000);

  it('the long-lived harness answers again after its process dies, and caches plans', async () => {
    const h = HarnessServer.for(settings.harness.bin);
    const t = pick('toy__c_to_f');
    const req = { task: t, baseCommit: 'a'.repeat(40), repoDir: '/work/repo', stageDir: '/tmp/floe-grade' };
    const p1 = await h.plan(req);
    expect(p1.harness).toBe('pytest');
    expect(h.plan(req)).toBe(h.plan(req)); // one cached promise
    const child = (h as unknown as { child: { pid: number } | null }).child;
    expect(child).not.toBeNull();
    process.kill(child!.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    const v = await h.parse({ task: t, harness: 'pytest', log: '' });
    expect(v).toMatchObject({ resolved: false, logComplete: false });
    expect((h as unknown as { child: { pid: number } | null }).child!.pid).not.toBe(child!.pid);
  });
});
