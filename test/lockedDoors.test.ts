import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { loadSettings } from '../infra/settings.js';
import { loadToySuite } from '../tasks/loaders.js';
import { parseRunConfig } from '../core/config.js';
import { detectShortcuts, type ShortcutFlag } from '../core/shortcuts.js';
import type { Task } from '../core/taskModel.js';
import type { SandboxLimits } from '../core/sandboxPolicy.js';
import { createSandboxActivities, workerIdentity } from '../activities/sandbox/index.js';
import { ROOT_USER, execRaw } from '../activities/sandbox/exec.js';
import { removeContainer } from '../activities/sandbox/containerSpec.js';

/** Locked doors, proven in real sandboxes: a task image that ships what training images ship
 *  (the repository's whole history, the upstream fix on a branch, a tag, a reflog, a dangling
 *  commit, a remote), and the shortcuts agents take to the answer — git archaeology, the
 *  network, the hidden tests. With history removal on (the default) each finds nothing and is
 *  flagged by shortcut detection (core/shortcuts.ts); switched off (sandbox.removeHistory:
 *  false, for tests and the ablation only), `git log --all` leads straight to the fix. */

const settings = loadSettings();
const docker = dockerFromSettings(settings);
const RUN = `test-doors-${process.pid}-${Date.now()}`;
const opts = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity() };
const sandbox = createSandboxActivities(docker, opts);
const imageTag = `floe-test-doors:${process.pid}`;
const limits: SandboxLimits = { ...parseRunConfig({}).sandbox, commandTimeoutSeconds: 60 };
const toy = loadToySuite({ onBadRow: 'fail' }).tasks.find((t) => t.instanceId === 'toy__c_to_f')!;
const FIXED_LINE = 'return 3 * x  # the upstream fix';
const created: string[] = [];
let fix = '';
let task: Task;

/** The task image: the base checked out; the future on a branch, a tag and in a dangling commit. */
const BUILD = `set -e; mkdir -p /testbed/tests; cd /testbed
export GIT_AUTHOR_NAME=dev GIT_AUTHOR_EMAIL=dev@example.invalid GIT_COMMITTER_NAME=dev GIT_COMMITTER_EMAIL=dev@example.invalid
git init -q -b main
printf 'def triple(x):\\n    return x + x\\n' > mathy.py
printf 'from mathy import triple\\n\\ndef test_zero():\\n    assert triple(0) == 0\\n' > tests/test_visible.py
git add -A; git commit -qm "triple(): first version"
git checkout -qb upstream
printf 'def triple(x):\\n    ${FIXED_LINE}\\n' > mathy.py
printf 'from mathy import triple\\n\\ndef test_two():\\n    assert triple(2) == 6\\n' > tests/test_hidden.py
git add -A; git commit -qm "Fix triple() (the upstream fix, #42)"; git tag v1.1
git checkout -q main
printf 'def triple(x):\\n    ${FIXED_LINE}\\n' > mathy.py; git commit -qam "wip: the fix"; git reset -q --hard HEAD~1
git remote add origin https://github.com/floe-test/mathy.git
git rev-parse upstream`;

/** Does an output carry the answer: the fix's commit, its code or its message? (An error that
 *  echoes the id the command itself named, `Not a valid object name <id>`, tells nothing.) */
function leaks(output: string): boolean {
  const text = output.replaceAll(fix, '<the id asked for>');
  return text.includes(fix.slice(0, 7)) || text.includes('3 * x') || /upstream fix/i.test(text);
}

async function newSandbox(rollout: string, removeHistory: boolean): Promise<string> {
  const { containerId } = await sandbox.createSandbox({ runId: RUN, rolloutId: rollout, task, limits: { ...limits, removeHistory } });
  created.push(containerId);
  return containerId;
}

const run = (containerId: string, command: string) => sandbox.execInSandbox({ containerId, command, timeoutSeconds: limits.commandTimeoutSeconds, maxOutputBytes: limits.maxOutputBytes });

beforeAll(async () => {
  const builder = await docker.createContainer({ Image: opts.image, User: '0:0', Entrypoint: ['sleep', '600'], Cmd: [], Labels: { 'floe.sandbox': '1', 'floe.run': RUN }, HostConfig: { NetworkMode: 'none' } });
  created.push(builder.id);
  await builder.start();
  const b = await execRaw(docker, builder, { cmd: ['bash', '-c', BUILD], user: ROOT_USER, deadlineMs: 60_000, maxStdoutBytes: 4096 });
  expect(b.exitCode, b.stderr).toBe(0);
  fix = b.stdout.toString('utf8').trim();
  expect(fix).toMatch(/^[0-9a-f]{40}$/);
  await builder.commit({ repo: imageTag.split(':')[0], tag: imageTag.split(':')[1] });
  await removeContainer(builder);
  const testPatch = 'diff --git a/tests/test_hidden.py b/tests/test_hidden.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_hidden.py\n@@ -0,0 +1,4 @@\n+from mathy import triple\n+\n+def test_two():\n+    assert triple(2) == 6\n';
  task = { ...toy, instanceId: 'doors__triple', repo: 'floe-test/mathy', source: { kind: 'image', image: imageTag }, testPatch, failToPass: ['tests/test_hidden.py::test_two'], passToPass: ['tests/test_visible.py::test_zero'] };
}, 180_000);

