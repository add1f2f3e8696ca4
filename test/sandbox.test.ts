import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { portOpen } from '../infra/proc.js';
import { loadSettings } from '../infra/settings.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { Task } from '../core/taskModel.js';
import { sandboxMemoryMb, type ExecResult, type SandboxLimits } from '../core/sandboxPolicy.js';
import { createSandboxActivities, startSandboxReaper, workerIdentity } from '../activities/sandbox/index.js';
import { ROOT_USER, countAgentProcesses, execRaw } from '../activities/sandbox/exec.js';
import { removeContainer } from '../activities/sandbox/containerSpec.js';

/** The sandbox against real podman: locked doors (one fresh commit, no hidden tests, no
 *  network, no capabilities), the limits it runs with, its output, the diff, and the reaper.
 *  Hostile commands and their containment: test/chaos/hostileSandbox.test.ts. */

const settings = loadSettings();
const docker = dockerFromSettings(settings);
const RUN = `test-sandbox-${process.pid}-${Date.now()}`;
const opts = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity() };
const sandbox = createSandboxActivities(docker, opts);
const limits: SandboxLimits = { cpus: 1, memoryMb: 128, pidsLimit: 64, diskMb: 64, commandTimeoutSeconds: 5, maxOutputBytes: 8192 };
const task: Task = loadToySuite({ onBadRow: 'fail' }).tasks.find((t) => t.instanceId === 'toy__c_to_f')!;
const created: string[] = [];
let A = '';
let B = '';

async function create(rollout: string, acts = sandbox): Promise<string> {
  const { containerId } = await acts.createSandbox({ runId: RUN, rolloutId: rollout, task, limits });
  created.push(containerId);
  return containerId;
}

function run(containerId: string, command: string, timeoutSeconds = limits.commandTimeoutSeconds): Promise<ExecResult> {
  return sandbox.execInSandbox({ containerId, command, timeoutSeconds, maxOutputBytes: limits.maxOutputBytes });
}

async function asRoot(containerId: string, cmd: string[]): Promise<{ code: number | null; out: string }> {
  const r = await execRaw(docker, docker.getContainer(containerId), { cmd, user: ROOT_USER, deadlineMs: 10_000, maxStdoutBytes: 64 * 1024 });
  return { code: r.exitCode, out: r.stdout.toString('utf8') + r.stderr };
}

async function ourContainers(): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [`floe.run=${RUN}`] } });
  return list.map((c) => c.Id);
}

beforeAll(async () => {
  [A, B] = await Promise.all([create('A'), create('B')]);
});

afterAll(async () => {
  for (const id of [...created, ...(await ourContainers())]) await removeContainer(docker.getContainer(id));
});

