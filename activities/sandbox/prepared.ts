import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Task } from '../../core/taskModel.js';
import { WORK_REPO_DIR, patchFiles, repoDirOf } from '../../core/sandboxPolicy.js';
import { graderOnlyRepoFiles } from '../../core/taskLayouts.js';

/** The fast path's repository for directory sources (SandboxPipeline 'fast'): what
 *  copyRepository + freshHistory (+ the seal) make inside a container — the task's files owned
 *  by the agent, without .git or caches, the hidden test patch's new files and the layout's
 *  grader-only files removed, a history of one fresh commit (same author, dates and message, so
 *  the same commit id), root's sealed copy of it — made once per task on the worker's host by
 *  git, and kept as two tar archives that go into every sandbox and grader of the task by
 *  putArchive (a few ms; no exec, which costs podman a conmon and a runc per call). Nothing of
 *  the host's git or config reaches the container beyond the repository itself: git runs with
 *  no system or global config. Rebuilt when the folder changes (sizes, modes, mtimes). */

export interface PreparedRepository {
  baseCommit: string;
  /** tar for /work's root: `./repo/…` with its .git, owned by the agent (1000). */
  work: Buffer;
  /** tar for /grade's root: `./base.git/…`, root's sealed copy, and `./agent.config`, the
   *  agent's .git/config as made (AGENT_CONFIG_COPY) (uid 0). */
  sealed: Buffer;
}

const run = promisify(execFile);
const MAX_TAR_BYTES = 64 * 1024 * 1024;
const SKIP = new Set(['.git', '__pycache__', '.pytest_cache']);
const cache = new Map<string, { signature: string; prepared: Promise<PreparedRepository | null> }>();

/** What the in-container path would see of the folder: names, sizes, modes, mtimes. */
function signatureOf(dir: string, hidden: string[]): string {
  const h = crypto.createHash('sha256');
  h.update(JSON.stringify(hidden));
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (SKIP.has(e.name)) continue;
      const r = rel ? `${rel}/${e.name}` : e.name;
      const st = fs.lstatSync(path.join(dir, r));
      h.update(`${r}\0${st.mode}\0${st.size}\0${st.mtimeMs}\n`);
      if (e.isDirectory()) walk(r);
    }
  };
  walk('');
  return h.digest('hex');
}

/** The task's prepared repository, or null where the fast path does not apply (image
 *  sources, a folder too large to keep in memory, no git on this host): the caller then
 *  prepares it inside the container. */
export function preparedRepository(task: Task): Promise<PreparedRepository | null> {
  const src = task.source;
  if (src.kind !== 'directory' || repoDirOf(src) !== WORK_REPO_DIR) return Promise.resolve(null);
  const hidden = [...patchFiles(task.testPatch).filter((f) => f.isNew).map((f) => f.path), ...graderOnlyRepoFiles(task.layout)];
  let signature: string;
  try {
    signature = signatureOf(src.path, hidden);
  } catch {
    return Promise.resolve(null);
  }
  const key = `${task.instanceId}\0${src.path}`;
  const hit = cache.get(key);
  if (hit && hit.signature === signature) return hit.prepared;
  const prepared = build(src.path, hidden).catch(() => null);
  if (cache.size > 1024) cache.clear();
  cache.set(key, { signature, prepared });
  return prepared;
}

async function build(dir: string, hidden: string[]): Promise<PreparedRepository | null> {
  const tmp = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'floe-prepared-'));
  try {
    const work = path.join(tmp, 'w');
    const repo = path.join(work, 'repo');
    const grade = path.join(tmp, 'g');
    await fs.promises.mkdir(repo, { recursive: true, mode: 0o755 });
    await fs.promises.mkdir(grade, { mode: 0o700 });
    await fs.promises.chmod(repo, 0o755);
    // the same files the in-container path copies (tarOfDirectory's excludes)
    await run('bash', ['-c', 'set -o pipefail; tar -C "$1" --exclude=.git --exclude=__pycache__ --exclude=.pytest_cache -cf - . | tar -C "$2" -xf -', 'floe', dir, repo], { maxBuffer: 1024 * 1024 });
    for (const f of hidden) {
      const p = path.resolve(repo, f);
      if (p.startsWith(`${repo}${path.sep}`)) await fs.promises.rm(p, { recursive: true, force: true });
    }
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: tmp, LANG: 'C.UTF-8', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
    const git = (...args: string[]) => run('git', args, { cwd: repo, env: { ...env, GIT_AUTHOR_DATE: '2000-01-01T00:00:00Z', GIT_COMMITTER_DATE: '2000-01-01T00:00:00Z' }, maxBuffer: 1024 * 1024 });
    // FRESH_HISTORY (repository.ts), step for step
    await git('init', '-q', '-b', 'main');
    await git('config', 'user.name', 'agent');
    await git('config', 'user.email', 'agent@floe.invalid');
    await git('add', '-A');
    await git('-c', 'core.hooksPath=/dev/null', 'commit', '-q', '--no-verify', '--allow-empty', '-m', 'initial');
    for (const p of ['logs', 'hooks', 'COMMIT_EDITMSG', 'description', 'branches']) await fs.promises.rm(path.join(repo, '.git', p), { recursive: true, force: true });
    const baseCommit = (await git('rev-parse', 'HEAD')).stdout.trim();
    // SEAL (repository.ts): root's copy with its own config and excludes
    const sealed = path.join(grade, 'base.git');
    await run('cp', ['-r', path.join(repo, '.git'), sealed]);
    await fs.promises.writeFile(path.join(sealed, 'config'), '[core]\n\trepositoryformatversion = 0\n\tbare = false\n');
    await fs.promises.mkdir(path.join(sealed, 'info'), { recursive: true });
    await fs.promises.writeFile(path.join(sealed, 'info', 'exclude'), '__pycache__/\n*.py[co]\n.pytest_cache/\n*.egg-info/\n');
    await fs.promises.copyFile(path.join(repo, '.git', 'config'), path.join(grade, 'agent.config'));
    await fs.promises.chmod(path.join(grade, 'agent.config'), 0o600);
    const tarOf = async (cwd: string, what: string[], uid: number) => (await run('tar', ['-C', cwd, `--owner=${uid}`, `--group=${uid}`, '--numeric-owner', '-cf', '-', ...what], { encoding: 'buffer', maxBuffer: MAX_TAR_BYTES })).stdout;
    return { baseCommit, work: await tarOf(work, ['./repo'], 1000), sealed: await tarOf(grade, ['./base.git', './agent.config'], 0) };
  } finally {
    await fs.promises.rm(tmp, { recursive: true, force: true });
  }
}
