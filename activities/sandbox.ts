import fs from 'node:fs';
import os from 'node:os';
import type Docker from 'dockerode';
import { ApplicationFailure } from '@temporalio/common';
import type { Task } from '../core/taskModel.js';
import {
  EXIT_MARKER, START_MARKER, forkFailed, killedReasonOf, outputKillThreshold, parseCgroupCounters,
  parseWrapperExit, parseWrapperStart, type CgroupCounters, type ExecResult, type SandboxLimits,
} from '../core/sandboxPolicy.js';
import {
  AGENT_ENV, AGENT_USER, REPO_DIR, ROOT_USER, SEALED_GIT_DIR, assertSupportedSource, execNotStarted, execRaw, heartbeat, imageFor,
  isNoSuchContainer, killAgentProcesses, prepareRepository, removeContainer, runScript,
  sandboxGone, startLockedContainer, unixNow,
} from './containers.js';

/** Sandbox activities: one locked-down container per rollout (no network, one fresh commit of
 *  history, cgroup limits, size-limited tmpfs as the only writable space), commands run in it
 *  with a timeout that kills the whole process tree, and the agent's diff taken out of it. */

export interface SandboxOptions {
  /** The sandbox host's name (its task queue suffix). */
  host: string;
  /** floe's sandbox image (directory sources run in it). */
  image: string;
  /** This worker's identity, `${hostname}:${pid}:${startTimeMs}` (see workerIdentity). */
  workerId: string;
}

/** Seconds past a command's timeout after which the client gives up on the exec. */
const CLIENT_GRACE_SECONDS = 5;

/** This process as a sandbox owner: `${hostname}:${pid}:${startTimeMs}`. */
export function workerIdentity(): string {
  return `${os.hostname()}:${process.pid}:${Math.round(performance.timeOrigin)}`;
}

/** The exec wrapper (bash, as the agent). Its own lines go to fd 3 (the exec's stderr); the
 *  command's stdout and stderr share one pipe, so they interleave exactly as written, and
 *  bash's own job notices go nowhere. The command is over when that pipe closes — podman ends
 *  the exec when its main process exits, so `cat` holds the exec open until every process
 *  that can still write (background jobs, a fork bomb's children) is gone, or the timeout is
 *  up. `timeout -s KILL` kills the command's process group; setsid escapees are killed
 *  afterwards by killAgentProcesses. Counters of the memory and pids cgroups (v1 or v2 paths)
 *  are read with builtins only: no fork, so it works beside a fork bomb. */
const WRAPPER = `exec 3>&2 2>/dev/null </dev/null
cd ${REPO_DIR} 2>/dev/null || cd /
[ -d /opt/miniconda3/envs/testbed/bin ] && PATH=/opt/miniconda3/envs/testbed/bin:$PATH
cg() { OOM=0; PIDS=0; local f k v
  for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
    if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && OOM=$v; done < "$f"; fi; done
  for f in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do
    if [ -r "$f" ]; then while read -r k v; do [ "$k" = max ] && PIDS=$v; done < "$f"; fi; done; }
cg; printf '${START_MARKER} %d %d\\n' "$OOM" "$PIDS" >&3
t0=\${EPOCHREALTIME//[!0-9]/}
timeout -s KILL "$1" bash -c "$2" 3>&- 2>&1 | timeout -s KILL "$1" cat 3>&-
st=("\${PIPESTATUS[@]}"); rc=\${st[0]}; [ "\${st[1]}" = 137 ] && rc=137
t1=\${EPOCHREALTIME//[!0-9]/}
# timed out: kill what is left right away (no exec needed, so it works beside a fork bomb)
if [ "$rc" = 137 ] && [ $(( (t1 - t0) / 1000 )) -ge $(( $3 - 100 )) ]; then for i in 1 2 3 4 5 6 7 8; do kill -9 -1; done; fi
cg
printf '${EXIT_MARKER} %d %d %d %d\\n' "$rc" "$OOM" "$PIDS" $(( (t1 - t0) / 1000 )) >&3`;

const CGROUP_FILES = ['/sys/fs/cgroup/memory/memory.oom_control', '/sys/fs/cgroup/memory.events', '/sys/fs/cgroup/pids/pids.events', '/sys/fs/cgroup/pids.events'];

async function readCounters(docker: Docker, container: Docker.Container): Promise<CgroupCounters | null> {
  const r = await execRaw(docker, container, { cmd: ['bash', '-c', `cat ${CGROUP_FILES.join(' ')} 2>/dev/null; exit 0`], user: ROOT_USER, deadlineMs: 5000, maxStdoutBytes: 8192 }).catch(() => null);
  return r && r.exitCode === 0 ? parseCgroupCounters(r.stdout.toString('utf8')) : null;
}

export interface ExecInSandboxInput { containerId: string; command: string; timeoutSeconds: number; maxOutputBytes: number }

/** Run one command as the agent in /work/repo. The command is over when its output pipe
 *  closes: processes it leaves behind holding the pipe (a fork bomb's children, a server not
 *  redirected) count as part of it until the timeout. Shared with the grader, which keeps the
 *  end of the output (pytest's summary) instead of the beginning. */
