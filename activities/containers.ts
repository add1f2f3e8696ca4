import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Task } from '../core/taskModel.js';
import { SHM_MB, patchFiles, sandboxMemoryMb, sandboxTmpfs, type SandboxLimits } from '../core/sandboxPolicy.js';

/** Docker helpers shared by the sandbox and the grader: one locked-down container recipe, one
 *  exec primitive that never hangs, and one repository setup (fresh single-commit history).
 *
 *  Measured on podman 4.3 (Docker API through dockerode, runc, cgroup v1):
 *  - HostConfig.Tmpfs accepts size, mode, nosuid, nodev, notmpcopyup and podman's `U`; it
 *    refuses `uid=`/`gid=`, and podman resets the mount root's mode to the image directory's.
 *    Ownership and mode of each mount root are therefore set after start with putArchive of a
 *    `./` entry (podman applies the entry's owner and mode to the target directory).
 *  - CapAdd is handed to non-root exec users too (the agent got CAP_DAC_READ_SEARCH and
 *    CAP_KILL as ambient capabilities), so nothing is added: CapDrop ALL, and root in the
 *    container is an ordinary user. The keeper (PID 1) runs as root so the agent cannot kill it;
 *    cleanup runs as the agent (`kill -9 -1` reaches every process of the agent in the
 *    container's PID namespace and nothing outside it).
 *  - ReadonlyRootfs makes podman add unsized tmpfs at /run and /var/tmp; they are listed with a
 *    size in sandboxTmpfs instead.
 *  - Ulimits nproc above the host's hard limit is refused; 4096 is accepted. RLIMIT_NPROC counts
 *    every uid-1000 process on the host, so it is set well above pidsLimit: the per-container
 *    pids cgroup is the real limit, and one sandbox's fork bomb cannot starve another's. */

export const AGENT_USER = '1000:1000';
export const ROOT_USER = '0:0';
export const REPO_DIR = '/work/repo';
export const SEALED_GIT_DIR = '/grade/base.git';
const MiB = 1024 * 1024;

/** PID 1: reaps orphans (killed commands leave them) and ignores every catchable signal. */
const KEEPER = 'trap "" HUP INT QUIT TERM USR1 USR2 PIPE ALRM; while :; do sleep 3600 & wait $!; done';

export const AGENT_ENV = [
  'HOME=/home/agent', 'USER=agent', 'LOGNAME=agent', 'LANG=C.UTF-8', 'TERM=dumb',
  'PAGER=cat', 'GIT_PAGER=cat', 'PYTHONDONTWRITEBYTECODE=1', 'PYTHONUNBUFFERED=1',
];

/** Heartbeat when running as a Temporal activity; a no-op when called directly. */
export function heartbeat(details?: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // not inside an activity (tests, scripts)
  }
}

/** Heartbeat every few seconds while a long call (an archive copy) runs. */
export async function keepAlive<T>(work: Promise<T>, what: string): Promise<T> {
  const beat = setInterval(() => heartbeat(what), 5000);
  try {
    return await work;
  } finally {
    clearInterval(beat);
  }
}

/** The container is gone, or stopped for good (its keeper died): a retry cannot help. */
export function isNoSuchContainer(err: unknown): boolean {
  const e = err as { statusCode?: number; message?: string };
  return e?.statusCode === 404 || /no such container|container state improper|is not running/i.test(e?.message ?? '');
}

/** A container that is gone will not come back on retry. */
export function sandboxGone(containerId: string, err: unknown): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`sandbox container ${containerId.slice(0, 12)} no longer exists (${(err as Error).message}); it was destroyed or reaped — start a new sandbox`, 'SandboxGone');
}

// ------------------------------------------------------------------------------ tar

export interface TarEntry { name: string; type: 'file' | 'dir'; mode: number; uid: number; gid: number; data?: Buffer }

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