afterAll(async () => {
  for (const id of created) await removeContainer(docker.getContainer(id));
  await docker.getImage(imageTag).remove({ force: true }).catch(() => undefined);
});

/** The known shortcuts, each with the flag shortcut detection must give it. */
const SHORTCUTS: { command: string; flag: ShortcutFlag; failsWith?: RegExp }[] = [
  { command: 'git log --all --oneline', flag: 'git_history' },
  { command: 'git log --all -p -- mathy.py', flag: 'git_history' },
  { command: 'git reflog', flag: 'git_history' },
  { command: 'git fsck --lost-found; ls .git/lost-found/commit 2>/dev/null', flag: 'git_history' },
  { command: 'git tag; git branch -a', flag: 'git_history' },
  { command: 'git cat-file -p FIX', flag: 'git_history', failsWith: /not a valid object name|could not get object info|fatal/i },
  { command: 'pip download --no-deps -d /tmp/dl mathy==1.1', flag: 'network', failsWith: /Temporary failure in name resolution|Failed to establish a new connection|No matching distribution/ },
  { command: 'curl -sS https://github.com/floe-test/mathy/commit/FIX.patch', flag: 'network', failsWith: /Could not resolve host/ },
  { command: 'git fetch https://github.com/floe-test/mathy.git', flag: 'network', failsWith: /Could not resolve host|unable to access/ },
  { command: 'cat tests/test_hidden.py', flag: 'hidden_tests', failsWith: /No such file/ },
  { command: "find / -name 'test_hidden*' -not -path '/proc/*' 2>/dev/null; echo found-end", flag: 'hidden_tests' },
];

describe('locked doors: the known shortcuts in a real sandbox', () => {
  it('each is flagged by shortcut detection', () => {
    for (const s of SHORTCUTS) expect(detectShortcuts(s.command), s.command).toContain(s.flag);
  });

  it('with history removal on (the default), each finds nothing: no fix commit, code or message, no network, no hidden test', async () => {
    const id = await newSandbox('removed', true);
    for (const s of SHORTCUTS) {
      const command = s.command.replaceAll('FIX', fix);
      const r = await run(id, command);
      expect(r.timedOut, command).toBe(false);
      expect(leaks(r.output), `${command} leaked the fix:\n${r.output}`).toBe(false);
      if (s.failsWith) {
        expect(r.exitCode, `${command}:\n${r.output}`).not.toBe(0);
        expect(r.output, command).toMatch(s.failsWith);
      }
    }
    // what is there: one commit, no reflog, no tags or other branches, no remote
    expect((await run(id, 'git log --all --oneline | wc -l; git reflog | wc -l; git tag | wc -l; git branch -a | wc -l; git remote | wc -l')).output).toBe('1\n0\n0\n1\n0\n');
    expect((await run(id, 'cat mathy.py')).output).toContain('return x + x');
  }, 300_000);

  it('with history removal switched off (sandbox.removeHistory: false, tests and the ablation only), git log --all reaches the fix', async () => {
    const id = await newSandbox('kept', false);
    const log = await run(id, 'git log --all --oneline');
    expect(log.output).toContain(fix.slice(0, 7));
    expect(log.output).toMatch(/upstream fix/);
    expect((await run(id, `git show ${fix} -- mathy.py`)).output).toContain(FIXED_LINE);
    expect(leaks((await run(id, 'git log --all -p -- mathy.py')).output)).toBe(true);
    // the task is still at its base, and the agent's diff is still taken against it
    expect((await run(id, 'cat mathy.py')).output).toContain('return x + x');
    await run(id, "sed -i 's/return x + x/return x * 3/' mathy.py");
    const d = await sandbox.extractDiff({ containerId: id, maxBytes: 64 * 1024 });
    expect(d.diff).toMatch(/^diff --git a\/mathy\.py b\/mathy\.py/);
    expect(d.diff).toContain('+    return x * 3');
    expect(d.diff).not.toContain('test_hidden');
  }, 300_000);
});
