import fs from 'node:fs';
import type Docker from 'dockerode';
import {
  EXIT_MARKER, START_MARKER, forkFailed, killedReasonOf, outputKillThreshold, parseCgroupCounters,
  parseWrapperExit, parseWrapperStart, type CgroupCounters, type ExecResult,
} from '../../core/sandboxPolicy.js';
import { AGENT_ENV, AGENT_USER, ROOT_USER, execNotStarted, execRaw, killAgentProcesses, readMuxStream, type MuxStream, type RawExecResult } from './exec.js';
import { isNoSuchContainer, removeContainer, sandboxGone, startLockedContainer, type ContainerSpec } from './containerSpec.js';

/** The agent's command: one shell command in the repository, in the image's environment, with
 *  a timeout that kills its whole process tree, and cgroup counters that say why it was killed.
 *  The sandbox's execInSandbox and the grader's test run both go through it. */

/** The image's environment, activated the way its dataset's eval script does (one file, shared
 *  with the Python pytest runner). */
const ACTIVATE = fs.readFileSync(new URL('../../harness/floe_harness/grading/activate.sh', import.meta.url), 'utf8');

/** Seconds past a command's timeout after which the client gives up on the exec. */
const CLIENT_GRACE_SECONDS = 5;

/** The exec wrapper (bash, as the agent). Its own lines go to fd 3 (the exec's stderr); the
 *  command's stdout and stderr share one pipe, so they interleave exactly as written, and
 *  bash's own job notices go nowhere. The command is over when that pipe closes — podman ends
 *  the exec when its main process exits, so `cat` holds the exec open until every process
 *  that can still write (background jobs, a fork bomb's children) is gone, or the timeout is
 *  up. `timeout -s KILL` kills the command's process group; setsid escapees are killed
 *  afterwards by killAgentProcesses. Counters of the memory and pids cgroups (v1 or v2 paths)
 *  are read with builtins only: no fork, so it works beside a fork bomb. */
const WRAPPER = `exec 3>&2 2>/dev/null </dev/null
floe_secs=$1 floe_cmd=$2 floe_ms=$3 floe_repo=$4
# a sourced script sees the caller's arguments: conda's activate would take them for an env
set --
cd "$floe_repo" 2>/dev/null || cd /
${ACTIVATE}
cg() { OOM=0; PIDS=0; local f k v
  for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
    if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && OOM=$v; done < "$f"; fi; done
  for f in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do
    if [ -r "$f" ]; then while read -r k v; do [ "$k" = max ] && PIDS=$v; done < "$f"; fi; done; }
cg; printf '${START_MARKER} %d %d\\n' "$OOM" "$PIDS" >&3
t0=\${EPOCHREALTIME//[!0-9]/}
timeout -s KILL "$floe_secs" bash -c "$floe_cmd" 3>&- 2>&1 | timeout -s KILL "$floe_secs" cat 3>&-
st=("\${PIPESTATUS[@]}"); rc=\${st[0]}; [ "\${st[1]}" = 137 ] && rc=137
t1=\${EPOCHREALTIME//[!0-9]/}
# timed out: kill what is left right away (no exec needed, so it works beside a fork bomb)
if [ "$rc" = 137 ] && [ $(( (t1 - t0) / 1000 )) -ge $(( floe_ms - 100 )) ]; then for i in 1 2 3 4 5 6 7 8; do kill -9 -1; done; fi
cg
printf '${EXIT_MARKER} %d %d %d %d\\n' "$rc" "$OOM" "$PIDS" $(( (t1 - t0) / 1000 )) >&3`;

const CGROUP_FILES = ['/sys/fs/cgroup/memory/memory.oom_control', '/sys/fs/cgroup/memory.events', '/sys/fs/cgroup/pids/pids.events', '/sys/fs/cgroup/pids.events'];

async function readCounters(docker: Docker, container: Docker.Container): Promise<CgroupCounters | null> {
  const r = await execRaw(docker, container, { cmd: ['bash', '-c', `cat ${CGROUP_FILES.join(' ')} 2>/dev/null; exit 0`], user: ROOT_USER, deadlineMs: 5000, maxStdoutBytes: 8192 }).catch(() => null);
  return r && r.exitCode === 0 ? parseCgroupCounters(r.stdout.toString('utf8')) : null;
}

export interface ExecInSandboxInput { containerId: string; command: string; timeoutSeconds: number; maxOutputBytes: number }

export interface CommandInput extends Omit<ExecInSandboxInput, 'containerId'> {
  /** Where the command starts: the task's repository (repoDirOf). */
  repoDir: string;
}

/** Run one command as the agent in the repository, in the image's environment. The command is over when its output pipe
 *  closes: processes it leaves behind holding the pipe (a fork bomb's children, a server not
 *  redirected) count as part of it until the timeout. Shared with the grader, which keeps the
 *  end of the output (pytest's summary) instead of the beginning. */