export async function execCommand(docker: Docker, container: Docker.Container, input: Omit<ExecInSandboxInput, 'containerId'>, keep: 'head' | 'tail' = 'head'): Promise<ExecResult> {
  const { command, timeoutSeconds, maxOutputBytes } = input;
  const started = Date.now();
  const timeoutMs = timeoutSeconds * 1000;
  let raw;
  try {
    for (let attempt = 0; ; attempt++) {
      raw = await execOnce();
      // runc could not start the exec: the pids cgroup is full (something left a fork bomb)
      if (!execNotStarted(raw) || attempt >= 2) break;
      await killAgentProcesses(docker, container);
    }
  } catch (err) {
    if (isNoSuchContainer(err)) throw sandboxGone(container.id, err);
    throw err;
  }
  function execOnce() {
    return execRaw(docker, container, {
      cmd: ['bash', '-c', WRAPPER, 'floe-exec', String(timeoutSeconds), command, String(Math.round(timeoutMs))],
      user: AGENT_USER,
      env: AGENT_ENV,
      deadlineMs: timeoutMs + CLIENT_GRACE_SECONDS * 1000,
      maxStdoutBytes: maxOutputBytes,
      keep,
      killAtStdoutBytes: outputKillThreshold(maxOutputBytes),
      doneMarker: EXIT_MARKER,
      // timed out: kill the rest now; else wait for the pipe until the timeout is up
      onMarker: (stderr) => (isTimeout(parseWrapperExit(stderr), timeoutMs) ? 0 : Math.max(300, started + timeoutMs - Date.now())),
      onKill: () => killAgentProcesses(docker, container),
    });
  }
  const before = parseWrapperStart(raw.stderr);
  const exit = parseWrapperExit(raw.stderr);
  const output = raw.stdout.toString('utf8');
  const killed = raw.deadlineHit || raw.overflowed;
  const timedOut = raw.deadlineHit || isTimeout(exit, timeoutMs);
  // the wrapper's final counters, or (when we killed, or it was killed) counters read now
  const after = killed || !exit ? await readCounters(docker, container) : exit;
  const delta = before && after
    ? { oomKills: after.oomKills - before.oomKills, pidsMaxHits: after.pidsMaxHits - before.pidsMaxHits }
    : { oomKills: 0, pidsMaxHits: 0 };
  // bash's "fork: retry" in the output is the fallback signal where the counters are unreadable
  const killedReason = killedReasonOf({ ...delta, forkFailedInOutput: !(before && after) && forkFailed(output), outputLimit: raw.overflowed, timedOut });
  // after a timeout, a flood or a hit process limit nothing of the command may live on
  // (setsid/nohup escapees, a fork bomb's children)
  if ((timedOut || raw.overflowed || killedReason === 'pids') && !raw.killed) await killAgentProcesses(docker, container);
  return {
    exitCode: killed ? 137 : exit?.rc ?? raw.exitCode ?? 137,
    output,
    outputBytes: raw.stdoutBytes,
    truncated: raw.stdoutBytes > maxOutputBytes,
    timedOut,
    killedReason,
    durationMs: Date.now() - started,
  };
}

/** `timeout -s KILL` ends with the command's group: exit 137 at the time limit. */
function isTimeout(exit: ReturnType<typeof parseWrapperExit>, timeoutMs: number): boolean {
  return exit !== null && exit.rc === 137 && exit.elapsedMs >= timeoutMs - 100;
}

/** Is the worker that owns a sandbox gone? Only answerable on the same host; a pid that was
 *  reused by a later process counts as gone. */
export function ownerIsGone(workerId: string, now = Date.now()): boolean {
  const parts = workerId.split(':');
  if (parts.length < 3) return false;
  const startMs = Number(parts.pop());
  const pid = Number(parts.pop());
  const hostname = parts.join(':');
  if (hostname !== os.hostname() || !Number.isInteger(pid) || pid <= 0 || !Number.isFinite(startMs)) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
  const started = processStartMs(pid);
  return started !== null && started > startMs + 10_000 && started <= now;
}

/** Start time of a process (Linux /proc; null elsewhere). Assumes USER_HZ = 100. */
function processStartMs(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = Number(/^btime (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'utf8'))?.[1]);
    if (!Number.isFinite(ticks) || !Number.isFinite(btime)) return null;
    return btime * 1000 + (ticks / 100) * 1000;
  } catch {
    return null;
  }
}

const DIFF_CHECK = `cd ${REPO_DIR} 2>/dev/null || { echo "${REPO_DIR} is gone" >&2; exit 3; }
[ -d .git ] || { echo "${REPO_DIR}/.git is gone (deleted in the sandbox)" >&2; exit 3; }
git rev-parse -q --verify "$1^{commit}" >/dev/null 2>&1 || { echo "${REPO_DIR}/.git is broken: the base commit $1 is not in it" >&2; exit 3; }
chmod -R u+rwX,go+rX . 2>/dev/null; exit 0`;

/** As root, against the sealed base (its own git dir, index and config; no system or global
 *  config): the agent's .git/config, hooks or index cannot change what the diff says. */
