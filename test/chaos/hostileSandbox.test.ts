import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { dockerFromSettings } from '../../infra/docker.js';
import { sandboxImageTag } from '../../infra/components/image.js';
import { loadSettings, repoRoot } from '../../infra/settings.js';
import { loadToySuite } from '../../tasks/loaders.js';
import type { Task } from '../../core/taskModel.js';
import { parseRunConfig } from '../../core/config.js';
import { CONTROL_QUEUE } from '../../core/taskQueues.js';
import { renderToolCall, type ToolCall } from '../../core/tools.js';
import { sandboxMemoryMb, type ExecResult, type SandboxLimits } from '../../core/sandboxPolicy.js';
import { createSandboxActivities, workerIdentity } from '../../activities/sandbox/index.js';
import { ROOT_USER, countAgentProcesses, execRaw } from '../../activities/sandbox/exec.js';
import { removeContainer } from '../../activities/sandbox/containerSpec.js';
import { createTaskActivities } from '../../activities/tasks.js';
import { insertRun } from '../../store/runs.js';
import { getGateDecision, listRollouts, listTurns } from '../../store/rollouts.js';
import type { RolloutInput, RolloutResult } from '../../workflows/rollout.js';
import type { RolloutSettings } from '../../core/contracts.js';
import { chaosCase } from '../helpers/chaos.js';
import { withWorkers } from '../helpers/platform.js';
import { startScriptedEngine, scriptedRolloutSettings, type ScriptedOutput } from '../helpers/scriptedEngine.js';

/** Chaos, hostile sandboxes (issue 17): an agent's command that attacks its sandbox, its
 *  neighbours or the host — a fork bomb, a memory hog, a disk filler, endless output, a process
 *  that ignores SIGTERM, a command that never returns, processes left behind, a user namespace,
 *  the network, the container engine's socket, the host's files, other processes' /proc, another
 *  sandbox's files — against real podman. Each case proves what contained it (a cgroup limit,
 *  the command timeout, the seccomp profile, a namespace), that the caller's result says so,
 *  and that a sibling sandbox kept answering meanwhile; one case runs the hazards as a real
 *  rollout's tool calls and reads each containment back from its record in Postgres beside a
 *  concurrent gold rollout that passes; the last proves no container or process of the file is
 *  left on the host. Every case is recorded in the chaos summary (test/helpers/chaos.ts). */

const settings = loadSettings();
const docker = dockerFromSettings(settings);
const RUN = `test-hostile-${process.pid}-${Date.now()}`;
const opts = { host: 'test', image: sandboxImageTag(settings), workerId: workerIdentity() };
const sandbox = createSandboxActivities(docker, opts);
const limits: SandboxLimits = { cpus: 1, memoryMb: 128, pidsLimit: 64, diskMb: 64, commandTimeoutSeconds: 5, maxOutputBytes: 8192 };
const toy = loadToySuite({ onBadRow: 'fail' }).tasks;
const task: Task = toy.find((t) => t.instanceId === 'toy__c_to_f')!;
const created: string[] = [];
const tag = crypto.randomBytes(6).toString('hex');
/** The hazards' sandbox and its sibling, which must keep answering throughout. */
let A = '';
let B = '';

async function create(rollout: string): Promise<string> {
  const { containerId } = await sandbox.createSandbox({ runId: RUN, rolloutId: rollout, task, limits });
  created.push(containerId);
  return containerId;
}

function run(containerId: string, command: string, timeoutSeconds = limits.commandTimeoutSeconds): Promise<ExecResult> {
  return sandbox.execInSandbox({ containerId, command, timeoutSeconds, maxOutputBytes: limits.maxOutputBytes });
}

async function asRoot(containerId: string, script: string): Promise<string> {
  const r = await execRaw(docker, docker.getContainer(containerId), { cmd: ['bash', '-c', script], user: ROOT_USER, deadlineMs: 10_000, maxStdoutBytes: 64 * 1024 });
  return r.stdout.toString('utf8');
}

async function ourContainers(): Promise<string[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [`floe.run=${RUN}`] } });
  return list.map((c) => c.Id);
}

function hostPids(): string[] {
  return fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n));
}

function readProc(pid: string, file: string): string {
  try { return fs.readFileSync(`/proc/${pid}/${file}`, 'utf8'); } catch { return ''; }
}