describe('a toy task sandbox', () => {
  it('holds the task at one fresh commit, without the hidden tests, as the agent', async () => {
    const r = await run(A, [
      'echo "log:$(git log --all --oneline | wc -l)"',
      'echo "revs:$(git rev-list --all | wc -l)"',
      'echo "reflog:$(git reflog | wc -l)"',
      'echo "stash:$(git stash list | wc -l)"',
      'echo "remotes:$(git remote -v | wc -l)"',
      'echo "packs:$(git count-objects -v | sed -n "s/^packs: //p")"',
      'echo "packed-refs:$(test -e .git/packed-refs && echo yes || echo no)"',
      'echo "logs:$(test -e .git/logs && echo yes || echo no)"',
      'echo "unreachable:$(git fsck --unreachable --no-reflogs 2>/dev/null | wc -l)"',
      'echo "hidden:$(test -e tests/test_hidden.py && echo yes || echo no)"',
      'echo "hidden-anywhere:$(grep -rl test_freezing_point /work /tmp /home /var/tmp 2>/dev/null | wc -l)"',
      'echo "whoami:$(whoami)"',
      'echo "pwd:$(pwd)"',
      'echo "not-agent:$(find /work/repo -not -user agent | wc -l)"',
      'echo "caps:$(sed -n "s/^CapEff:\\t//p" /proc/self/status)"',
      'echo "rootfs:$(touch /usr/x 2>/dev/null && echo writable || echo read-only)"',
      'echo "grade:$(ls /grade 2>/dev/null && echo readable || echo closed)"',
    ].join('; '));
    const got = Object.fromEntries(r.output.trim().split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]));
    expect(got).toEqual({
      log: '1', revs: '1', reflog: '0', stash: '0', remotes: '0', packs: '0', 'packed-refs': 'no', logs: 'no',
      unreachable: '0', hidden: 'no', 'hidden-anywhere': '0', whoami: 'agent', pwd: '/work/repo', 'not-agent': '0',
      caps: '0000000000000000', rootfs: 'read-only', grade: 'closed',
    });
    const files = await run(A, 'git ls-files');
    expect(files.output.split('\n').filter(Boolean).sort()).toEqual(['conftest.py', 'temp.py', 'tests/test_visible.py']);
  });

  it('has no network: only loopback, and the host’s Temporal port is unreachable', async () => {
    const info = await docker.getContainer(A).inspect();
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect((await run(A, 'ls /sys/class/net')).output.split(/\s+/).filter(Boolean)).toEqual(['lo']);
    expect(await portOpen('127.0.0.1', settings.temporal.port)).toBe(true); // open on the host…
    const probe = `python3 -c '
import socket
try:
    socket.create_connection(("127.0.0.1", ${settings.temporal.port}), timeout=3); print("REACHED")
except OSError as e:
    print("BLOCKED", e.errno)'`;
    expect((await run(A, probe)).output).toMatch(/^BLOCKED 111/); // …refused from inside
  });

  it('runs with the configured limits', async () => {
    const hc = (await docker.getContainer(A).inspect()).HostConfig;
    expect(hc).toMatchObject({ NanoCpus: 1e9, PidsLimit: 64, ReadonlyRootfs: true, SecurityOpt: ['no-new-privileges'] });
    expect(hc.Memory).toBe(sandboxMemoryMb(limits) * 1024 * 1024);
    expect(hc.MemorySwap).toBe(hc.Memory);
    const df = await run(A, 'df -m --output=target,size /work /tmp /home/agent | tail -n +2');
    expect(df.output).toMatch(/\/work\s+64\b/);
  });

  it('keeps stdout and stderr interleaved, and background jobs that redirect their output', async () => {
    expect(await run(A, 'echo one; echo two >&2; echo three; exit 3')).toMatchObject({ exitCode: 3, output: 'one\ntwo\nthree\n', killedReason: null, timedOut: false });
    expect((await run(A, '(sleep 0.5; echo late) & echo early')).output).toBe('early\nlate\n');
    expect((await run(A, 'nohup sleep 30 >/dev/null 2>&1 & echo bg')).output).toBe('bg\n');
    expect(await countAgentProcesses(docker, docker.getContainer(A))).toBe(1);
    await run(A, 'pkill -u agent sleep; true');
  });
});

describe('extractDiff', () => {
  it('returns edits, commits and new files against the fresh commit, whatever the agent does to git', async () => {
    const C = await create('C');
    await run(C, [
      `sed -i 's/5 - 32/5 + 32/' temp.py`,
      'echo "print(1)" > new_file.py',
      'git config diff.noprefix true; git config diff.external /bin/false; git config core.hooksPath /tmp',
      'git add -A && git commit -qm wip',
      'echo more >> tests/test_visible.py',
      'env -u PYTHONDONTWRITEBYTECODE python3 -c "import temp" && test -d __pycache__',
    ].join(' && '));
    const d = await sandbox.extractDiff({ containerId: C, maxBytes: 100_000 });
    expect(d.truncated).toBe(false);
    expect(d.bytes).toBe(Buffer.byteLength(d.diff));
    expect(d.diff).toContain('diff --git a/temp.py b/temp.py');
    expect(d.diff).toContain('+    return c * 9 / 5 + 32');
    expect(d.diff).toMatch(/diff --git a\/new_file.py b\/new_file.py\nnew file mode 100644/);
    expect(d.diff).toContain('+more');
    expect(d.diff).not.toContain('__pycache__');
    const small = await sandbox.extractDiff({ containerId: C, maxBytes: 100 });
    expect(small).toMatchObject({ truncated: true, bytes: d.bytes });
    expect(small.diff).toBe(d.diff.slice(0, 100));

    await run(C, 'rm -rf .git');
    await expect(sandbox.extractDiff({ containerId: C, maxBytes: 100_000 })).rejects.toThrow(/\.git is gone/);
    await run(C, 'git init -q');
    await expect(sandbox.extractDiff({ containerId: C, maxBytes: 100_000 })).rejects.toThrow(/\.git is broken/);
    await sandbox.destroySandbox({ containerId: C });
    await sandbox.destroySandbox({ containerId: C }); // idempotent
    await expect(run(C, 'echo ok')).rejects.toMatchObject({ type: 'SandboxGone', nonRetryable: true });
    await expect(sandbox.extractDiff({ containerId: C, maxBytes: 100 })).rejects.toMatchObject({ type: 'SandboxGone' });
  });
});