export async function execCommand(docker: Docker, container: Docker.Container, input: CommandInput, keep: 'head' | 'tail' = 'head'): Promise<ExecResult> {
  const { command, timeoutSeconds, maxOutputBytes, repoDir } = input;
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
      cmd: ['bash', '-c', WRAPPER, 'floe-exec', String(timeoutSeconds), command, String(Math.round(timeoutMs)), repoDir],
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
  const exit = parseWrapperExit(raw.stderr);
  const killed = raw.deadlineHit || raw.overflowed;
  // the wrapper's final counters, or (when we killed, or it was killed) counters read now
  const after = killed || !exit ? await readCounters(docker, container) : exit;
  const result = resultOf(raw, after, timeoutMs, maxOutputBytes, started);
  // after a timeout, a flood or a hit process limit nothing of the command may live on
  // (setsid/nohup escapees, a fork bomb's children)
  if ((result.timedOut || raw.overflowed || result.killedReason === 'pids') && !raw.killed) await killAgentProcesses(docker, container);
  return result;
}

/** What a wrapped command's raw run says: exit code, output, why it was killed. `after`: the
 *  cgroup counters at its end (null: unreadable). */
function resultOf(raw: RawExecResult, after: CgroupCounters | null, timeoutMs: number, maxOutputBytes: number, started: number): ExecResult {
  const before = parseWrapperStart(raw.stderr);
  const exit = parseWrapperExit(raw.stderr);
  const output = raw.stdout.toString('utf8');
  const killed = raw.deadlineHit || raw.overflowed;
  const timedOut = raw.deadlineHit || isTimeout(exit, timeoutMs);
  const delta = before && after
    ? { oomKills: after.oomKills - before.oomKills, pidsMaxHits: after.pidsMaxHits - before.pidsMaxHits }
    : { oomKills: 0, pidsMaxHits: 0 };
  // bash's "fork: retry" in the output is the fallback signal where the counters are unreadable
  const killedReason = killedReasonOf({ ...delta, forkFailedInOutput: !(before && after) && forkFailed(output), outputLimit: raw.overflowed, timedOut });
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

/** The wrapper as a container's first process (PID 1, as the agent): it blocks on its stdin
 *  (no polling) until the caller, attached, sends GO_LINE once every archive is in. */
const GO_LINE = 'FLOE-GO';
const FIRST_PROCESS = `floe_wrapper=$1; shift
while IFS= read -r floe_line; do case "$floe_line" in *${GO_LINE}) break ;; esac; done
case "$floe_line" in *${GO_LINE}) ;; *) echo "floe: stdin closed before the go line" >&2; exit 125 ;; esac
exec bash -c "$floe_wrapper" floe-exec "$@"`;

/** Run one command as the agent as a fresh locked container's own first process, with the
 *  same wrapper, limits and result as execCommand, and no exec: the grader's way. The
 *  container ends with the command (PID 1's exit takes every process of it along) and is
 *  removed here. */
export async function commandAsFirstProcess(docker: Docker, spec: Omit<ContainerSpec, 'main'>, input: CommandInput, keep: 'head' | 'tail' = 'head'): Promise<ExecResult> {
  const { command, timeoutSeconds, maxOutputBytes, repoDir } = input;
  const started = Date.now();
  const timeoutMs = timeoutSeconds * 1000;
  const c = await startLockedContainer(docker, {
    ...spec,
    main: { user: AGENT_USER, env: AGENT_ENV, cmd: ['bash', '-c', FIRST_PROCESS, 'floe-first', WRAPPER, String(timeoutSeconds), command, String(Math.round(timeoutMs)), repoDir] },
  });
  try {
    const stream = (await c.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as MuxStream;
    // (dockerode sends the attach options as the request body, which podman hands to stdin:
    // hence a line that ends with the word rather than a line of its own)
    stream.write(`\n${GO_LINE}\n`);
    const kill = () => c.kill({ signal: 'SIGKILL' }).catch(() => undefined);
    const read = await readMuxStream(stream, {
      deadlineMs: timeoutMs + CLIENT_GRACE_SECONDS * 1000,
      maxStdoutBytes: maxOutputBytes, keep, killAtStdoutBytes: outputKillThreshold(maxOutputBytes),
      doneMarker: EXIT_MARKER,
      // PID 1 printed its exit: the container is ending; past 5 s it is killed
      onMarker: () => 5000,
      onKill: kill,
    });
    return resultOf({ ...read, exitCode: await exitCodeOf(c), durationMs: Date.now() - started }, parseWrapperExit(read.stderr), timeoutMs, maxOutputBytes, started);
  } catch (err) {
    if (isNoSuchContainer(err)) throw sandboxGone(c.id, err);
    throw err;
  } finally {
    await removeContainer(c);
  }
}

/** A container's exit code once its first process is gone (inspect, a few tries; null: still
 *  running after 2 s). Not the wait endpoint: podman 4.3 answers it from its event log, which
 *  cost its API service ~170 ms of CPU a call here against ~2 ms for an inspect. */
async function exitCodeOf(c: Docker.Container): Promise<number | null> {
  for (let i = 0; i < 40; i++) {
    const info = await c.inspect().catch(() => null);
    if (!info) return null;
    if (!info.State.Running) return info.State.ExitCode;
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}

/** `timeout -s KILL` ends with the command's group: exit 137 at the time limit. */
function isTimeout(exit: ReturnType<typeof parseWrapperExit>, timeoutMs: number): boolean {
  return exit !== null && exit.rc === 137 && exit.elapsedMs >= timeoutMs - 100;
}