/** Host processes whose argv is exactly `argv` (podman runs the containers on this host). */
function hostProcessesWithArgv(argv: string[]): string[] {
  const want = `${argv.join('\0')}\0`;
  return hostPids().filter((p) => readProc(p, 'cmdline') === want);
}

/** Host processes in the cgroup of any of these containers. */
function hostProcessesOf(containerIds: string[]): string[] {
  return hostPids().filter((p) => { const cg = readProc(p, 'cgroup'); return containerIds.some((id) => cg.includes(id)); });
}

/** Processes floe's own execs can attach to a container beyond its pids limit (see contained). */
const EXEC_ATTACH_SLACK = 6;

/** A number a container's cgroup keeps, read on the host (podman's cgroupfs layout): the
 *  cgroup v1 controller's file, else the unified (v2) one; null where neither is there. */
function cgroupNumber(containerId: string, v1: { controller: string; file: string }, v2file: string): number | null {
  for (const f of [`/sys/fs/cgroup/${v1.controller}/libpod_parent/libpod-${containerId}/${v1.file}`, `/sys/fs/cgroup/libpod_parent/libpod-${containerId}/${v2file}`]) {
    if (fs.existsSync(f)) return Number(fs.readFileSync(f, 'utf8').trim());
  }
  return null;
}

/** Most processes a container's pids cgroup ever held. */
const pidsPeak = (containerId: string) => cgroupNumber(containerId, { controller: 'pids', file: 'pids.peak' }, 'pids.peak');

/** The most memory a container's cgroup ever held, and its limit, in MiB (what contains a
 *  memory hog: the container's own cgroup, whatever else the host runs). */
function memoryOf(containerId: string): { peakMb: number; limitMb: number } | null {
  const peak = cgroupNumber(containerId, { controller: 'memory', file: 'memory.max_usage_in_bytes' }, 'memory.peak');
  const limit = cgroupNumber(containerId, { controller: 'memory', file: 'memory.limit_in_bytes' }, 'memory.max');
  return peak === null || limit === null ? null : { peakMb: peak / MiB, limitMb: limit / MiB };
}
const MiB = 1024 * 1024;

/** Run `body` while `sibling` answers `echo ok` in a loop: every answer right, none slow. */
async function besideSibling<T>(sibling: string, body: () => Promise<T>): Promise<{ value: T; pings: number }> {
  let done = false;
  const pings: { ok: boolean; ms: number }[] = [];
  const pinger = (async () => {
    while (!done) {
      const t = Date.now();
      const r = await run(sibling, 'echo ok', 10);
      pings.push({ ok: r.exitCode === 0 && r.output === 'ok\n', ms: Date.now() - t });
      await new Promise((res) => setTimeout(res, 100));
    }
  })();
  let value: T;
  try {
    value = await body();
  } finally {
    done = true;
    await pinger;
  }
  expect(pings.length).toBeGreaterThan(0);
  expect(pings.every((p) => p.ok)).toBe(true);
  expect(Math.max(...pings.map((p) => p.ms))).toBeLessThan(5000);
  return { value, pings: pings.length };
}

/** One command in `inside` (A) beside a working sibling (B): for probes that take nothing. */
async function probe(command: string, o: { inside?: string; sibling?: string; timeoutSeconds?: number } = {}): Promise<ExecResult> {
  const { value } = await besideSibling(o.sibling ?? B, () => run(o.inside ?? A, command, o.timeoutSeconds ?? 30));
  expect(value.timedOut, `${command}: ${value.output}`).toBe(false);
  return value;
}