/** A minimal ustar archive (names up to 100 bytes): enough for mount roots and patch files. */
export function tarArchive(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const data = e.type === 'file' ? e.data ?? Buffer.alloc(0) : Buffer.alloc(0);
    const h = Buffer.alloc(512);
    const name = Buffer.from(e.name);
    if (name.length > 100) throw new Error(`tar entry name too long: ${e.name}`);
    name.copy(h, 0);
    h.write(octal(e.mode & 0o7777, 8), 100, 'ascii');
    h.write(octal(e.uid, 8), 108, 'ascii');
    h.write(octal(e.gid, 8), 116, 'ascii');
    h.write(octal(data.length, 12), 124, 'ascii');
    h.write(octal(Math.floor(Date.now() / 1000), 12), 136, 'ascii');
    h.write('        ', 148, 'ascii');
    h.write(e.type === 'dir' ? '5' : '0', 156, 'ascii');
    h.write('ustar\0' + '00', 257, 'ascii');
    let sum = 0;
    for (const b of h) sum += b;
    h.write(octal(sum, 7) + ' ', 148, 'ascii');
    blocks.push(h, data);
    if (data.length % 512) blocks.push(Buffer.alloc(512 - (data.length % 512)));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

// ------------------------------------------------------------------------------ exec

export interface RawExecOptions {
  cmd: string[];
  user: string;
  env?: string[];
  workdir?: string;
  stdin?: Buffer | Readable;
  /** Hard client-side deadline: past it, onKill runs and the exec is abandoned. */
  deadlineMs: number;
  /** stdout bytes kept (the rest is counted, then dropped). */
  maxStdoutBytes: number;
  /** Which stdout bytes to keep: the first (default) or the last. */
  keep?: 'head' | 'tail';
  /** Past this many stdout bytes, onKill runs (the command is flooding). */
  killAtStdoutBytes?: number;
  /** When stderr first contains this, the command proper is over; onMarker (given stderr so
   *  far) says how many more ms to wait for the output pipe to close (processes the command
   *  left behind may hold it) before onKill runs. */
  doneMarker?: string;
  onMarker?: (stderr: string) => number;
  onKill?: () => Promise<unknown>;
}

export interface RawExecResult {
  exitCode: number | null;
  stdout: Buffer;
  stdoutBytes: number;
  stderr: string;
  deadlineHit: boolean;
  overflowed: boolean;
  /** onKill ran. */
  killed: boolean;
  durationMs: number;
}

const MAX_STDERR = 64 * 1024;

/** Run one exec with stdout and stderr kept apart (Docker's multiplexed stream). Never waits
 *  past deadlineMs (+2 s to let a killed command's stream close). */
export async function execRaw(docker: Docker, container: Docker.Container, o: RawExecOptions): Promise<RawExecResult> {
  const started = Date.now();
  const exec = await container.exec({
    Cmd: o.cmd, User: o.user, Env: o.env, WorkingDir: o.workdir ?? '/',
    AttachStdout: true, AttachStderr: true, AttachStdin: o.stdin !== undefined,
  });
  const stream = (await exec.start({ hijack: true, stdin: o.stdin !== undefined })) as NodeJS.ReadWriteStream & { destroy(): void };
  const out: Buffer[] = [];
  let kept = 0;
  let stdoutBytes = 0;
  let stderr = '';
  let deadlineHit = false;
  let overflowed = false;
  let markerSeen = false;
  let killing: Promise<unknown> | null = null;
  const kill = () => {
    if (!killing) killing = (o.onKill ?? (async () => undefined))().catch(() => undefined);
    return killing;
  };

  await new Promise<void>((resolve) => {
    let settled = false;
    const timers: NodeJS.Timeout[] = [];
    const finish = () => {
      if (settled) return;
      settled = true;
      timers.forEach(clearTimeout);
      clearInterval(beat);
      stream.removeAllListeners('data');
      try { stream.destroy(); } catch { /* already closed */ }
      resolve();
    };
    const later = (ms: number, f: () => void) => { timers.push(setTimeout(f, ms)); };
    const beat = setInterval(() => heartbeat(), 5000);
    later(o.deadlineMs, () => {
      deadlineHit = true;
      void kill().then(() => later(2000, finish));
    });

    // Docker's multiplexed framing: [type, 0, 0, 0, size (u32 BE)] + payload
    let buf: Buffer = Buffer.alloc(0);
    stream.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      while (buf.length >= 8) {
        const size = buf.readUInt32BE(4);
        if (buf.length < 8 + size) break;
        const type = buf[0];
        const payload = buf.subarray(8, 8 + size);
        buf = buf.subarray(8 + size);
        if (type === 1) {
          stdoutBytes += payload.length;
          if (o.keep === 'tail') {
            out.push(Buffer.from(payload));
            kept += payload.length;
            while (out.length > 1 && kept - out[0].length >= o.maxStdoutBytes) kept -= out.shift()!.length;
          } else if (kept < o.maxStdoutBytes) {
            const take = payload.subarray(0, o.maxStdoutBytes - kept);
            out.push(Buffer.from(take));
            kept += take.length;
          }
          if (o.killAtStdoutBytes !== undefined && stdoutBytes > o.killAtStdoutBytes && !overflowed) {
            overflowed = true;
            void kill().then(() => later(2000, finish));
          }
        } else if (type === 2) {
          if (stderr.length < MAX_STDERR) stderr += payload.toString('utf8');
          if (o.doneMarker && !markerSeen && stderr.includes(o.doneMarker)) {
            markerSeen = true;
            const wait = o.onMarker ? o.onMarker(stderr) : 0;
            later(wait, () => {
              deadlineHit = true;
              void kill().then(() => later(2000, finish));
            });
          }
        }
      }
    });
    stream.on('end', finish);
    stream.on('close', finish);
    stream.on('error', finish);

    if (o.stdin !== undefined) {
      if (Buffer.isBuffer(o.stdin)) stream.end(o.stdin);
      else {
        o.stdin.on('error', () => stream.end());
        o.stdin.pipe(stream);
      }
    }
  });

  if (killing) await killing; // a kill in flight finishes before the caller looks again
  let exitCode: number | null = null;
  for (let i = 0; i < 40; i++) {
    const info = await exec.inspect().catch(() => null);
    if (!info) break;
    if (!info.Running) { exitCode = info.ExitCode; break; }
    if (deadlineHit || overflowed) break; // abandoned
    await new Promise((r) => setTimeout(r, 50));
  }
  let stdout = Buffer.concat(out);
  if (stdout.length > o.maxStdoutBytes) stdout = stdout.subarray(stdout.length - o.maxStdoutBytes);
  return { exitCode, stdout, stdoutBytes, stderr, deadlineHit, overflowed, killed: killing !== null, durationMs: Date.now() - started };
}

