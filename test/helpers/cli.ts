import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

/** Run the real `floe` CLI as a user would. Asynchronous on purpose: the test process hosts
 *  workers, whose event loop a synchronous spawn would block. */
export const floeBin = path.join(import.meta.dirname, '..', '..', 'bin', 'floe');

export function floe(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 120_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    // its own process group, as a terminal's job: a kill reaches whatever floe started in it
    const child = spawn(floeBin, args, { env: { ...process.env, ...env }, detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

/** Signal a process started with `detached: true` and everything in its group. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try { process.kill(-child.pid!, signal); } catch { /* gone */ }
}
