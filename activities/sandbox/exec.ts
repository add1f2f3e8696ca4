import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { heartbeat } from './heartbeat.js';

/** The exec primitive (never hangs; stdout and stderr apart), setup scripts, and killing every
 *  process of the agent. Users and the agent's environment are defined here: every exec in a
 *  sandbox or grader runs as one of them. */

export const AGENT_USER = '1000:1000';
export const ROOT_USER = '0:0';

export const AGENT_ENV = [
  'HOME=/home/agent', 'USER=agent', 'LOGNAME=agent', 'LANG=C.UTF-8', 'TERM=dumb',
  'PAGER=cat', 'GIT_PAGER=cat', 'PYTHONDONTWRITEBYTECODE=1', 'PYTHONUNBUFFERED=1',
];

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
  const stream = (await exec.start({ hijack: true, stdin: o.stdin !== undefined })) as MuxStream;
  const read = await readMuxStream(stream, o);
  let exitCode: number | null = null;
  for (let i = 0; i < 40; i++) {
    const info = await exec.inspect().catch(() => null);
    if (!info) break;
    if (!info.Running) { exitCode = info.ExitCode; break; }
    if (read.deadlineHit || read.overflowed) break; // abandoned
    await new Promise((r) => setTimeout(r, 50));
  }
  return { ...read, exitCode, durationMs: Date.now() - started };
}

/** A hijacked exec or attach stream. */
export type MuxStream = NodeJS.ReadWriteStream & { destroy(): void };

export type StreamOptions = Pick<RawExecOptions, 'stdin' | 'deadlineMs' | 'maxStdoutBytes' | 'keep' | 'killAtStdoutBytes' | 'doneMarker' | 'onMarker' | 'onKill'>;

/** Read a Docker multiplexed stream (an exec's, or an attach to a container's first process)
 *  until it closes, the deadline passes, or the output floods: stdout capped (head or tail),
 *  stderr apart, onKill run at most once and awaited before returning. */
export async function readMuxStream(stream: MuxStream, o: StreamOptions): Promise<Omit<RawExecResult, 'exitCode' | 'durationMs'>> {
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
  let stdout = Buffer.concat(out);
  if (stdout.length > o.maxStdoutBytes) stdout = stdout.subarray(stdout.length - o.maxStdoutBytes);
  return { stdout, stdoutBytes, stderr, deadlineHit, overflowed, killed: killing !== null };
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