/** A setup step: bash script as a given user; throws with its output on failure. */
export async function runScript(docker: Docker, container: Docker.Container, user: string, script: string, args: string[] = [], o: { deadlineMs?: number; stdin?: Buffer | Readable; what?: string } = {}): Promise<string> {
  const r = await execRaw(docker, container, {
    cmd: ['bash', '-c', script, 'floe', ...args], user, env: user === AGENT_USER ? AGENT_ENV : ['HOME=/grade', 'LANG=C.UTF-8'],
    stdin: o.stdin, deadlineMs: o.deadlineMs ?? 120_000, maxStdoutBytes: 1024 * 1024,
    onKill: () => killAgentProcesses(docker, container),
  });
  const text = r.stdout.toString('utf8');
  if (r.exitCode !== 0) {
    throw new Error(`${o.what ?? 'sandbox setup step'} failed (exit ${r.exitCode ?? (r.deadlineHit ? 'timeout' : '?')}): ${(r.stderr + text).trim().slice(-2000)}`);
  }
  return text;
}

/** An exec that runc could not start (exit 125, "OCI runtime error"): under a saturated pids
 *  cgroup runc's own clone fails. Retrying works once a slot frees up. */
export function execNotStarted(r: Pick<RawExecResult, 'exitCode' | 'stderr'>): boolean {
  return r.exitCode === 125 && /OCI runtime|exec failed|unable to start container process/i.test(r.stderr);
}

/** SIGKILL every process of the agent in the container (its own PID namespace only) until
 *  none is left: `kill -9 -1` is a builtin and needs no fork, and the exec is retried while
 *  runc cannot start it (a fork bomb holds every pid). Returns how many are left (0), or -1
 *  when that could not be confirmed within about 20 s. */
export async function killAgentProcesses(docker: Docker, container: Docker.Container): Promise<number> {
  const until = Date.now() + 20_000;
  let left = -1;
  for (let attempt = 0; Date.now() < until; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(50 * attempt, 500)));
    const k = await execRaw(docker, container, { cmd: ['bash', '-c', 'for i in 1 2 3 4 5 6 7 8; do kill -9 -1 2>/dev/null; done; exit 0'], user: AGENT_USER, deadlineMs: 10_000, maxStdoutBytes: 1024 }).catch(() => null);
    if (!k || k.exitCode !== 0) continue;
    left = await countAgentProcesses(docker, container).catch(() => -1);
    if (left === 0) return 0;
  }
  return left;
}