const DIFF = `set -e
export GIT_DIR=${SEALED_GIT_DIR} GIT_WORK_TREE=${REPO_DIR} GIT_INDEX_FILE=/grade/diff.index
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/grade
cd ${REPO_DIR}
rm -f /grade/diff.index /grade/diff.patch
git read-tree HEAD
git -c core.hooksPath=/dev/null -c core.fsmonitor=false add -A
git diff --cached --binary --no-color --no-ext-diff --no-textconv --no-renames HEAD > /grade/diff.patch
wc -c < /grade/diff.patch >&2
head -c "$1" /grade/diff.patch`;

export function createSandboxActivities(docker: Docker, opts: SandboxOptions) {
  const container = (id: string) => docker.getContainer(id);

  return {
    async createSandbox(input: { runId: string; rolloutId: string; task: Task; limits: SandboxLimits }): Promise<{ containerId: string }> {
      const { runId, rolloutId, task, limits } = input;
      assertSupportedSource(task);
      const c = await startLockedContainer(docker, {
        image: imageFor(task, opts.image),
        limits,
        hideTestbed: task.source.kind === 'image',
        labels: {
          'floe.sandbox': '1', 'floe.role': 'agent', 'floe.run': runId, 'floe.rollout': rolloutId,
          'floe.task': task.instanceId, 'floe.host': opts.host, 'floe.worker': opts.workerId, 'floe.created': String(unixNow()),
        },
      });
      try {
        await prepareRepository(docker, c, task);
      } catch (err) {
        await removeContainer(c);
        throw err;
      }
      return { containerId: c.id };
    },

    async execInSandbox(input: ExecInSandboxInput): Promise<ExecResult> {
      return execCommand(docker, container(input.containerId), input);
    },

    async extractDiff(input: { containerId: string; maxBytes: number }): Promise<{ diff: string; bytes: number; truncated: boolean }> {
      const c = container(input.containerId);
      try {
        const base = (await runScript(docker, c, ROOT_USER, `git --git-dir=${SEALED_GIT_DIR} rev-parse HEAD`, [], { what: 'reading the sealed base commit' })).trim();
        const check = await execRaw(docker, c, { cmd: ['bash', '-c', DIFF_CHECK, 'floe', base], user: AGENT_USER, env: AGENT_ENV, deadlineMs: 60_000, maxStdoutBytes: 4096 });
        if (check.exitCode !== 0) {
          throw ApplicationFailure.nonRetryable(`cannot take the diff: ${check.stderr.trim() || `check exited ${check.exitCode}`}. The submission has no diff to grade.`, 'RepositoryBroken');
        }
        const r = await execRaw(docker, c, { cmd: ['bash', '-c', DIFF, 'floe', String(input.maxBytes)], user: ROOT_USER, env: ['LANG=C.UTF-8'], deadlineMs: 120_000, maxStdoutBytes: input.maxBytes });
        const bytes = Number(/^(\d+)\s*$/m.exec(r.stderr)?.[1]);
        if (r.exitCode !== 0 || !Number.isFinite(bytes)) {
          throw ApplicationFailure.nonRetryable(`cannot take the diff (exit ${r.exitCode}): ${r.stderr.trim().slice(-1500)}`, 'RepositoryBroken');
        }
        return { diff: r.stdout.toString('utf8'), bytes, truncated: bytes > input.maxBytes };
      } catch (err) {
        if (isNoSuchContainer(err)) throw sandboxGone(input.containerId, err);
        throw err;
      }
    },

    async destroySandbox(input: { containerId: string }): Promise<void> {
      await removeContainer(container(input.containerId));
    },

    async reapSandboxes(input: { maxAgeSeconds: number }): Promise<{ removed: string[] }> {
      const list = await docker.listContainers({ all: true, filters: { label: ['floe.sandbox=1'] } });
      const now = unixNow();
      const removed: string[] = [];
      for (const info of list) {
        const labels = info.Labels ?? {};
        const worker = labels['floe.worker'] ?? '';
        const created = Number(labels['floe.created']) || info.Created;
        const tooOld = now - created > input.maxAgeSeconds;
        const orphaned = worker !== opts.workerId && ownerIsGone(worker);
        if (!tooOld && !orphaned) continue;
        await removeContainer(docker.getContainer(info.Id));
        removed.push(info.Id);
        heartbeat({ removed: removed.length });
      }
      return { removed };
    },
  };
}

export type SandboxActivities = ReturnType<typeof createSandboxActivities>;

/** Reap now and then every intervalSeconds (a worker calls this at start: sandboxes of a
 *  crashed worker are removed). The timer does not keep the process alive. */
export function startSandboxReaper(activities: Pick<SandboxActivities, 'reapSandboxes'>, o: { intervalSeconds: number; maxAgeSeconds: number; onError?: (err: unknown) => void; onRemoved?: (ids: string[]) => void }): { stop(): void } {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const { removed } = await activities.reapSandboxes({ maxAgeSeconds: o.maxAgeSeconds });
      if (removed.length) o.onRemoved?.(removed);
    } catch (err) {
      o.onError?.(err);
    } finally {
      running = false;
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), o.intervalSeconds * 1000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
