import fs from 'node:fs';
import os from 'node:os';
import type Docker from 'dockerode';
import { ApplicationFailure } from '@temporalio/common';
import type { Task } from '../../core/taskModel.js';
import { hiddenImagePaths } from '../../core/taskLayouts.js';
import { WORK_REPO_DIR, repoDirOf, type ExecResult, type SandboxLimits } from '../../core/sandboxPolicy.js';
import { AGENT_ENV, AGENT_USER, ROOT_USER, execRaw } from './exec.js';
import { isNoSuchContainer, removeContainer, sandboxGone, startLockedContainer, unixNow } from './containerSpec.js';
import { AGENT_CONFIG_COPY, BASE_FILE, SEALED_GIT_DIR, imageFor, prepareRepository } from './repository.js';
import { execCommand, type ExecInSandboxInput } from './command.js';
import { preparedRepository } from './prepared.js';
import { tarArchive } from './tar.js';
import { heartbeat } from './heartbeat.js';
import { runKeeperJob } from './keeper.js';
import { missingImagesFailure, preflightImages, type ImagePreflight } from './images.js';

/** Sandbox activities: one locked-down container per rollout (no network, one fresh commit of
 *  history, cgroup limits, size-limited tmpfs as the only writable space), commands run in it
 *  with a timeout that kills the whole process tree, and the agent's diff taken out of it.
 *  The package: tar.ts, exec.ts (the exec primitive), command.ts (the agent's command),
 *  containerSpec.ts (the locked-down container), repository.ts (the repository and its fresh
 *  history), images.ts (the pool's image preflight), heartbeat.ts. */

export type { ExecInSandboxInput } from './command.js';
export { execCommand } from './command.js';

export interface SandboxOptions {
  /** The sandbox host's name (its task queue suffix). */
  host: string;
  /** floe's sandbox image (directory sources run in it). */
  image: string;
  /** This worker's identity, `${hostname}:${pid}:${startTimeMs}` (see workerIdentity). */
  workerId: string;
}