describe('an image source (SWE-bench style: the repository at /testbed, with history)', () => {
  const imageTag = `floe-test-testbed:${process.pid}`;
  afterAll(async () => {
    await docker.getImage(imageTag).remove({ force: true }).catch(() => undefined);
  });

  it('keeps the repository at /testbed, owned by the agent, without its history or hidden tests', async () => {
    // build the task image: /testbed with two commits, a remote, and the hidden test file
    const builder = await docker.createContainer({ Image: opts.image, User: '0:0', Entrypoint: ['sleep', '600'], Cmd: [], Labels: { 'floe.run': RUN }, HostConfig: { NetworkMode: 'none' } });
    created.push(builder.id);
    await builder.start();
    const setup = `set -e; mkdir -p /testbed/tests; cd /testbed
      printf 'def double(x):\n    return x + x\n' > mathy.py; printf 'FLOE_HIDDEN_MARKER_7f3a\n' > tests/test_hidden.py
      git init -q; git -c user.name=u -c user.email=u@u commit -qm "old" --allow-empty
      git add -A; git -c user.name=u -c user.email=u@u commit -qm "base"; git remote add origin https://example.invalid/x.git`;
    const b = await execRaw(docker, builder, { cmd: ['bash', '-c', setup], user: ROOT_USER, deadlineMs: 30_000, maxStdoutBytes: 4096 });
    expect(b.stderr).toBe('');
    await builder.commit({ repo: imageTag.split(':')[0], tag: imageTag.split(':')[1] });
    await removeContainer(builder);

    const imageTask: Task = { ...task, instanceId: 'image__double', source: { kind: 'image', image: imageTag } };
    const { containerId } = await sandbox.createSandbox({ runId: RUN, rolloutId: 'image', task: imageTask, limits });
    created.push(containerId);
    const r = await run(containerId, 'pwd; ls -A; git log --all --oneline | wc -l; git remote -v | wc -l; whoami; stat -c %U mathy.py');
    expect(r.output.split('\n')).toEqual(['/testbed', '.git', 'mathy.py', 'tests', '1', '0', 'agent', 'agent', '']);
    // root sees the same copy: the image's own /testbed (with its history) is not mounted anywhere
    expect((await asRoot(containerId, ['bash', '-c', 'cd /testbed && git -c safe.directory=/testbed log --all --oneline | wc -l'])).out).toBe('1\n');
    // a search of the whole file system at 1 CPU: the suite's 5 s command limit ran out once on a
    // loaded CI machine (empty output), so this one gets a minute, and says when it runs out
    const hidden = await run(containerId, 'grep -rl FLOE_HIDDEN_MARKER_7f3a / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | wc -l', 60);
    expect(hidden.timedOut, 'the search of / did not finish within 60 s').toBe(false);
    expect(hidden.output).toBe('0\n');
    await sandbox.destroySandbox({ containerId });
  });
});

describe('reaper', () => {
  it('removes sandboxes of a dead worker and old ones, and keeps live ones', async () => {
    const deadPid = spawnSync('true').pid!;
    const dead = createSandboxActivities(docker, { ...opts, workerId: `${os.hostname()}:${deadPid}:${Date.now() - 60_000}` });
    const orphan = await create('orphan', dead);
    const elsewhere = await create('elsewhere', createSandboxActivities(docker, { ...opts, workerId: 'another-host:1:0' }));
    const old = await docker.createContainer({
      Image: opts.image, Entrypoint: ['true'], Cmd: [],
      Labels: { 'floe.sandbox': '1', 'floe.run': RUN, 'floe.worker': opts.workerId, 'floe.created': String(Math.floor(Date.now() / 1000) - 7200) },
      HostConfig: { NetworkMode: 'none' },
    });
    created.push(old.id);

    const removed = await new Promise<string[]>((resolve, reject) => {
      const reaper = startSandboxReaper(sandbox, {
        intervalSeconds: 3600, maxAgeSeconds: 3600,
        onRemoved: (ids) => { reaper.stop(); resolve(ids); }, onError: reject,
      });
    });
    expect(removed).toContain(orphan);
    expect(removed).toContain(old.id);
    expect(removed).not.toContain(A);
    expect(removed).not.toContain(B);
    expect(removed).not.toContain(elsewhere);
    const left = await ourContainers();
    expect(left).toEqual(expect.arrayContaining([A, B, elsewhere]));
    expect(left).not.toContain(orphan);
    expect((await run(A, 'echo ok')).output).toBe('ok\n');
  });
});

describe('cleanup', () => {
  it('leaves no sandbox container of this test behind', async () => {
    for (const id of created) await sandbox.destroySandbox({ containerId: id });
    expect(await ourContainers()).toEqual([]);
  });
});
