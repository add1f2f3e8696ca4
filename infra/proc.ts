import { spawn, spawnSync, type SpawnSyncOptions } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/** Small process helpers for infra: run to completion, start detached daemons, wait for ports. */

export function log(component: string, msg: string): void {
  process.stderr.write(`[floe up] ${component.padEnd(10)} ${msg}\n`);
}

export interface RunResult { code: number; stdout: string; stderr: string }

export function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}): RunResult {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) return { code: 127, stdout: '', stderr: String(r.error.message) };
  return { code: r.status ?? 1, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '') };
}

/** Run a command, streaming its output to our stderr, and throw with a next step if it fails. */
export function mustRun(cmd: string, args: string[], what: string, opts: SpawnSyncOptions = {}): void {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'], ...opts });
  if (r.error || r.status !== 0) {
    throw new Error(`${what} failed (${cmd} ${args.join(' ')} → ${r.error?.message ?? `exit ${r.status}`}); see the output above`);
  }
}

export function which(cmd: string): string | null {
  const r = run('sh', ['-c', `command -v ${cmd}`]);
  return r.code === 0 ? r.stdout.trim() : null;
}

export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** apt-get install the named Debian packages (only when running as root; otherwise explain). */
export function aptInstall(component: string, pkgs: string[]): void {
  if (!isRoot()) throw new Error(`${component}: missing Debian packages ${pkgs.join(' ')}; run: sudo apt-get install -y ${pkgs.join(' ')}`);
  log(component, `installing Debian packages: ${pkgs.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const upd = run('apt-get', ['update', '-q'], { env });
  if (upd.code !== 0) log(component, `apt-get update failed (continuing): ${upd.stderr.trim().split('\n').pop()}`);
  mustRun('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...pkgs], `apt-get install ${pkgs.join(' ')}`, { env });
}

/** Start a long-lived process detached from us, logging to a file, recording its pid. */
export function startDaemon(opts: { name: string; cmd: string; args: string[]; logFile: string; pidFile: string; env?: NodeJS.ProcessEnv; cwd?: string; uid?: number; gid?: number }): number {
  fs.mkdirSync(path.dirname(opts.logFile), { recursive: true });
  const out = fs.openSync(opts.logFile, 'a');
  const child = spawn(opts.cmd, opts.args, {
    detached: true,
    stdio: ['ignore', out, out],
    env: opts.env ?? process.env,
    // a daemon outlives its starter, whose working directory may go (a removed clone or
    // worktree: podman's conmon then fails every exec): it runs in its pid file's folder
    cwd: opts.cwd ?? path.dirname(opts.pidFile),
    uid: opts.uid,
    gid: opts.gid,
  });
  child.unref();
  fs.closeSync(out);
  if (child.pid === undefined) throw new Error(`${opts.name}: could not start ${opts.cmd}; see ${opts.logFile}`);
  fs.writeFileSync(opts.pidFile, String(child.pid));
  return child.pid;
}

export function readPid(pidFile: string): number | null {
  try {
    const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0].trim());
    if (!Number.isInteger(pid) || pid <= 0) return null;
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

/** Stop a daemon started by startDaemon: SIGTERM its process group, then SIGKILL after a grace period. */
export async function stopDaemon(pidFile: string, graceMs = 10_000): Promise<boolean> {
  const pid = readPid(pidFile);
  if (pid === null) return false;
  const signal = (sig: NodeJS.Signals) => {
    try { process.kill(-pid, sig); } catch { try { process.kill(pid, sig); } catch { /* gone */ } }
  };
  signal('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    try { process.kill(pid, 0); } catch { break; }
    await sleep(100);
  }
  try { process.kill(pid, 0); signal('SIGKILL'); } catch { /* exited */ }
  fs.rmSync(pidFile, { force: true });
  return true;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function portOpen(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (ok: boolean) => { s.destroy(); resolve(ok); };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, hint: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(250);
  }
  throw new Error(`${what} did not become ready within ${Math.round(timeoutMs / 1000)} s; ${hint}`);
}

export function tail(file: string, lines = 15): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
