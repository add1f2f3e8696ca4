/** Sandbox and grading types and pure rules, shared by the sandbox activities, the grader,
 *  workflows and tests. No I/O, no Node APIs: workflows import these. */

/** Resource limits of one sandbox (field names as in the run config's `sandbox` section). */
export interface SandboxLimits {
  cpus: number;
  memoryMb: number;
  pidsLimit: number;
  /** Writable space of the agent, split over its tmpfs mounts (see sandboxTmpfs). */
  diskMb: number;
  commandTimeoutSeconds: number;
  maxOutputBytes: number;
  /** false: an image's git history stays in the agent's sandbox (under one more commit, the
   *  task's base), the door the recipe locks. Only tests and the shortcut ablation turn it off
   *  (config sandbox.removeHistory); absent = true. Directory sources have no history to keep. */
  removeHistory?: boolean;
}

export type KilledReason = 'timeout' | 'output_limit' | 'oom' | 'pids';

export interface ExecResult {
  exitCode: number;
  /** stdout and stderr of the command, interleaved as written (one pipe), capped. */
  output: string;
  /** Bytes of output seen in total, including what was dropped. */
  outputBytes: number;
  truncated: boolean;
  timedOut: boolean;
  killedReason: KilledReason | null;
  durationMs: number;
}

export type TestGroup = 'FAIL_TO_PASS' | 'PASS_TO_PASS';
export type TestOutcome = 'passed' | 'failed' | 'error' | 'skipped' | 'missing';

export interface GradeResult {
  /** The task's harness resolved it: for SWE-bench-family rows the swebench package's rule, for
   *  R2E-Gym rows every expected output matched, otherwise every test passed. */
  passed: boolean;
  /** Which harness graded it: 'swebench', 'r2e-gym' or 'pytest' (floe's plugin runner). */
  harness: string;
  tests: { id: string; group: TestGroup; outcome: TestOutcome }[];
  /** Why the agent's diff or the test patch did not apply; null when both applied. */
  applyError: string | null;
  timedOut: boolean;
  durationMs: number;
  /** Apply and pytest output, capped (the end is kept: it holds pytest's summary). */
  log: string;
}

// ------------------------------------------------------------------------------ mounts

/** A size-limited tmpfs of the sandbox. */
export interface TmpfsMount {
  path: string;
  sizeMb: number;
  /** Who owns the mount's root directory: the agent (uid 1000) or root (agent cannot enter). */
  owner: 'agent' | 'root';
  mode: number;
}

/** Size of /dev/shm (podman's default is 64 MB, unbounded by diskMb otherwise). */
export const SHM_MB = 16;

/** Where the repository lives in the sandbox: image sources keep it where the image keeps it
 *  (/testbed: editable installs and the dataset's eval script point there); directory sources
 *  (floe's toy suite) run in floe's image, at /work/repo. */
export const TESTBED_DIR = '/testbed';
export const WORK_REPO_DIR = '/work/repo';

export function repoDirOf(source: { kind: string }): string {
  return source.kind === 'image' ? TESTBED_DIR : WORK_REPO_DIR;
}

/** Every place the agent can write, each a size-limited tmpfs on a read-only root filesystem:
 *  the repository's mount gets diskMb (/work, or /testbed for image sources, where /work keeps
 *  a small scratch space), scratch places a share of it. /var/tmp and /run are listed because
 *  podman adds unsized tmpfs mounts there for a read-only root. /grade is root's (mode 0700):
 *  the sealed copy of the base commit that extractDiff diffs against. */
