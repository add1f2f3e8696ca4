import { afterAll, describe, expect, it } from 'vitest';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { loadSettings } from '../infra/settings.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { Task } from '../core/taskModel.js';
import type { GradeResult, SandboxLimits } from '../core/sandboxPolicy.js';
import { createGradingActivities } from '../activities/grading.js';
import { createSandboxActivities, pipelineFromEnv, workerIdentity, type SandboxPipeline } from '../activities/sandbox/index.js';
import { ROOT_USER, execRaw } from '../activities/sandbox/exec.js';
import { removeContainer } from '../activities/sandbox/containerSpec.js';
import { HarnessServer } from '../activities/harness.js';
import { keeperOf, runKeeperJob } from '../activities/sandbox/keeper.js';

/** The fast sandbox pipeline (SandboxPipeline 'fast', the default) against the legacy one,
 *  side by side on real podman: the same repository, history, seal and owners in the agent's
 *  sandbox, the same diff after the same edits (taken by the keeper without an exec), the same
 *  grades (the test run as the grader's first process, without an exec); the diff taken as the
 *  sandbox is removed; the long-lived harness process restarting after it dies. */

const settings = loadSettings();
const docker = dockerFromSettings(settings);
const RUN = `test-fast-${process.pid}-${Date.now()}`;
const base = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity(), harnessPython: settings.harness.bin };
const acts = (pipeline: SandboxPipeline) => ({ ...createSandboxActivities(docker, { ...base, pipeline }), ...createGradingActivities(docker, { ...base, pipeline }) });
const legacy = acts('legacy');
const fast = acts('fast');
const limits: SandboxLimits = { cpus: 1, memoryMb: 128, pidsLimit: 64, diskMb: 64, commandTimeoutSeconds: 10, maxOutputBytes: 64 * 1024 };
const tasks = loadToySuite({ onBadRow: 'fail' }).tasks;
const pick = (id: string): Task => tasks.find((t) => t.instanceId === id)!;
const created: string[] = [];
let n = 0;

async function create(a: typeof fast): Promise<string> {
  const { containerId } = await a.createSandbox({ runId: RUN, rolloutId: `${RUN}-${n++}`, task: current, limits });
  created.push(containerId);
  return containerId;
}
let current: Task = pick('toy__c_to_f');

const run = async (a: typeof fast, id: string, command: string) => (await a.execInSandbox({ containerId: id, command, timeoutSeconds: 10, maxOutputBytes: limits.maxOutputBytes })).output;

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

