import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { seccompProfile } from '../infra/components/podman.js';
import { loadSettings } from '../infra/settings.js';
import { loadToySuite } from '../tasks/loaders.js';
import { CLONE_NEW_ANY, withoutNewNamespaces, type SeccompProfile } from '../core/seccomp.js';
import type { Task } from '../core/taskModel.js';
import { parseRunConfig } from '../core/config.js';
import { gradePatch } from '../activities/grading.js';
import { createSandboxActivities, workerIdentity } from '../activities/sandbox/index.js';
import { removeContainer } from '../activities/sandbox/containerSpec.js';

/** floe's seccomp profile (core/seccomp.ts: the engine's default without new namespaces), which
 *  floe up makes every podman container's: an agent cannot `unshare -r` to be uid 0 in a user
 *  namespace of its own, in a sandbox or in a grader, and every toy task's gold fix still
 *  passes under it (the profile breaks no legitimate tool use). */

const settings = loadSettings();
const docker = dockerFromSettings(settings);
const RUN = `test-seccomp-${process.pid}-${Date.now()}`;
const opts = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity(), harnessPython: settings.harness.bin };
const sandbox = createSandboxActivities(docker, opts);
const limits = { ...parseRunConfig({}).sandbox, commandTimeoutSeconds: 30 };
const toy = loadToySuite({ onBadRow: 'fail' }).tasks;
const created: string[] = [];

afterAll(async () => {
  for (const id of created) await removeContainer(docker.getContainer(id));
});

/** Each line: a command and its exit status, as the agent runs it. */
const PROBES = [
  'unshare -r true',
  'unshare --user --map-root-user --mount true',
  'unshare --net true',
  `python3 -c 'import os; os.unshare(os.CLONE_NEWUSER)'`,
].map((c) => `${c} >/dev/null 2>&1; echo "rc=$?"`).join('; ');

/** What legitimate tools do: threads, forks, subprocesses, pipes, git, pip, pytest. */
const LEGIT = [
  `python3 -c 'import threading, subprocess; t = threading.Thread(target=lambda: None); t.start(); t.join(); assert subprocess.run(["true"]).returncode == 0'`,
  '(sleep 0.1 & wait) && echo a | tr a b | grep -q b',
  'git status --short >/dev/null',
  'pip --version >/dev/null',
  'python3 -m pytest --version >/dev/null 2>&1',
].map((c) => `${c}; echo "rc=$?"`).join('; ');

const codes = (out: string) => [...out.matchAll(/rc=(\d+)/g)].map((m) => Number(m[1]));

describe('the sandboxes\' seccomp profile', () => {
  it('is the default profile with clone/unshare allowed only without CLONE_NEW* flags, clone3 ENOSYS and setns EPERM', () => {
    const base: SeccompProfile = { defaultAction: 'SCMP_ACT_ERRNO', syscalls: [
      { names: ['read', 'clone', 'unshare', 'write'], action: 'SCMP_ACT_ALLOW' },
      { names: ['clone3', 'setns'], action: 'SCMP_ACT_ALLOW' },
      { names: ['setns'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 },
    ] };
    const p = withoutNewNamespaces(base);
    expect(p.syscalls.slice(0, 2)).toEqual([{ names: ['read', 'write'], action: 'SCMP_ACT_ALLOW' }, { names: ['setns'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 }]);
    expect(p.syscalls.slice(2).map((r) => [r.names, r.action, r.args?.[0]?.value ?? null, r.errnoRet ?? null])).toEqual([
      [['clone', 'unshare'], 'SCMP_ACT_ALLOW', CLONE_NEW_ANY, null], [['clone3'], 'SCMP_ACT_ERRNO', null, 38], [['setns'], 'SCMP_ACT_ERRNO', null, 1]]);
    // the profile floe up wrote is this rule over podman's own default
    const written = JSON.parse(fs.readFileSync(seccompProfile(settings), 'utf8')) as SeccompProfile;
    const allowed = new Set(written.syscalls.filter((r) => r.action === 'SCMP_ACT_ALLOW' && !r.args?.length && !Object.keys((r.includes as object | undefined) ?? {}).length).flatMap((r) => r.names));
    for (const n of ['clone', 'clone3', 'unshare', 'setns']) expect(allowed.has(n), n).toBe(false);
    for (const n of ['read', 'write', 'execve', 'wait4', 'futex']) expect(allowed.has(n), n).toBe(true);
  });

  it('refuses every new namespace in a sandbox, and leaves threads, forks, pipes, git, pip and pytest working', async () => {
    const { containerId } = await sandbox.createSandbox({ runId: RUN, rolloutId: 'probe', task: toy[0], limits });
    created.push(containerId);
    const refused = await sandbox.execInSandbox({ containerId, command: PROBES, timeoutSeconds: 30, maxOutputBytes: 8192 });
    expect(codes(refused.output), refused.output).toHaveLength(4);
    for (const c of codes(refused.output)) expect(c, refused.output).not.toBe(0);
    const legit = await sandbox.execInSandbox({ containerId, command: LEGIT, timeoutSeconds: 30, maxOutputBytes: 8192 });
    expect(codes(legit.output), legit.output).toEqual([0, 0, 0, 0, 0]);
  }, 120_000);

  it('negative control: the same image without the profile lets the same user unshare -r', async () => {
    const c = await docker.createContainer({
      Image: opts.image, User: '1000:1000', Entrypoint: ['bash', '-c', 'unshare -r id -u'], Cmd: [], Labels: { 'floe.sandbox': '1', 'floe.run': RUN },
      HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges', 'seccomp=unconfined'] },
    });
    created.push(c.id);
    await c.start();
    await c.wait();
    const out = (await c.logs({ stdout: true, stderr: true })).toString('utf8');
    expect(out).toMatch(/\b0\s*$/); // uid 0 in a namespace of its own: what the profile closes
  }, 120_000);

  it('refuses it in a grader too, and every toy task\'s gold fix still passes under the profile', async () => {
    const probe = 'diff --git a/tests/test_floe_userns.py b/tests/test_floe_userns.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_floe_userns.py\n@@ -0,0 +1,6 @@\n+import subprocess\n+\n+\n+def test_no_user_namespace():\n+    r = subprocess.run(["unshare", "-r", "true"], capture_output=True)\n+    assert r.returncode != 0, r\n';
    const withProbe = (t: Task): Task => ({ ...t, testPatch: `${t.testPatch}${probe}`, failToPass: [...t.failToPass, 'tests/test_floe_userns.py::test_no_user_namespace'] });
    const failed: string[] = [];
    for (let i = 0; i < toy.length; i += 4) {
      const batch = toy.slice(i, i + 4);
      const grades = await Promise.all(batch.map((t) => gradePatch(docker, opts, { task: i === 0 ? withProbe(t) : t, diff: t.patch, labels: { 'floe.run': RUN } })));
      grades.forEach((g, j) => { if (!g.passed) failed.push(`${batch[j].instanceId}: ${g.log.slice(-400)}`); });
    }
    expect(failed).toEqual([]);
  }, 900_000);
});