export function sandboxTmpfs(limits: Pick<SandboxLimits, 'diskMb'>, repoDir: string = WORK_REPO_DIR): TmpfsMount[] {
  const disk = Math.max(1, Math.floor(limits.diskMb));
  const scratch = Math.min(256, Math.max(16, Math.floor(disk / 4)));
  const atTestbed = repoDir === TESTBED_DIR;
  return [
    { path: '/work', sizeMb: atTestbed ? 16 : disk, owner: 'agent', mode: 0o755 },
    ...(atTestbed ? [{ path: TESTBED_DIR, sizeMb: disk, owner: 'agent' as const, mode: 0o755 }] : []),
    { path: '/tmp', sizeMb: scratch, owner: 'root', mode: 0o1777 },
    { path: '/home/agent', sizeMb: 16, owner: 'agent', mode: 0o755 },
    { path: '/var/tmp', sizeMb: 16, owner: 'root', mode: 0o1777 },
    { path: '/run', sizeMb: 4, owner: 'root', mode: 0o755 },
    { path: '/grade', sizeMb: Math.max(32, Math.floor(disk / 2)), owner: 'root', mode: 0o700 },
  ];
}

/** The memory cgroup limit. tmpfs pages are charged to the container's memory cgroup and cannot
 *  be reclaimed without swap, so a limit of memoryMb alone would let a full disk leave no memory
 *  for processes (the sandbox would OOM on `echo`). The limit therefore adds every tmpfs size:
 *  processes always keep memoryMb, and the host's worst case per sandbox is this figure. */
export function sandboxMemoryMb(limits: Pick<SandboxLimits, 'memoryMb' | 'diskMb'>, repoDir: string = WORK_REPO_DIR): number {
  return Math.ceil(limits.memoryMb) + sandboxTmpfs(limits, repoDir).reduce((n, m) => n + m.sizeMb, 0) + SHM_MB;
}

/** Output beyond this many bytes makes execInSandbox kill the command instead of reading on. */
export function outputKillThreshold(maxOutputBytes: number): number {
  return Math.max(8 * maxOutputBytes, 1024 * 1024);
}

// ------------------------------------------------------------------------------ exec report

/** cgroup counters the exec wrapper reads: OOM kills and refused forks (pids limit hits). */
export interface CgroupCounters { oomKills: number; pidsMaxHits: number }

/** Lines the exec wrapper writes on its own channel: counters at the start, and the exit
 *  status, counters and elapsed time when the command (its foreground part) ends. */
export const START_MARKER = 'FLOE-START';
export const EXIT_MARKER = 'FLOE-EXIT';

export function parseWrapperStart(text: string): CgroupCounters | null {
  const m = new RegExp(`${START_MARKER} (\\d+) (\\d+)`).exec(text);
  return m ? { oomKills: Number(m[1]), pidsMaxHits: Number(m[2]) } : null;
}

export function parseWrapperExit(text: string): (CgroupCounters & { rc: number; elapsedMs: number }) | null {
  const m = new RegExp(`${EXIT_MARKER} (\\d+) (\\d+) (\\d+) (\\d+)`).exec(text);
  return m ? { rc: Number(m[1]), oomKills: Number(m[2]), pidsMaxHits: Number(m[3]), elapsedMs: Number(m[4]) } : null;
}

/** Counters from cgroup files (v1 memory.oom_control / v2 memory.events; pids.events). */
export function parseCgroupCounters(text: string): CgroupCounters {
  return {
    oomKills: Number(/^oom_kill (\d+)/m.exec(text)?.[1] ?? 0),
    pidsMaxHits: Number(/^max (\d+)/m.exec(text)?.[1] ?? 0),
  };
}

const FORK_FAILED = /fork: (retry: )?Resource temporarily unavailable|fork system call failed|can't fork|Cannot fork/i;

/** Why a command was killed, most specific first: the memory limit, the process limit, the
 *  output cap, then the timeout. */
export function killedReasonOf(e: { oomKills: number; pidsMaxHits: number; forkFailedInOutput: boolean; outputLimit: boolean; timedOut: boolean }): KilledReason | null {
  if (e.oomKills > 0) return 'oom';
  if (e.pidsMaxHits > 0 || e.forkFailedInOutput) return 'pids';
  if (e.outputLimit) return 'output_limit';
  if (e.timedOut) return 'timeout';
  return null;
}

export function forkFailed(output: string): boolean {
  return FORK_FAILED.test(output);
}