/** This process as a sandbox owner: `${hostname}:${pid}:${startTimeMs}`. */
export function workerIdentity(): string {
  return `${os.hostname()}:${process.pid}:${Math.round(performance.timeOrigin)}`;
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

/** $1: the base commit, $2: the repository. */
const DIFF_CHECK = `cd "$2" 2>/dev/null || { echo "$2 is gone" >&2; exit 3; }
[ -d .git ] || { echo "$2/.git is gone (deleted in the sandbox)" >&2; exit 3; }
git rev-parse -q --verify "$1^{commit}" >/dev/null 2>&1 || { echo "$2/.git is broken: the base commit $1 is not in it" >&2; exit 3; }
chmod -R u+rwX,go+rX . 2>/dev/null; exit 0`;

/** The agent's check, against the base id root left in BASE_FILE. $1: the repository. */
const DIFF_CHECK_AS_AGENT = `read -r floe_base < ${BASE_FILE} || { echo "${BASE_FILE} is unreadable: the sandbox was not made by this floe" >&2; exit 3; }
set -- "$floe_base" "$1"
${DIFF_CHECK}`;

/** BASE_FILE's archive for /run: root's, readable by the agent. */
function baseFileTar(baseCommit: string): Buffer {
  return tarArchive([{ name: BASE_FILE.split('/').pop()!, type: 'file', mode: 0o644, uid: 0, gid: 0, data: Buffer.from(`${baseCommit}\n`) }]);
}

/** The diff in one step, as root (a keeper job; an exec where the keeper gives no answer),
 *  where root can tell that the agent's check and
 *  chmod (DIFF_CHECK) would pass and change nothing git sees: the repository and its .git are
 *  there, .git/config is the one the sandbox was made with (AGENT_CONFIG_COPY), the base commit
 *  is among .git's objects, every file and folder is readable by root as it stands, and no file
 *  has an execute bit the chmod would add for its owner. Then DIFF, unchanged. Exit 20 (or any
 *  failure): it cannot tell, and the two-exec path (agent check, then root DIFF) decides,
 *  errors included. $1: max bytes, $2: the repository. */
const DIFF_ONE_EXEC = () => `cd "$2" 2>/dev/null || exit 20
[ -d .git ] && [ -f .git/HEAD ] && [ -r .git/HEAD ] && [ -d .git/objects ] || exit 20
read -r floe_head < .git/HEAD || exit 20
case "$floe_head" in "ref: refs/"*) ;; *) [[ "$floe_head" =~ ^[0-9a-f]{40}$ ]] || exit 20 ;; esac
cmp -s .git/config ${AGENT_CONFIG_COPY} || exit 20
floe_base=$(GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/grade git --git-dir=${SEALED_GIT_DIR} rev-parse HEAD) || exit 20
GIT_DIR=${SEALED_GIT_DIR} GIT_OBJECT_DIRECTORY="$2/.git/objects" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/grade git cat-file -e "$floe_base^{commit}" 2>/dev/null || exit 20
floe_odd=$(find . \\( \\( -type d \\( ! -readable -o ! -executable \\) \\) -o \\( ! -type d ! -readable \\) -o \\( -type f -perm /011 ! -perm -100 \\) \\) -print -quit 2>&1) || exit 20
[ -z "$floe_odd" ] || exit 20
(
${DIFF}
) || exit 20`;

/** As root, against the sealed base (its own git dir, index and config; no system or global
 *  config): the agent's .git/config, hooks or index cannot change what the diff says. */
const DIFF = `set -e
export GIT_DIR=${SEALED_GIT_DIR} GIT_WORK_TREE="$2" GIT_INDEX_FILE=/grade/diff.index
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/grade
cd "$2"
rm -f /grade/diff.index /grade/diff.patch
git read-tree HEAD
git -c core.hooksPath=/dev/null -c core.fsmonitor=false add -A
git diff --cached --binary --no-color --no-ext-diff --no-textconv --no-renames HEAD > /grade/diff.patch
wc -c < /grade/diff.patch >&2
head -c "$1" /grade/diff.patch`;

/** The label that says where a sandbox's repository is (set at creation, read by every
 *  later activity: the container is the one source of truth, whichever worker runs them). */
export const REPO_LABEL = 'floe.repo';

export function createSandboxActivities(docker: Docker, opts: SandboxOptions) {
  const container = (id: string) => docker.getContainer(id);
  /** Where each sandbox's repository is (its label, read once per worker). */
  const repoDirs = new Map<string, string>();
  async function repoDirOfContainer(id: string): Promise<string> {
    let known = repoDirs.get(id);
    if (known === undefined) {
      try {
        known = (await container(id).inspect()).Config.Labels?.[REPO_LABEL] ?? WORK_REPO_DIR;
      } catch (err) {
        if (isNoSuchContainer(err)) throw sandboxGone(id, err);
        throw err;
      }
      if (repoDirs.size > 4096) repoDirs.clear();
      repoDirs.set(id, known);
    }
    return known;
  }

  /** The agent's diff against the sealed base: one step as root where that is safe (the keeper's
   *  job, or one exec if the keeper gives no answer), else the agent's check (and its chmod)
   *  and root's DIFF, which also say what is wrong with a broken repository. */
  async function extractDiff(input: { containerId: string; maxBytes: number }): Promise<{ diff: string; bytes: number; truncated: boolean }> {
    const c = container(input.containerId);
    try {
      const repoDir = await repoDirOfContainer(input.containerId);
      const job = await runKeeperJob(c, { script: DIFF_ONE_EXEC(), args: [String(input.maxBytes), repoDir], timeoutSeconds: 120 });
      if (job) {
        const bytes = Number(/^(\d+)\s*$/m.exec(job.stderr)?.[1]);
        if (job.exitCode === 0 && Number.isFinite(bytes)) return { diff: job.stdout.subarray(0, input.maxBytes).toString('utf8'), bytes, truncated: bytes > input.maxBytes };
      } else {
        const one = await execRaw(docker, c, { cmd: ['bash', '-c', DIFF_ONE_EXEC(), 'floe', String(input.maxBytes), repoDir], user: ROOT_USER, env: ['LANG=C.UTF-8'], deadlineMs: 120_000, maxStdoutBytes: input.maxBytes });
        const bytes = Number(/^(\d+)\s*$/m.exec(one.stderr)?.[1]);
        if (one.exitCode === 0 && Number.isFinite(bytes)) return { diff: one.stdout.toString('utf8'), bytes, truncated: bytes > input.maxBytes };
      }
      const check = await execRaw(docker, c, { cmd: ['bash', '-c', DIFF_CHECK_AS_AGENT, 'floe', repoDir], user: AGENT_USER, env: AGENT_ENV, deadlineMs: 60_000, maxStdoutBytes: 4096 });
      if (check.exitCode !== 0) {
        throw ApplicationFailure.nonRetryable(`cannot take the diff: ${check.stderr.trim() || `check exited ${check.exitCode}`}. The submission has no diff to grade.`, 'RepositoryBroken');
      }
      const r = await execRaw(docker, c, { cmd: ['bash', '-c', DIFF, 'floe', String(input.maxBytes), repoDir], user: ROOT_USER, env: ['LANG=C.UTF-8'], deadlineMs: 120_000, maxStdoutBytes: input.maxBytes });
      const bytes = Number(/^(\d+)\s*$/m.exec(r.stderr)?.[1]);
      if (r.exitCode !== 0 || !Number.isFinite(bytes)) {
        throw ApplicationFailure.nonRetryable(`cannot take the diff (exit ${r.exitCode}): ${r.stderr.trim().slice(-1500)}`, 'RepositoryBroken');
      }
      return { diff: r.stdout.toString('utf8'), bytes, truncated: bytes > input.maxBytes };
    } catch (err) {
      if (isNoSuchContainer(err)) throw sandboxGone(input.containerId, err);
      throw err;
    }
  }

  return {
    async createSandbox(input: { runId: string; rolloutId: string; task: Task; limits: SandboxLimits }): Promise<{ containerId: string }> {
      const { runId, rolloutId, task, limits } = input;
      const repoDir = repoDirOf(task.source);
      // a directory source's repository, fresh history and seal come in by putArchive with the
      // mount roots (no exec); an image's is prepared in the container
      const prepared = await preparedRepository(task);
      const c = await startLockedContainer(docker, {
        image: imageFor(task, opts.image),
        limits,
        repoDir,
        hide: hiddenImagePaths(task.layout),
        labels: {
          'floe.sandbox': '1', 'floe.role': 'agent', 'floe.run': runId, 'floe.rollout': rolloutId, [REPO_LABEL]: repoDir,
          'floe.task': task.instanceId, 'floe.host': opts.host, 'floe.worker': opts.workerId, 'floe.created': String(unixNow()),
        },
        ...(prepared ? { content: { '/work': prepared.work, '/grade': prepared.sealed, '/run': baseFileTar(prepared.baseCommit) } } : {}),
      });
      try {
        if (prepared) heartbeat('repository copied');
        // sandbox.removeHistory false: only tests and the shortcut ablation keep an image's history
        else await prepareRepository(docker, c, task, { seal: true, keepHistory: limits.removeHistory === false });
      } catch (err) {
        await removeContainer(c);
        throw err;
      }
      return { containerId: c.id };
    },

    async execInSandbox(input: ExecInSandboxInput): Promise<ExecResult> {
      return execCommand(docker, container(input.containerId), { ...input, repoDir: await repoDirOfContainer(input.containerId) });
    },

    async extractDiff(input: { containerId: string; maxBytes: number }): Promise<{ diff: string; bytes: number; truncated: boolean }> {
      return extractDiff(input);
    },

    /** A submitting rollout's last sandbox step: the diff (as extractDiff), then the container
     *  is removed whatever happened (as destroySandbox). */
    async takeDiffAndDestroy(input: { containerId: string; maxBytes: number }): Promise<{ diff: string; bytes: number; truncated: boolean }> {
      try {
        return await extractDiff(input);
      } finally {
        repoDirs.delete(input.containerId);
        await removeContainer(container(input.containerId));
      }
    },

    /** Before any rollout: every task image of the pool is here, pulled, or the run is refused. */
    async preflightTaskImages(input: { images: string[] }): Promise<ImagePreflight> {
      const r = await preflightImages(docker, input.images);
      if (r.missing.length) throw missingImagesFailure(opts.host, r.missing);
      return r;
    },

    async destroySandbox(input: { containerId: string }): Promise<void> {
      repoDirs.delete(input.containerId);
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
