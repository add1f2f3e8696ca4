import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Task } from '../../core/taskModel.js';
import { patchFiles, repoDirOf } from '../../core/sandboxPolicy.js';
import { graderOnlyRepoFiles } from '../../core/taskLayouts.js';
import { AGENT_USER, ROOT_USER, runScript } from './exec.js';
import { removeContainer, unixNow } from './containerSpec.js';
import { heartbeat, keepAlive } from './heartbeat.js';

/** Repository preparation: the task's repository where it runs (/testbed for image sources,
 *  /work/repo for folders), owned by the agent, with a history of one fresh commit, and the
 *  files the hidden test patch adds removed. root keeps a sealed copy of that commit. */

export const SEALED_GIT_DIR = '/grade/base.git';

/** The image a task's sandbox runs: the task's own for image sources, else floe's. */
export function imageFor(task: Task, defaultImage: string): string {
  return task.source.kind === 'image' ? task.source.image : defaultImage;
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

/** $1: the repository; the rest: files to remove (what the hidden test patch adds). */
const FRESH_HISTORY = `set -e
cd "$1"; shift
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

/** sandbox.removeHistory false (tests and the shortcut ablation): the image's history stays,
 *  and the task's base (hidden files removed) is one more commit on top of it. $1: the
 *  repository; the rest: files to remove. */
const KEEP_HISTORY = `set -e
cd "$1"; shift
for f in "$@"; do rm -rf -- "$f"; done
git config user.name agent
git config user.email agent@floe.invalid
git add -A
GIT_AUTHOR_DATE=2000-01-01T00:00:00Z GIT_COMMITTER_DATE=2000-01-01T00:00:00Z \\
  git -c core.hooksPath=/dev/null commit -q --no-verify --allow-empty -m "the task's base"
git rev-parse HEAD`;

/** root keeps a sealed copy of the fresh commit that extractDiff diffs against, with its own
 *  config: nothing the agent does to .git changes what the diff is taken against. */
const SEAL = `set -e
rm -rf ${SEALED_GIT_DIR}
cp -r "$1/.git" ${SEALED_GIT_DIR}
printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n' > ${SEALED_GIT_DIR}/config
mkdir -p ${SEALED_GIT_DIR}/info
printf '__pycache__/\\n*.py[co]\\n.pytest_cache/\\n*.egg-info/\\n' > ${SEALED_GIT_DIR}/info/exclude`;

/** Where root leaves the sealed base commit's id for the agent's diff check to read (/run is
 *  root's, mode 755: the agent reads it and cannot change it). */
export const BASE_FILE = '/run/floe-base';

/** root's copy of the agent's .git/config as the sandbox was made (the fast path's one-exec
 *  diff takes it only while the agent's config is unchanged). */
export const AGENT_CONFIG_COPY = '/grade/agent.config';

/** Put the task's repository in place with a history of one fresh commit, hidden tests
 *  removed; returns the commit id. */
export async function prepareRepository(docker: Docker, container: Docker.Container, task: Task, o: { keepHistory?: boolean } = {}): Promise<string> {
  await copyRepository(docker, container, task, o);
  return freshHistory(docker, container, task, o);
}

/** The fast path's preparation (SandboxPipeline 'fast'): the same result as copyRepository +
 *  freshHistory in fewer round trips. The repository's tar goes into the exec's stdin and is
 *  extracted by the agent, who then makes the fresh history in the same exec; root seals it in
 *  a second (o.seal false, the grader: no seal, one exec). Returns the commit id. */
export async function prepareRepositoryFast(docker: Docker, container: Docker.Container, task: Task, o: { seal: boolean; keepHistory?: boolean }): Promise<string> {
  const src = task.source;
  const dir = repoDirOf(src);
  const hidden = [...patchFiles(task.testPatch).filter((f) => f.isNew).map((f) => f.path), ...graderOnlyRepoFiles(task.layout)];
  // directory sources: the host's tar (owned by the agent, no .git); images: /testbed from a
  // stopped helper container, whose archive has the folder as its first component
  const keep = src.kind === 'image' && o.keepHistory === true;
  const extract = src.kind === 'directory'
    ? 'tar -x --no-same-owner -C "$1"'
    : `tar -x --no-same-owner -C "$1" --strip-components=1${keep ? '' : ' --exclude=.git'}`;
  let helper: Docker.Container | null = null;
  let stream: Readable;
  let done: Promise<void> = Promise.resolve();
  if (src.kind === 'directory') {
    const tar = tarOfDirectory(src.path);
    stream = tar.stream;
    done = tar.done;
  } else {
    helper = await docker.createContainer({ Image: src.image, Entrypoint: ['true'], Cmd: [], Labels: { 'floe.sandbox': '1', 'floe.role': 'source', 'floe.created': String(unixNow()) }, HostConfig: { NetworkMode: 'none' } });
    stream = (await helper.getArchive({ path: '/testbed' })) as unknown as Readable;
  }
  try {
    const script = `set -e\n${extract}\n${(keep ? KEEP_HISTORY : FRESH_HISTORY).replace(/^set -e\n/, '')}`;
    const [out] = await Promise.all([
      runScript(docker, container, AGENT_USER, script, [dir, ...hidden], { stdin: stream, deadlineMs: 600_000, what: 'copying the repository and its fresh history' }),
      done,
    ]);
    const sha = out.trim().split('\n').pop() ?? '';
    heartbeat('repository copied');
    if (o.seal) await runScript(docker, container, ROOT_USER, `${SEAL}\ncp "$1/.git/config" ${AGENT_CONFIG_COPY}\nprintf '%s\\n' "$2" > ${BASE_FILE}; chmod 644 ${BASE_FILE}`, [dir, sha], { what: 'sealing the base commit' });
    return sha;
  } finally {
    if (helper) await removeContainer(helper);
  }
}

/** Step 1: the repository's files, owned by the agent, where the task runs. */
export async function copyRepository(docker: Docker, container: Docker.Container, task: Task, o: { keepHistory?: boolean } = {}): Promise<void> {
  const src = task.source;
  const dir = repoDirOf(src);
  if (src.kind === 'directory') {
    const tar = tarOfDirectory(src.path);
    await keepAlive(Promise.all([container.putArchive(tar.stream, { path: dir }), tar.done]), 'copying the repository');
  } else {
    await copyTestbed(docker, container, src.image, dir, o.keepHistory === true);
  }
  heartbeat('repository copied');
}

/** Step 2: hidden files removed (what the hidden test patch adds: a dataset image may ship it;
 *  the layout's grader-only files), one fresh commit, and root's sealed copy of it. */
export async function freshHistory(docker: Docker, container: Docker.Container, task: Task, o: { keepHistory?: boolean } = {}): Promise<string> {
  const dir = repoDirOf(task.source);
  const hidden = [...patchFiles(task.testPatch).filter((f) => f.isNew).map((f) => f.path), ...graderOnlyRepoFiles(task.layout)];
  const keep = task.source.kind === 'image' && o.keepHistory === true;
  const sha = (await runScript(docker, container, AGENT_USER, keep ? KEEP_HISTORY : FRESH_HISTORY, [dir, ...hidden], { what: keep ? 'the base commit on the kept history' : 'fresh git history' })).trim().split('\n').pop() ?? '';
  await runScript(docker, container, ROOT_USER, SEAL, [dir], { what: 'sealing the base commit' });
  return sha;
}

/** Image sources: the image's /testbed, read from a stopped helper container, is extracted as
 *  the agent (so the agent owns it) into the sandbox's /testbed tmpfs, without any .git. The
 *  path stays the same, so the environment's editable install of it keeps working. */
async function copyTestbed(docker: Docker, container: Docker.Container, image: string, dir: string, keepHistory = false): Promise<void> {
  const helper = await docker.createContainer({ Image: image, Entrypoint: ['true'], Cmd: [], Labels: { 'floe.sandbox': '1', 'floe.role': 'source', 'floe.created': String(unixNow()) }, HostConfig: { NetworkMode: 'none' } });
  try {
    const archive = (await helper.getArchive({ path: '/testbed' })) as unknown as Readable;
    await runScript(docker, container, AGENT_USER, `tar -x --no-same-owner -C "$1" --strip-components=1${keepHistory ? '' : ' --exclude=.git'}`, [dir], { stdin: archive, deadlineMs: 600_000, what: 'copying /testbed from the task image' });
  } finally {
    await removeContainer(helper);
  }
}