// ------------------------------------------------------------------------------ patches

export interface PatchFile { path: string; isNew: boolean; isDeleted: boolean }

function unquoteGitPath(p: string): string {
  if (!p.startsWith('"')) return p;
  // git C-quotes paths with special characters: "a/x\tb" or octal escapes for bytes
  const body = p.slice(1, p.lastIndexOf('"'));
  const bytes: number[] = [];
  const simple: Record<string, number> = { n: 10, t: 9, r: 13, '"': 34, '\\': 92, a: 7, b: 8, f: 12, v: 11 };
  for (let i = 0; i < body.length; i++) {
    const ch = body[i];
    if (ch !== '\\') {
      for (const b of new TextEncoder().encode(ch)) bytes.push(b);
      continue;
    }
    const next = body[i + 1];
    if (/[0-7]/.test(next ?? '')) {
      bytes.push(parseInt(body.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(simple[next] ?? (next ?? '\\').charCodeAt(0));
      i += 1;
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

function stripPrefix(p: string): string | null {
  const u = unquoteGitPath(p.trim().split('\t')[0]);
  if (u === '/dev/null') return null;
  return u.replace(/^[ab]\//, '');
}

/** The files a unified diff touches, with whether it creates or deletes each (git-style and
 *  plain `---`/`+++` diffs). */
export function patchFiles(diff: string): PatchFile[] {
  const out = new Map<string, PatchFile>();
  const lines = diff.split('\n');
  let cur: { old: string | null; new: string | null; isNew: boolean; isDeleted: boolean; hunks: boolean } | null = null;
  const flush = () => {
    if (!cur) return;
    const path = cur.new ?? cur.old;
    if (path) out.set(path, { path, isNew: cur.isNew || cur.old === null, isDeleted: cur.isDeleted || cur.new === null });
    cur = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i];
    if (l.startsWith('diff --git ')) {
      flush();
      const m = /^diff --git (\S+|"[^"]*") (\S+|"[^"]*")$/.exec(l);
      cur = { old: m ? stripPrefix(m[1]) : null, new: m ? stripPrefix(m[2]) : null, isNew: false, isDeleted: false, hunks: false };
    } else if (l.startsWith('new file mode') && cur) {
      cur.isNew = true;
    } else if (l.startsWith('deleted file mode') && cur) {
      cur.isDeleted = true;
    } else if (l.startsWith('--- ') && lines[i + 1]?.startsWith('+++ ')) {
      const old = stripPrefix(l.slice(4));
      const neu = stripPrefix(lines[i + 1].slice(4));
      if (cur && !cur.hunks) { cur.old = old; cur.new = neu; cur.hunks = true; }
      else { flush(); cur = { old, new: neu, isNew: false, isDeleted: false, hunks: true }; } // a plain diff: one file per ---/+++ pair
      i += 1;
    } else if (l.startsWith('@@ ')) {
      // skip the hunk's body by its line counts: a removed "-- x" line followed by an added
      // "++ y" line must not read as a file header
      const h = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(l);
      if (!h) continue;
      let oldLeft = h[1] === undefined ? 1 : Number(h[1]);
      let newLeft = h[2] === undefined ? 1 : Number(h[2]);
      while ((oldLeft > 0 || newLeft > 0) && i + 1 < lines.length) {
        const b = lines[++i];
        if (b.startsWith('\\')) continue;
        if (b.startsWith('-')) oldLeft--;
        else if (b.startsWith('+')) newLeft--;
        else { oldLeft--; newLeft--; }
      }
    } else if ((l.startsWith('rename to ') || l.startsWith('copy to ')) && cur) {
      cur.new = l.replace(/^(rename|copy) to /, '');
    }
  }
  flush();
  return [...out.values()];
}

// ------------------------------------------------------------------------------ logs

/** Keep the last maxChars characters of a log, saying how much was cut. */
export function tailText(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  return `[… ${text.length - maxChars} characters cut …]\n${text.slice(text.length - maxChars)}`;
}