/** Processes of uid 1000 in the container, seen by root (pgrep: one process, no fork). Throws
 *  when pgrep did not run: a failed exec must never read as "none left". */
export async function countAgentProcesses(docker: Docker, container: Docker.Container): Promise<number> {
  const r = await execRaw(docker, container, { cmd: ['pgrep', '-u', '1000'], user: ROOT_USER, deadlineMs: 10_000, maxStdoutBytes: 64 * 1024 });
  if (r.exitCode === 1) return 0;
  if (r.exitCode !== 0) throw new Error(`pgrep did not run (exit ${r.exitCode}): ${r.stderr.trim()}`);
  return r.stdout.toString('utf8').split('\n').filter((l) => l.trim()).length;
}

// ------------------------------------------------------------------------------ containers

export interface ContainerSpec {
  image: string;
  limits: SandboxLimits;
  labels: Record<string, string>;
  /** Hide the image's /testbed (image sources: its history must not be readable). */
  hideTestbed?: boolean;
}

/** The HostConfig every sandbox and grader container gets. */
export function sandboxHostConfig(spec: Pick<ContainerSpec, 'limits' | 'hideTestbed'>): Docker.HostConfig {
  const tmpfs: Record<string, string> = {};
  for (const m of sandboxTmpfs(spec.limits)) tmpfs[m.path] = `rw,size=${m.sizeMb}m,nosuid,nodev`;
  if (spec.hideTestbed) tmpfs['/testbed'] = 'rw,size=1m,nosuid,nodev,notmpcopyup';
  const memory = sandboxMemoryMb(spec.limits) * MiB;
  return {
    NetworkMode: 'none',
    NanoCpus: Math.round(spec.limits.cpus * 1e9),
    Memory: memory,
    MemorySwap: memory, // equal to Memory: no swap
    PidsLimit: spec.limits.pidsLimit,
    ReadonlyRootfs: true,
    Tmpfs: tmpfs,
    ShmSize: SHM_MB * MiB,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    Ulimits: [{ Name: 'nproc', Soft: 4096, Hard: 4096 }, { Name: 'nofile', Soft: 1024, Hard: 1024 }],
  };
}

/** Create and start a locked-down container; set the owner and mode of its tmpfs roots. The
 *  container is removed again if any step fails. */
export async function startLockedContainer(docker: Docker, spec: ContainerSpec): Promise<Docker.Container> {
  const container = await docker.createContainer({
    Image: spec.image,
    User: ROOT_USER,
    WorkingDir: '/',
    Entrypoint: ['bash', '-c', KEEPER],
    Cmd: [],
    Labels: spec.labels,
    Env: ['LANG=C.UTF-8'],
    HostConfig: sandboxHostConfig(spec),
  });
  try {
    await container.start();
    const roots = sandboxTmpfs(spec.limits).filter((m) => m.path === '/work' || m.path === '/home/agent' || m.path === '/grade');
    if (spec.hideTestbed) roots.push({ path: '/testbed', sizeMb: 1, owner: 'root', mode: 0o700 });
    await Promise.all(roots.map((m) => {
      const id = m.owner === 'agent' ? 1000 : 0;
      const entries: TarEntry[] = [{ name: './', type: 'dir', mode: m.mode, uid: id, gid: id }];
      if (m.path === '/work') entries.push({ name: './repo/', type: 'dir', mode: 0o755, uid: 1000, gid: 1000 });
      return container.putArchive(tarArchive(entries), { path: m.path });
    }));
    return container;
  } catch (err) {
    await container.remove({ force: true }).catch(() => undefined);
    throw err;
  }
}

export async function removeContainer(container: Docker.Container): Promise<void> {
  try {
    await container.remove({ force: true, v: true });
  } catch (err) {
    if (!isNoSuchContainer(err) && !/removal of container .* is already in progress/i.test((err as Error).message)) throw err;
  }
}

export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

// ------------------------------------------------------------------------------ repository

/** The image a task's sandbox runs: the task's own for image sources, else floe's. */
export function imageFor(task: Task, defaultImage: string): string {
  return task.source.kind === 'image' ? task.source.image : defaultImage;
}