/** Run a hazard in A while B answers `echo ok` in a loop; then read what A's cgroup held. */
async function contained(command: string, timeoutSeconds: number) {
  const started = Date.now();
  const outcome = await besideSibling(B, () => run(A, command, timeoutSeconds));
  const result = outcome.value;
  const wallMs = Date.now() - started;
  // A's own cgroup: its memory limit is the one floe set, and it never held more than that
  // (the kernel's high-water mark); nothing else on the host counts here
  const memory = memoryOf(A);
  expect(memory, `no memory cgroup files for container ${A} under /sys/fs/cgroup`).not.toBeNull();
  expect(memory!.limitMb).toBe(sandboxMemoryMb(limits));
  expect(memory!.peakMb).toBeLessThanOrEqual(memory!.limitMb);
  // pids.max stops forks, not attaches: "it is not possible to violate a cgroup PID policy
  // through fork() or clone()", but attaching processes can take pids.current past pids.max
  // (linux Documentation/admin-guide/cgroup-v2.rst, PID controller). A podman exec attaches its
  // process (and runc's init) to the container's cgroup, and floe's own execs into A while a
  // bomb holds every pid (the timeout's cleanup, the counters) add up to a few: 64 + 3 = 67 was
  // seen in CI. pids.peak is a high-water mark, so it keeps that for the later hazards too.
  const peak = pidsPeak(A);
  expect(peak, `no pids cgroup files for container ${A} under /sys/fs/cgroup`).not.toBeNull();
  expect(peak!).toBeLessThanOrEqual(limits.pidsLimit + EXEC_ATTACH_SLACK);
  // the command never outlived its timeout by much, and nothing of it survives
  expect(wallMs).toBeLessThan((timeoutSeconds + 8) * 1000);
  expect(await countAgentProcesses(docker, docker.getContainer(A))).toBe(0);
  const after = await run(A, 'echo ok');
  expect(after).toMatchObject({ exitCode: 0, output: 'ok\n', killedReason: null });
  return { result, wallMs, facts: { exitCode: result.exitCode, killedReason: result.killedReason, timedOut: result.timedOut, wallMs, siblingPings: outcome.pings, containerMemPeakMb: Math.round(memory!.peakMb), containerPidsPeak: peak! } };
}

/** The host's default gateway (/proc/net/route), or null on a host without one. */
function hostGateway(): string | null {
  for (const line of fs.readFileSync('/proc/net/route', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[1] === '00000000' && f[2] && f[2] !== '00000000') {
      const n = parseInt(f[2], 16);
      return [n & 255, (n >> 8) & 255, (n >> 16) & 255, n >>> 24].join('.');
    }
  }
  return null;
}

function hostAddress(): string | null {
  return Object.values(os.networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal)?.address ?? null;
}

beforeAll(async () => {
  [A, B] = await Promise.all([create('A'), create('B')]);
});

afterAll(async () => {
  for (const id of [...created, ...(await ourContainers())]) await removeContainer(docker.getContainer(id));
});

