import { spawn } from 'node:child_process';
import { PassThrough, type Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Task } from '../../core/taskModel.js';
import { patchFiles, repoDirOf } from '../../core/sandboxPolicy.js';
import { graderOnlyRepoFiles } from '../../core/taskLayouts.js';
import { AGENT_USER, ROOT_USER, runScript } from './exec.js';
import { removeContainer, unixNow } from './containerSpec.js';
import { heartbeat } from './heartbeat.js';

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
  // through a PassThrough: the child's stdout socket piped straight into an exec's hijacked
  // stream delivered nothing (measured: 0 bytes arrived where the PassThrough carried 10 kB)
  return { stream: child.stdout.pipe(new PassThrough()), done };
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

/** Files of the repository as a script prints them: `== <path>` then the file in base64 (an
 *  empty line where there is no such file), one pair a file. $1: the repository; the rest: the
 *  files. */
export const READ_FILES = `cd "$1"; shift
for f in "$@"; do printf '== %s\\n' "$f"; if [ -f "$f" ]; then base64 -w0 "$f"; fi; echo; done`;

/** What READ_FILES printed: path → content ('' for a file that was not there, or empty).
 *  Stops at the first line that is not a file's header, so output may follow the files. */
export function decodeFiles(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i + 1 < lines.length; i += 2) {
    if (!lines[i].startsWith('== ')) break;
    out[lines[i].slice(3)] = Buffer.from(lines[i + 1], 'base64').toString('utf8');
  }
  return out;
}

export interface PreparedInContainer {
  baseCommit: string;
  /** The files asked for in `read`, as the repository had them before the fresh history. */
  files: Record<string, string>;
}

/** Put the task's repository in place, owned by the agent, with a history of one fresh commit
 *  and the hidden files removed, in one exec: the repository's tar goes into the exec's stdin
 *  and is extracted by the agent, who then makes the fresh history. `seal` (the agent's
 *  sandbox): root then keeps a sealed copy of the commit, a copy of .git/config and the base id
 *  (a second exec). `read`: files to read before the fresh history removes them (R2E-Gym's
 *  grader-only run_tests.sh). Directory sources usually come in with the mount roots instead
 *  (prepared.ts); this is the way for image sources. */
export async function prepareRepository(docker: Docker, container: Docker.Container, task: Task, o: { seal: boolean; keepHistory?: boolean; read?: string[] }): Promise<PreparedInContainer> {
  const src = task.source;
  const dir = repoDirOf(src);
  const hidden = [...patchFiles(task.testPatch).filter((f) => f.isNew).map((f) => f.path), ...graderOnlyRepoFiles(task.layout)];
  const read = o.read ?? [];
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
    // $1: the repository, $2: how many files to read, then those files, then the hidden ones
    const script = `set -e
${extract}
floe_repo=$1; floe_n=$2; shift 2
(set -- "$floe_repo" "\${@:1:floe_n}"; ${READ_FILES.replace(/\n/g, '\n  ')})
shift "$floe_n"; set -- "$floe_repo" "$@"
${(keep ? KEEP_HISTORY : FRESH_HISTORY).replace(/^set -e\n/, '')}`;
    const [out] = await Promise.all([
      runScript(docker, container, AGENT_USER, script, [dir, String(read.length), ...read, ...hidden], { stdin: stream, deadlineMs: 600_000, what: 'copying the repository and its fresh history' }),
      done,
    ]);
    const baseCommit = out.trim().split('\n').pop() ?? '';
    heartbeat('repository copied');
    if (o.seal) await runScript(docker, container, ROOT_USER, `${SEAL}\ncp "$1/.git/config" ${AGENT_CONFIG_COPY}\nprintf '%s\\n' "$2" > ${BASE_FILE}; chmod 644 ${BASE_FILE}`, [dir, baseCommit], { what: 'sealing the base commit' });
    return { baseCommit, files: decodeFiles(out) };
  } finally {
    if (helper) await removeContainer(helper);
  }
}