export function assertSupportedSource(task: Task): void {
  if (task.source.kind === 'git') {
    throw ApplicationFailure.nonRetryable(
      `task ${task.instanceId}: source is the git repository ${task.source.repo}@${task.source.commit.slice(0, 12)}, and sandboxes have no network. ` +
        'Provide a local mirror: check the repository out at base_commit into a folder (a directory source), or use a prebuilt image with it at /testbed (docker_image).',
      'SandboxSourceUnsupported',
    );
  }
}

/** Stream a tar of a host folder (owned by the agent, without .git or caches). */
function tarOfDirectory(dir: string): { stream: Readable; done: Promise<void> } {
  const child = spawn('tar', ['-C', dir, '--owner=1000', '--group=1000', '--numeric-owner', '--exclude=.git', '--exclude=__pycache__', '--exclude=.pytest_cache', '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', (e) => reject(new Error(`tar of ${dir} failed to start: ${e.message}`)));
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar of ${dir} exited ${code}: ${err.trim()}`))));
  });
  return { stream: child.stdout, done };
}

const FRESH_HISTORY = `set -e
cd ${REPO_DIR}
find . -name .git -prune -exec rm -rf {} +
for f in "$@"; do rm -rf -- "$f"; done
git init -q -b main
git config user.name agent
git config user.email agent@floe.invalid
git add -A
GIT_AUTHOR_DATE=2000-01-01T00:00:00Z GIT_COMMITTER_DATE=2000-01-01T00:00:00Z \\
  git -c core.hooksPath=/dev/null commit -q --no-verify --allow-empty -m initial
rm -rf .git/logs .git/hooks .git/COMMIT_EDITMSG .git/description .git/branches
git rev-parse HEAD`;

/** root keeps a sealed copy of the fresh commit that extractDiff diffs against, with its own
 *  config: nothing the agent does to .git changes what the diff is taken against. */
const SEAL = `set -e
rm -rf ${SEALED_GIT_DIR}
cp -r ${REPO_DIR}/.git ${SEALED_GIT_DIR}
printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n' > ${SEALED_GIT_DIR}/config
mkdir -p ${SEALED_GIT_DIR}/info
printf '__pycache__/\\n*.py[co]\\n.pytest_cache/\\n' > ${SEALED_GIT_DIR}/info/exclude`;

/** Put the task's repository at /work/repo with a history of one fresh commit, hidden tests
 *  removed; returns the commit id. */
export async function prepareRepository(docker: Docker, container: Docker.Container, task: Task): Promise<string> {
  assertSupportedSource(task);
  const src = task.source;
  if (src.kind === 'directory') {
    const tar = tarOfDirectory(src.path);
    await keepAlive(Promise.all([container.putArchive(tar.stream, { path: REPO_DIR }), tar.done]), 'copying the repository');
  } else if (src.kind === 'image') {
    await copyTestbed(docker, container, src.image);
  }
  heartbeat('repository copied');
  // files the hidden test patch adds must not be there (a dataset image may ship them)
  const hidden = patchFiles(task.testPatch).filter((f) => f.isNew).map((f) => f.path);
  const sha = (await runScript(docker, container, AGENT_USER, FRESH_HISTORY, hidden, { what: 'fresh git history' })).trim().split('\n').pop() ?? '';
  await runScript(docker, container, ROOT_USER, SEAL, [], { what: 'sealing the base commit' });
  return sha;
}

/** Image sources: the repository is at /testbed in the image. It is read from a stopped helper
 *  container and extracted as the agent (so the agent owns it), without any .git. */
async function copyTestbed(docker: Docker, container: Docker.Container, image: string): Promise<void> {
  const helper = await docker.createContainer({ Image: image, Entrypoint: ['true'], Cmd: [], Labels: { 'floe.sandbox': '1', 'floe.role': 'source', 'floe.created': String(unixNow()) }, HostConfig: { NetworkMode: 'none' } });
  try {
    const archive = (await helper.getArchive({ path: '/testbed' })) as unknown as Readable;
    await runScript(docker, container, AGENT_USER, `tar -x --no-same-owner -C ${REPO_DIR} --strip-components=1 --exclude=.git`, [], { stdin: archive, deadlineMs: 600_000, what: 'copying /testbed from the task image' });
  } finally {
    await removeContainer(helper);
  }
}