describe('fast pipeline = legacy pipeline', () => {
  it('is the default (FLOE_SANDBOX_PIPELINE=legacy selects the legacy path)', () => {
    expect(pipelineFromEnv({})).toBe('fast');
    expect(pipelineFromEnv({ FLOE_SANDBOX_PIPELINE: 'legacy' })).toBe('legacy');
  });

  for (const id of ['toy__c_to_f', 'toy__caesar_wrap']) {
    it(`${id}: the same repository, fresh commit, owners and sealed base in the agent's sandbox`, async () => {
      current = pick(id);
      const [L, F] = [await create(legacy), await create(fast)];
      const [l, f] = [await run(legacy, L, VIEW), await run(fast, F, VIEW)];
      const sha = /^([0-9a-f]{40})$/m.exec(l)![1];
      // the legacy sandbox has no /run/floe-base; everything else is the same
      expect(f).toBe(l.replace('base:\n', `base:${sha}\n`));
      const sealed = async (c: string) => (await execRaw(docker, docker.getContainer(c), { cmd: ['bash', '-c', 'git --git-dir=/grade/base.git rev-parse HEAD; cat /grade/base.git/config /grade/base.git/info/exclude; stat -c "%u %a" /grade/base.git /grade/base.git/HEAD'], user: ROOT_USER, deadlineMs: 10_000, maxStdoutBytes: 4096 })).stdout.toString();
      expect(await sealed(F)).toBe(await sealed(L));
      expect(await sealed(F)).toContain(sha);
    });
  }

  it('takes the diff without an exec (the keeper\'s job) when root can tell the agent\'s check would change nothing, the same diff as legacy', async () => {
    current = pick('toy__c_to_f');
    const edits = [
      'printf "x = 1\\n" >> temp.py', 'printf "new\\n" > added.txt', 'rm conftest.py', 'mkdir -p pkg && printf "y\\n" > pkg/z.py', 'chmod +x added.txt',
      'git add -A && git -c user.name=a -c user.email=a@a commit -qm mine', 'printf "more\\n" >> added.txt',
    ].join(' && ');
    const [L, F] = [await create(legacy), await create(fast)];
    await run(legacy, L, edits);
    await run(fast, F, edits);
    const l = await legacy.extractDiff({ containerId: L, maxBytes: 64 * 1024 });
    let execs = 0;
    const counting = new Proxy(docker, { get: (t, p) => (p === 'getContainer' ? (id: string) => { const c = t.getContainer(id); return new Proxy(c, { get: (ct, cp) => (cp === 'exec' ? (...a: unknown[]) => { execs++; return (ct.exec as (...x: unknown[]) => unknown).apply(ct, a); } : (Reflect.get(ct, cp) as unknown)) }); } : (Reflect.get(t, p) as unknown)) }) as typeof docker;
    const f = await createSandboxActivities(counting, { ...base, pipeline: 'fast' }).extractDiff({ containerId: F, maxBytes: 64 * 1024 });
    expect(f).toEqual(l);
    expect(l.diff).toMatch(/new file mode 100755/);
    expect(execs).toBe(0);
    // a sandbox whose keeper takes no jobs (made by the legacy path, or before keeper jobs):
    // the exec path, the same diff
    const L1 = await create(legacy);
    await run(legacy, L1, edits);
    expect((await docker.getContainer(L1).inspect()).Config.Labels?.['floe.keeper']).toBeUndefined();
    expect((await docker.getContainer(F).inspect()).Config.Labels?.['floe.keeper']).toBe('jobs+stdin');
    execs = 0;
    expect(await createSandboxActivities(counting, { ...base, pipeline: 'fast' }).extractDiff({ containerId: L1, maxBytes: 64 * 1024 })).toEqual(l);
    expect(execs).toBeGreaterThan(0);
    const small = await fast.extractDiff({ containerId: F, maxBytes: 100 });
    expect(small).toMatchObject({ truncated: true, bytes: l.bytes, diff: l.diff.slice(0, 100) });
    // where root cannot tell (a changed .git/config, a file or folder root cannot read, an
    // execute bit the agent's chmod would add), the two-exec path decides: still the same diff
    for (const odd of ['git config core.fileMode true', 'chmod 600 added.txt', 'chmod 710 pkg', 'printf "z\\n" > odd.sh && chmod 615 odd.sh']) {
      const [L2, F2] = [await create(legacy), await create(fast)];
      await run(legacy, L2, `${edits} && ${odd}`);
      await run(fast, F2, `${edits} && ${odd}`);
      execs = 0;
      const f2 = await createSandboxActivities(counting, { ...base, pipeline: 'fast' }).extractDiff({ containerId: F2, maxBytes: 64 * 1024 });
      expect(f2, odd).toEqual(await legacy.extractDiff({ containerId: L2, maxBytes: 64 * 1024 }));
      expect(execs, odd).toBe(2); // the keeper's job could not tell: the agent's check, then root's diff
    }
  }, 240_000);

  it('keeper jobs: root\'s script without an exec, its own answer only, killed past its time, out of the agent\'s reach', async () => {
    current = pick('toy__c_to_f');
    const F = await create(fast);
    const c = docker.getContainer(F);
    // the keeper sleeps on its stdin (a pipe from conmon) and
    // the caller's line wakes it; podman closes that stdin when the attach ends, and later jobs
    // are found by polling, as a keeper of a container made before (stdin /dev/null) finds them
    expect(keeperOf((await c.inspect()).Config.Labels ?? {})).toEqual({ jobs: true, wake: true });
    const woken = await runKeeperJob(c, { script: 'readlink /proc/1/fd/0', args: [], timeoutSeconds: 10, wake: true });
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
    const seen = await run(fast, F, 'ls /grade 2>&1; mkdir /grade/floe-job 2>&1; echo rc=$?');
    expect(seen).toMatch(/Permission denied[\s\S]*Permission denied[\s\S]*rc=1/);
    // a keeper that takes no jobs gives no answer: null, for the caller's exec path
    const L = await create(legacy);
    expect(await runKeeperJob(docker.getContainer(L), { script: 'echo x', args: [], timeoutSeconds: 0 })).toBeNull();
  }, 120_000);

  it('takes the same diff after the same edits, whatever the agent does to git, and takeDiffAndDestroy removes the sandbox', async () => {
    current = pick('toy__c_to_f');
    const edits = [
      'printf "x = 1\\n" >> temp.py', 'printf "new\\n" > added.txt', 'rm conftest.py', 'mkdir -p pkg && printf "y\\n" > pkg/z.py',
      'git add -A && git -c user.name=a -c user.email=a@a commit -qm mine', 'printf "[core]\\n\\tbare = true\\n" >> .git/config', 'chmod 600 added.txt', 'chmod 710 pkg', 'printf "z\\n" > odd.sh && chmod 615 odd.sh',
    ].join(' && ');
    const [L, F] = [await create(legacy), await create(fast)];
    await run(legacy, L, edits);
    await run(fast, F, edits);
    const l = await legacy.extractDiff({ containerId: L, maxBytes: 64 * 1024 });
    const f = await fast.takeDiffAndDestroy({ containerId: F, maxBytes: 64 * 1024 });
    expect(f).toEqual(l);
    expect(l.diff).toContain('added.txt');
    expect(l.diff).toContain('deleted file mode');
    await expect(docker.getContainer(F).inspect()).rejects.toThrow(/no such container/i);
    // a broken repository is refused by both
    const [L2, F2] = [await create(legacy), await create(fast)];
    await run(legacy, L2, 'rm -rf .git');
    await run(fast, F2, 'rm -rf .git');
    await expect(legacy.extractDiff({ containerId: L2, maxBytes: 1024 })).rejects.toThrow(/\.git is gone/);
    await expect(fast.takeDiffAndDestroy({ containerId: F2, maxBytes: 1024 })).rejects.toThrow(/\.git is gone/);
    await expect(docker.getContainer(F2).inspect()).rejects.toThrow(/no such container/i);
  }, 120_000);

  it('grades the gold patch, an empty diff, a diff that does not apply and a test-file edit the same', async () => {
    const t = pick('toy__caesar_wrap');
    const summary = (g: GradeResult) => ({ passed: g.passed, harness: g.harness, tests: g.tests, applyError: g.applyError === null ? null : g.applyError.replace(/\s+/g, ' ').slice(0, 40), timedOut: g.timedOut });
    const diffs = {
      gold: t.patch,
      empty: '',
      broken: 'diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n',
      testEdit: 'diff --git a/tests/test_hidden.py b/tests/test_hidden.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_hidden.py\n@@ -0,0 +1,2 @@\n+def test_x():\n+    assert True\n',
    };
    // the fast grader of a directory source runs its tests as the container's first process: no exec
    let execs = 0;
    const counting = new Proxy(docker, {
      get: (t, p) => (p === 'createContainer'
        ? async (...a: unknown[]) => {
          const c = await (t.createContainer as (...x: unknown[]) => Promise<ReturnType<typeof t.getContainer>>).apply(t, a);
          return new Proxy(c, { get: (ct, cp) => (cp === 'exec' ? (...x: unknown[]) => { execs++; return (ct.exec as (...y: unknown[]) => unknown).apply(ct, x); } : (Reflect.get(ct, cp) as unknown)) });
        }
        : (Reflect.get(t, p) as unknown)),
    }) as typeof docker;
    const fastCounted = createGradingActivities(counting, { ...base, pipeline: 'fast' });
    for (const [name, diff] of Object.entries(diffs)) {
      const g = (a: Pick<typeof fast, 'gradeSubmission'>) => a.gradeSubmission({ runId: RUN, rolloutId: `${RUN}-${n++}`, task: t, diff, limits, timeoutSeconds: 60 });
      const [l, f] = await Promise.all([g(legacy), g(fastCounted)]);
      expect(summary(f), name).toEqual(summary(l));
      if (name === 'gold') expect(f.passed).toBe(true);
      if (name === 'broken') expect(f.applyError).toMatch(/does not apply/);
      expect(f.log).toMatch(/agent diff: (applied|empty)|git apply:/);
    }
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
