import crypto from 'node:crypto';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { readTarFiles, tarArchive } from './tar.js';

/** PID 1 of a sandbox (root): reaps orphans (killed commands leave them), ignores every
 *  catchable signal, and — the fast path — runs root's jobs without an exec. A podman exec
 *  costs a conmon, a runc and a `podman container cleanup` process (~0.1 core-s on these
 *  machines); a job costs one putArchive and a few getArchive calls, which podman serves in
 *  its own process. The request goes into /grade, root's own tmpfs (mode 0700): the agent can
 *  neither read it, nor forge one, nor see the answer. The keeper waits on a FIFO it alone holds
 *  (`read -t`, a builtin: no fork while idle) and looks for a request every 50 ms. */

/** The label that says a container's keeper takes jobs (containers made before it did not). */
export const KEEPER_LABEL = 'floe.keeper';
export const KEEPER_JOBS = 'jobs';

/** The keeper without jobs (the legacy path). */
export const KEEPER = 'trap "" HUP INT QUIT TERM USR1 USR2 PIPE ALRM; while :; do sleep 3600 & wait $!; done';

const JOB_DIR = '/grade/floe-job';
const SIGNALS = 'HUP INT QUIT TERM USR1 USR2 PIPE ALRM';

/** The keeper that takes jobs. A job is a folder JOB_DIR with `script`, `args` (one a line),
 *  `secs`, `id` and, last in the archive, `ready`; the keeper moves it aside, runs the script
 *  as root under `timeout -s KILL` (signals back to their defaults), and leaves `out`, `err`,
 *  `rc` and the job's `id` in JOB_DIR.done, renamed there whole when it is finished. */
export const KEEPER_WITH_JOBS = `trap "" ${SIGNALS}
J=${JOB_DIR}
if mkfifo -m 600 /run/floe-keeper.fifo 2>/dev/null && exec 9<>/run/floe-keeper.fifo; then
  floe_nap() { read -r -t 0.05 -u 9 _; }
else
  floe_nap() { sleep 0.2; }
fi
while :; do
  if [ -f $J/ready ]; then
    rm -rf $J.run $J.done; mv $J $J.run
    mapfile -t floe_args < $J.run/args
    read -r floe_secs < $J.run/secs
    ( trap - ${SIGNALS}; exec timeout -s KILL "$floe_secs" bash $J.run/script "\${floe_args[@]}" ) > $J.run/out 2> $J.run/err < /dev/null
    echo $? > $J.run/rc
    mv $J.run $J.done
  fi
  floe_nap
done`;

export interface KeeperJobResult { exitCode: number; stdout: Buffer; stderr: string }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Run a bash script as root through the keeper. null: no answer within timeoutSeconds + 5 s
 *  (a keeper that takes no jobs, or one that is stuck); the caller then uses an exec. Throws
 *  what the container engine throws (the container is gone, say). */
export async function runKeeperJob(container: Docker.Container, job: { script: string; args: string[]; timeoutSeconds: number }): Promise<KeeperJobResult | null> {
  if (job.args.some((a) => a.includes('\n'))) throw new Error(`a keeper job's arguments are one a line: ${JSON.stringify(job.args)}`);
  const id = crypto.randomBytes(8).toString('hex');
  const file = (name: string, data: string) => ({ name: `floe-job/${name}`, type: 'file' as const, mode: 0o600, uid: 0, gid: 0, data: Buffer.from(data, 'utf8') });
  await container.putArchive(tarArchive([
    { name: 'floe-job/', type: 'dir', mode: 0o700, uid: 0, gid: 0 },
    file('script', job.script), file('args', job.args.map((a) => `${a}\n`).join('')),
    file('secs', `${job.timeoutSeconds}\n`), file('id', `${id}\n`), file('ready', ''),
  ]), { path: '/grade' });
  const until = Date.now() + (job.timeoutSeconds + 5) * 1000;
  for (let wait = 20; Date.now() < until; wait = Math.min(250, Math.round(wait * 1.5))) {
    await sleep(wait);
    let archive: Buffer;
    try {
      archive = await readAll((await container.getArchive({ path: `${JOB_DIR}.done` })) as unknown as Readable);
    } catch (err) {
      // podman: 404 "no such container - no such file or directory" while the folder is not there
      const e = err as { statusCode?: number; message?: string };
      if (e.statusCode === 404 && /no such file/i.test(e.message ?? '')) continue;
      throw err;
    }
    const files = new Map([...readTarFiles(archive)].map(([k, v]) => [k.replace(/^floe-job\.done\//, ''), v]));
    if (files.get('id')?.toString('utf8').trim() !== id) continue; // an earlier job's answer
    const rc = Number(files.get('rc')?.toString('utf8').trim());
    return { exitCode: Number.isInteger(rc) ? rc : -1, stdout: files.get('out') ?? Buffer.alloc(0), stderr: files.get('err')?.toString('utf8') ?? '' };
  }
  return null;
}