describe('a hostile sandbox: the doors it tries are shut', () => {
  chaosCase('hostile-sandbox', 'the network: no route out, only loopback', async () => {
    const info = await docker.getContainer(A).inspect();
    expect(info.HostConfig.NetworkMode).toBe('none');
    const targets: [string, number][] = [['1.1.1.1', 443], ['8.8.8.8', 53]];
    const gateway = hostGateway();
    const address = hostAddress();
    if (gateway) targets.push([gateway, 80]);
    if (address) targets.push([address, settings.postgres.port]);
    const r = await probe([
      'echo "ifaces $(ls /sys/class/net | tr "\\n" " ")"',
      'echo "routes $(tail -n +2 /proc/net/route | wc -l)"',
      `python3 -c '
import socket
for host, port in ${JSON.stringify(targets)}:
    try:
        socket.create_connection((host, port), timeout=3); print("tcp", host, "REACHED")
    except OSError as e:
        print("tcp", host, "errno", e.errno)
try:
    socket.getaddrinfo("github.com", 443); print("dns REACHED")
except OSError as e:
    print("dns failed")
'`,
      'curl -sS -m 3 http://1.1.1.1/ 2>&1 | head -1; echo "curl rc ${PIPESTATUS[0]}"',
    ].join('; '));
    expect(r.output).toMatch(/^ifaces lo \n/);
    expect(r.output).toMatch(/^routes 0$/m);
    const tcp = [...r.output.matchAll(/^tcp (\S+) (.*)$/gm)].map((m) => [m[1], m[2]]);
    // ENETUNREACH: with only lo there is no route to any address that is not its own
    expect(tcp).toEqual(targets.map(([h]) => [h, 'errno 101']));
    expect(r.output).toMatch(/^dns failed$/m);
    expect(r.output).toMatch(/Network is unreachable|Couldn't connect/);
    expect(r.output).toMatch(/^curl rc 7$/m);
    return { detail: `network mode none: only lo, no route; connect() to ${targets.map(([h]) => h).join(', ')} fails with ENETUNREACH, DNS fails, curl exits 7`, facts: { targets: targets.map(([h, p]) => `${h}:${p}`) } };
  });

  chaosCase('hostile-sandbox', 'the container engine\'s socket: none inside', async () => {
    // the socket is real on the host…
    expect(fs.statSync(settings.docker.socket).isSocket()).toBe(true);
    const info = await docker.getContainer(A).inspect();
    expect(info.Mounts ?? []).toEqual([]);
    expect(info.HostConfig.Binds ?? []).toEqual([]);
    const paths = ['/var/run/docker.sock', '/run/docker.sock', '/run/podman/podman.sock', '/var/run/podman/podman.sock', settings.docker.socket];
    // …and nowhere inside: not at its own path, not at the engines' usual ones, no socket at all
    const r = await probe([
      `for p in ${paths.join(' ')}; do [ -e "$p" ] && echo "present $p"; done`,
      `python3 -c '
import socket
for p in ${JSON.stringify(paths)}:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p); print("connected", p)
    except OSError as e:
        print("refused", p, e.errno)
'`,
      'find / \\( -path /proc -o -path /sys \\) -prune -o \\( -type s -o -name "*.sock" \\) -print 2>/dev/null | sed "s/^/socket /"',
      'echo end',
    ].join('; '));
    expect(r.output).not.toMatch(/^present /m);
    expect(r.output).not.toMatch(/^connected /m);
    expect(r.output).not.toMatch(/^socket /m);
    expect([...r.output.matchAll(/^refused (\S+) (\d+)$/gm)].map((m) => [m[1], m[2]])).toEqual(paths.map((p) => [p, '2']));
    expect(r.output).toMatch(/^end$/m);
    return { detail: `no bind mount: ${paths.length} engine socket paths (floe's ${settings.docker.socket} among them) absent, connect() ENOENT, no socket anywhere in the file system`, facts: { paths } };
  });

  chaosCase('hostile-sandbox', 'the host\'s files: nothing of the host is mounted', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-hostile-'));
    const name = `floe-host-marker-${tag}`;
    const secret = `FLOE_HOST_SECRET_${tag}`;
    fs.writeFileSync(path.join(dir, name), `${secret}\n`);
    try {
      expect(fs.existsSync(path.join(dir, name))).toBe(true);
      const r = await probe([
        `for p in ${dir}/${name} ${dir} ${repoRoot}/package.json ${settings.home} ${settings.docker.socket}; do [ -e "$p" ] && echo "present $p"; done`,
        `find / \\( -path /proc -o -path /sys \\) -prune -o -name '${name}' -print 2>/dev/null | sed "s/^/found /"`,
        `grep -rls '${secret}' /tmp /work /home /var/tmp /run /etc /root /mnt /srv /opt 2>/dev/null | sed "s/^/found /"`,
        'cat /etc/shadow >/dev/null 2>&1; echo "shadow rc $?"',
        'echo "work $(ls -A /work | tr "\\n" " ")"',
        'cat /proc/mounts | sed "s/^/mount /"',
      ].join('; '), { timeoutSeconds: 60 });
      expect(r.output).not.toMatch(/^present /m);
      expect(r.output).not.toMatch(/^found /m);
      expect(r.output).toMatch(/^shadow rc 1$/m);
      expect(r.output).toMatch(/^work repo $/m);
      // the container's /etc/shadow is the image's, not the host's
      expect(await asRoot(A, 'cat /etc/shadow')).not.toBe(fs.readFileSync('/etc/shadow', 'utf8'));
      // every mount is the image's root, a kernel file system, a tmpfs of the spec, or one of
      // the engine's own per-container files (hostname, hosts, resolv.conf, .containerenv)
      const mounts = [...r.output.matchAll(/^mount (\S+) (\S+) (\S+)/gm)].map((m) => ({ source: m[1], target: m[2], type: m[3] }));
      expect(mounts.length).toBeGreaterThan(5);
      const KERNEL = new Set(['proc', 'sysfs', 'devpts', 'mqueue', 'cgroup', 'cgroup2', 'tmpfs', 'devtmpfs', 'securityfs', 'pstore', 'bpf']);
      const ENGINE_FILES = new Set(['/etc/hostname', '/etc/hosts', '/etc/resolv.conf', '/run/.containerenv']);
      const other = mounts.filter((m) => !(m.target === '/' && m.type === 'overlay') && !KERNEL.has(m.type) && !ENGINE_FILES.has(m.target));
      expect(other).toEqual([]);
      return { detail: 'no bind mount: a marker written on the host (and floe\'s repo, home and socket) is at no path inside; /etc/shadow is the image\'s and unreadable to the agent; mounts are the image, kernel file systems, the spec\'s tmpfs and the engine\'s own per-container files', facts: { mounts: mounts.map((m) => `${m.target} ${m.type}`) } };
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  chaosCase('hostile-sandbox', '/proc of other processes: only the sandbox\'s own', async () => {
    const me = String(process.pid);
    const r = await probe([
      'for p in /proc/[0-9]*; do echo "proc ${p#/proc/} $(tr "\\0" " " < $p/cmdline 2>/dev/null)"; done',
      `[ -e /proc/${me} ] && echo "test-pid $(tr "\\0" " " < /proc/${me}/cmdline)"`,
      `kill -0 ${me} 2>&1 | sed "s/^/kill-test /"`,
      'kill -9 1 2>&1 | sed "s/^/kill-init /"',
      'ls /proc/1/root/ >/dev/null 2>&1; echo "init-root rc $?"',
      'echo end',
    ].join('; '));
    const procs = [...r.output.matchAll(/^proc (\d+) (.*)$/gm)].map((m) => ({ pid: Number(m[1]), cmd: m[2] }));
    const hostCount = hostPids().length;
    // a handful: the keeper, this command's shell and wrapper; the host has many more
    expect(procs.length).toBeGreaterThan(1);
    expect(procs.length).toBeLessThan(limits.pidsLimit);
    expect(hostCount).toBeGreaterThan(procs.length * 3);
    expect(procs[0]).toMatchObject({ pid: 1, cmd: expect.stringMatching(/^bash -c trap "" /) });
    // nothing of the host: not the test process, not node, not podman or conmon
    for (const p of procs) expect(p.cmd).not.toMatch(/node|vitest|podman|conmon|temporal|postgres/);
    expect(r.output).not.toMatch(/^test-pid .*(node|vitest)/m);
    // (a pid of the sandbox's own may happen to equal the test's: then kill -0 is its business)
    if (!/^test-pid /m.test(r.output)) expect(r.output).toMatch(/^kill-test .*No such process/m);
    expect(r.output).toMatch(/^kill-init .*Operation not permitted/m);
    expect(r.output).toMatch(/^init-root rc [12]$/m);
    expect((await run(A, 'echo ok')).output).toBe('ok\n'); // the keeper lives
    return { detail: `PID namespace: ${procs.length} processes in /proc (PID 1 the keeper) against ${hostCount} on the host; the test's pid ${me} is not there; the keeper cannot be signalled nor its root read`, facts: { sandboxProcs: procs.length, hostProcs: hostCount } };
  });

  chaosCase('hostile-sandbox', 'another sandbox\'s files: invisible by any path', async () => {
    const C = await create('C');
    const name = `floe-sibling-marker-${tag}`;
    const secret = `FLOE_SIBLING_SECRET_${tag}`;
    const places = ['/work/repo', '/work', '/tmp', '/home/agent', '/var/tmp'];
    const written = await run(C, `for d in ${places.join(' ')}; do echo ${secret} > $d/${name}; done; cd /tmp; nohup sleep 4244 >/dev/null 2>&1 & echo written`);
    expect(written).toMatchObject({ output: 'written\n', timedOut: false });
    const look = [
      `find / \\( -path /proc -o -path /sys \\) -prune -o -name '${name}' -print 2>/dev/null | sed "s/^/found /"`,
      `cat /proc/[0-9]*/root{${places.join(',')}}/${name} 2>/dev/null | sed "s/^/via-proc /"`,
      `grep -rls '${secret}' /work /tmp /home /var/tmp /run 2>/dev/null | sed "s/^/found /"`,
      'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done | grep -c "^sleep 4244" | sed "s/^/sleepers /"',
    ].join('; ');
    // the look finds all of them where they are (C)…
    const inC = await run(C, look, 30);
    expect(inC.output.match(/^found /gm)?.length).toBe(places.length * 2);
    expect(inC.output.match(/^via-proc /gm)?.length).toBeGreaterThanOrEqual(places.length);
    expect(inC.output).toMatch(/^sleepers 1$/m);
    // …and none of them from B, while C's process is running
    const fromB = await probe(look, { inside: B, sibling: A });
    expect(fromB.output).not.toMatch(/^found /m);
    expect(fromB.output).not.toMatch(/^via-proc /m);
    expect(fromB.output).toMatch(/^sleepers 0$/m);
    await sandbox.destroySandbox({ containerId: C });
    return { detail: `mount and PID namespaces: a marker in C's ${places.join(', ')} and C's running process, all found by the same look inside C, are at no path in B (find, grep, /proc/*/root)`, facts: { places } };
  });

  chaosCase('hostile-sandbox', 'user-namespace creation: refused by floe\'s seccomp profile', async () => {
    const r = await probe('unshare -r true; echo "rc $?"; unshare -r id -u; echo "rc $?"');
    const codes = [...r.output.matchAll(/^rc (\d+)$/gm)].map((m) => Number(m[1]));
    expect(codes).toHaveLength(2);
    for (const c of codes) expect(c, r.output).not.toBe(0);
    // the profile's answer to a CLONE_NEW* flag: the default action's errno (ENOSYS in podman's
    // default profile) or EPERM
    const why = /unshare failed: (Function not implemented|Operation not permitted)/.exec(r.output);
    expect(why, r.output).not.toBeNull();
    expect(r.output).not.toMatch(/^0$/m);
    return { detail: `seccomp profile: unshare -r exits ${codes.join(', ')} (unshare failed: ${why![1]}); no uid 0 in a namespace of its own`, facts: { exitCodes: codes } };
  });
});

describe('a hostile sandbox: each hazard is stopped and reported, beside a working sandbox', () => {
  chaosCase('hostile-sandbox', 'a fork bomb hits the pids limit and is cleaned up', async () => {
    // every process forks in a loop, so the bomb cannot die out by itself before the limit
    // (the classic `:(){ :|:& };:` sometimes did, its exec ending at once with exit 0: CI, 2026-12-03)
    const { result, facts } = await contained('f(){ while :; do f & done; }; f', 4);
    expect(result).toMatchObject({ killedReason: 'pids', timedOut: true, exitCode: 137 });
    expect(result.output).toMatch(/Resource temporarily unavailable/);
    return { detail: `pids limit ${limits.pidsLimit}: forks refused, killed at the 4 s timeout (killedReason pids, exit 137), every process gone`, facts: { ...facts, pidsPeak: pidsPeak(A) } };
  });

  chaosCase('hostile-sandbox', 'a memory hog is OOM-killed', async () => {
    const { result, facts } = await contained(`python3 -c "b = b'x' * (1 << 30); print(len(b))"`, 20);
    expect(result).toMatchObject({ killedReason: 'oom', exitCode: 137, timedOut: false });
    return { detail: `memory cgroup (${sandboxMemoryMb(limits)} MB with the tmpfs): a 1 GiB allocation OOM-killed (killedReason oom, exit 137)`, facts };
  });

  chaosCase('hostile-sandbox', 'a disk filler runs out of space in /work and /tmp', async () => {
    const { result, facts } = await contained('dd if=/dev/zero of=/work/repo/big bs=1M count=2000 2>&1 | head -1; dd if=/dev/zero of=/tmp/big bs=1M count=2000 2>&1 | head -1; du -m /work/repo/big /tmp/big', 20);
    expect(result.output).toMatch(/\/work\/repo\/big': No space left on device/);
    expect(result.output).toMatch(/\/tmp\/big': No space left on device/);
    const sizes = [...result.output.matchAll(/^(\d+)\s+(\S+)$/gm)].map((m) => Number(m[1]));
    expect(sizes).toHaveLength(2);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(limits.diskMb);
    expect((await run(A, 'rm -f /work/repo/big /tmp/big && echo removed')).output).toBe('removed\n');
    return { detail: `size-limited tmpfs: 2000 MB writes stop at ${sizes.join(' and ')} MB with "No space left on device" in the output`, facts: { ...facts, writtenMb: sizes } };
  });

  chaosCase('hostile-sandbox', 'endless output is cut at the cap and the command killed', async () => {
    const { result, wallMs, facts } = await contained('yes', 20);
    expect(result).toMatchObject({ killedReason: 'output_limit', truncated: true, timedOut: false, exitCode: 137 });
    expect(Buffer.byteLength(result.output)).toBe(limits.maxOutputBytes);
    expect(result.outputBytes).toBeGreaterThan(limits.maxOutputBytes);
    expect(wallMs).toBeLessThan(5000);
    return { detail: `output cap: ${limits.maxOutputBytes} bytes kept of ${result.outputBytes} seen, killed at the flood threshold in ${wallMs} ms (killedReason output_limit, truncated, exit 137)`, facts };
  });

  chaosCase('hostile-sandbox', 'a command past its timeout dies with its setsid escapees', async () => {
    const { result, facts } = await contained('setsid sleep 1000 & nohup sleep 999 >/dev/null 2>&1 & echo started; sleep 1000', 2);
    expect(result).toMatchObject({ killedReason: 'timeout', timedOut: true, exitCode: 137, output: 'started\n' });
    expect(result.durationMs).toBeGreaterThanOrEqual(2000);
    return { detail: 'command timeout 2 s: killed with SIGKILL, its setsid and nohup escapees killed by the cleanup (killedReason timeout, exit 137)', facts };
  });

  chaosCase('hostile-sandbox', 'a process that ignores SIGTERM is killed anyway at the timeout', async () => {
    const cmd = `trap '' TERM INT HUP; python3 -c 'import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)]; print("ignoring", flush=True); time.sleep(1000)' & sleep 1000`;
    const { result, wallMs, facts } = await contained(cmd, 2);
    expect(result).toMatchObject({ killedReason: 'timeout', timedOut: true, exitCode: 137, output: 'ignoring\n' });
    expect(result.durationMs).toBeGreaterThanOrEqual(2000);
    expect(result.durationMs).toBeLessThan(2000 + 3000);
    return { detail: `command timeout 2 s: SIGKILL (timeout -s KILL, then kill -9 -1), which no trap can ignore; returned in ${result.durationMs} ms (killedReason timeout, exit 137)`, facts: { ...facts, wallMs } };
  });

  chaosCase('hostile-sandbox', 'a command that never returns dies at the timeout', async () => {
    const { result, facts } = await contained('rm -f /tmp/never; mkfifo /tmp/never; echo waiting; read -r line < /tmp/never; echo "never $line"', 2);
    expect(result).toMatchObject({ killedReason: 'timeout', timedOut: true, exitCode: 137, output: 'waiting\n' });
    expect(result.durationMs).toBeGreaterThanOrEqual(2000);
    expect(result.durationMs).toBeLessThan(2000 + 3000);
    return { detail: `command timeout 2 s: a read on a FIFO no one writes killed in ${result.durationMs} ms (killedReason timeout, exit 137)`, facts };
  });

  chaosCase('hostile-sandbox', 'processes left behind: on the output pipe they die at the timeout; detached they die with the sandbox', async () => {
    // (sleep &) and nohup without a redirect keep the command's output pipe: the command counts
    // as running until its timeout, then everything of it is killed
    const held = await contained('(sleep 4242 &); nohup sleep 4243 & echo done', 2);
    expect(held.result).toMatchObject({ killedReason: 'timeout', timedOut: true, exitCode: 137 });
    expect(held.result.output).toMatch(/^done\n/);
    // detached (its output redirected) it outlives its command — a server for the next command
    // — bounded by the sandbox's limits, and it goes with the sandbox: nothing outlives a rollout
    const C = await create('C-left');
    const { value: left } = await besideSibling(B, () => run(C, 'nohup sleep 4245 >/dev/null 2>&1 & echo done'));
    expect(left).toMatchObject({ exitCode: 0, output: 'done\n', timedOut: false, killedReason: null });
    expect((await run(C, 'ps -eo user=,args= | grep "^agent *sleep 4245$" | wc -l')).output).toBe('1\n');
    const onHost = hostProcessesWithArgv(['sleep', '4245']);
    expect(onHost.length).toBe(1);
    expect(hostProcessesOf([C])).toContain(onHost[0]);
    await sandbox.destroySandbox({ containerId: C });
    expect(hostProcessesWithArgv(['sleep', '4245'])).toEqual([]);
    expect(hostProcessesOf([C])).toEqual([]);
    return {
      detail: `holding the output pipe: killed at the 2 s timeout (killedReason timeout); detached (output redirected): left running by floe (ps shows it after the command), inside the sandbox's cgroup limits, and gone from the host when the sandbox is destroyed (the rollout destroys it in a finally)`,
      facts: { heldMs: held.wallMs, detachedHostPid: Number(onHost[0]) },
    };
  });
});

describe('a hostile agent in a real rollout', () => {
  chaosCase('hostile-sandbox', 'a rollout of hazards ends with its gate, each containment in its record, beside a gold rollout that passes', async () => {
    const platform = await withWorkers(['control', 'sandbox']);
    const engine = await startScriptedEngine();
    const db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
    try {
      await insertRun(db, { runId: RUN, workflowId: RUN, name: 'hostile-sandbox', config: parseRunConfig({ name: 'hostile-sandbox' }) });
      await createTaskActivities(db).loadTaskPool({ source: 'toy', include: [], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
      const call = (c: ToolCall): ScriptedOutput => ({ text: renderToolCall(c) });
      const bash = (command: string) => call({ name: 'bash', arguments: { command } });
      const base = scriptedRolloutSettings(engine.url, { maxTurns: 6 });
      const hostile: RolloutSettings = { ...base, sandbox: { ...base.sandbox, commandTimeoutSeconds: 3, maxOutputBytes: 8192 } };
      const start = (rolloutId: string, t: Task, outputs: ScriptedOutput[], s: RolloutSettings): Promise<RolloutResult> => {
        engine.script(rolloutId, outputs);
        const input: RolloutInput = { runId: RUN, rolloutId, taskId: t.instanceId, groupId: `${RUN}-${t.instanceId}`, attempt: 0, purpose: 'test', settings: s };
        return platform.client.workflow.execute('rollout', { taskQueue: CONTROL_QUEUE, workflowId: `floe-rollout-${rolloutId}`, args: [input] });
      };
      const gold = toy.find((t) => t.instanceId !== task.instanceId)!;
      const [bad, good] = await Promise.all([
        start(`${RUN}-hostile`, task, [bash("trap '' TERM; sleep 1000"), bash('yes'), bash(':(){ :|:& };:'), bash('nohup sleep 4246 >/dev/null 2>&1 &'), call({ name: 'submit', arguments: {} })], hostile),
        start(`${RUN}-gold`, gold, gold.solution!.map((c) => call(c as ToolCall)), base),
      ]);
      // the hazards' rollout ran to its end and was graded: no fix, so tests_failed
      expect(bad).toMatchObject({ gate: 'tests_failed', reward: 0, nTurns: 5 });
      expect(await getGateDecision(db, bad.rolloutId)).toMatchObject({ gate: 'tests_failed', reward: 0 });
      const rows = await listRollouts(db, RUN);
      expect(rows.find((r) => r.rolloutId === bad.rolloutId)).toMatchObject({ status: 'finished', gate: 'tests_failed', reward: 0 });
      const turns = await listTurns(db, bad.rolloutId);
      expect(turns.map((t) => t.exitCode)).toEqual([137, 137, 137, 0, null]);
      const obs = turns.map((t) => t.observation ?? '');
      expect(obs[0]).toMatch(/^exit code 137 \(killed: no result within 3 s\)\n/);
      expect(obs[1]).toMatch(/^exit code 137 \(killed: too much output\)\ny\ny\n/);
      expect(obs[2]).toMatch(/^exit code 137 \(killed: no result within 3 s; killed: too many processes\)\n/);
      expect(obs[3]).toBe('exit code 0\n(no output)');
      expect(turns[4].observation).toBeNull();
      // the process it left running went with its sandbox: nothing of it outlives the rollout
      expect(hostProcessesWithArgv(['sleep', '4246'])).toEqual([]);
      // the gold rollout beside it passed
      expect(good).toMatchObject({ gate: 'passed', reward: 1 });
      expect(rows.find((r) => r.rolloutId === good.rolloutId)).toMatchObject({ status: 'finished', gate: 'passed', reward: 1 });
      return {
        detail: `rollout record: turns 0-2 exit 137 with "${obs.map((o) => o.split('\n')[0].replace(/^exit code 137 /, '')).slice(0, 3).join('", "')}"; a detached process it left gone with its sandbox; gate tests_failed, reward 0; the concurrent gold rollout of ${gold.instanceId} passed`,
        rolloutsLost: 0,
        facts: { hostile: { gate: bad.gate, nTurns: bad.nTurns }, gold: { task: gold.instanceId, gate: good.gate } },
      };
    } finally {
      await db.end();
      await engine.close();
      await platform.close();
    }
  }, 180_000);
});

describe('after the hazards', () => {
  chaosCase('hostile-sandbox', 'no container and no process of this file is left on the host', async () => {
    for (const id of created) await sandbox.destroySandbox({ containerId: id });
    expect(await ourContainers()).toEqual([]);
    expect(hostProcessesOf(created)).toEqual([]);
    for (const s of ['4242', '4243', '4244', '4245', '4246']) expect(hostProcessesWithArgv(['sleep', s]), `sleep ${s}`).toEqual([]);
    return { detail: `${created.length} sandboxes of the file and every rollout and grader container of its run removed: none labelled floe.run=${RUN} remains, no host process in their cgroups` };
  });
});
