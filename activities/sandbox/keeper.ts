import crypto from 'node:crypto';
import type Docker from 'dockerode';
import { tarArchive } from './tar.js';
import type { MuxStream } from './exec.js';

/** PID 1 of a sandbox (root): reaps orphans (killed commands leave them), ignores every
 *  catchable signal, and runs root's jobs without an exec. A podman exec
 *  costs a conmon exec session, a runc and a `podman container cleanup` process (~50 ms of CPU
 *  here); a job costs one putArchive and an attach, which podman serves in its own process
 *  (~2 ms each). The request goes into /grade, root's own tmpfs (mode 0700), so the agent can
 *  neither read nor forge one; the answer comes on PID 1's stdout, which only an attach reads
 *  (the container keeps no log). The keeper sleeps on its stdin (the container
 *  is made with it open) (`read -t`, a builtin: no fork while idle), and the
 *  caller, attached, sends a line once the request is in: it wakes at once and otherwise looks
 *  every 2 s (the read runs in a child it waits for, so orphans are reaped as they end). podman
 *  closes that stdin when the first attach that wrote to it ends (conmon runs without
 *  --leave-stdin-open), and a keeper at the end of its stdin waits on a FIFO it alone holds
 *  and looks every 50 ms. A rollout's sandbox takes one job, its diff, just before it is
 *  removed: its keeper sleeps until then (16 idle polling keepers cost ~3% of a core more
 *  here). */

const JOB_DIR = '/grade/floe-job';
const SIGNALS = 'HUP INT QUIT TERM USR1 USR2 PIPE ALRM';
const HEADER = 'FLOE-JOB';

/** The keeper that takes jobs. A job is a folder JOB_DIR with `script`, `args` (one a line),
 *  `secs`, `id` and, last in the archive, `ready`. The keeper moves it aside, runs the script
 *  as root under `timeout -s KILL` (signals back to their defaults), and prints
 *  `FLOE-JOB <id> <rc> <stdout bytes> <stderr bytes>`, a newline, then the script's stdout and
 *  stderr. It never ends by itself: the container is removed running, as before keeper jobs
 *  (a keeper that exited after the last job left its container exiting while podman cleaned
 *  it up, and 22 sandboxes outlived the test suite in CI). */
export const KEEPER_WITH_JOBS = `trap "" ${SIGNALS}
J=${JOB_DIR}
if mkfifo -m 600 /run/floe-keeper.fifo 2>/dev/null && exec 9<>/run/floe-keeper.fifo; then
  floe_poll() { read -r -t 0.05 -u 9 _; }
else
  floe_poll() { sleep 0.2; }
fi
# a line on stdin wakes the keeper; at the end of stdin it polls.
# The read runs in a child the keeper waits for: bash holds SIGCHLD back during its own read, so
# orphans (the agent's, reparented to PID 1) would stay unreaped zombies while it read; \`wait\`
# reaps them as they end
exec 8<&0
floe_nap() { ( read -r -t 2 -u 8 _ ) & wait $!; [ $? = 1 ] && floe_nap() { floe_poll; }; }
while :; do
  if [ -f $J/ready ]; then
    rm -rf $J.run; mv $J $J.run
    mapfile -t floe_args < $J.run/args
    read -r floe_secs < $J.run/secs
    read -r floe_id < $J.run/id
    ( trap - ${SIGNALS}; exec timeout -s KILL "$floe_secs" bash $J.run/script "\${floe_args[@]}" ) > $J.run/out 2> $J.run/err < /dev/null 8<&- 9<&-
    floe_rc=$?
    floe_sizes=$(stat -c %s $J.run/out $J.run/err)
    printf '${HEADER} %s %s %s\\n' "$floe_id" "$floe_rc" "\${floe_sizes//$'\\n'/ }"
    cat $J.run/out $J.run/err
  fi
  floe_nap
done`;

export interface KeeperJobResult { exitCode: number; stdout: Buffer; stderr: string }

/** Run a bash script as root through the keeper. null: no answer within timeoutSeconds + 5 s
 *  (a stuck keeper), or the container ended first; the caller then uses an exec. The keeper
 *  sleeps on its stdin: a line is sent once the request is in. Throws what the container
 *  engine throws (the container is gone, say). */
export async function runKeeperJob(container: Docker.Container, job: { script: string; args: string[]; timeoutSeconds: number }): Promise<KeeperJobResult | null> {
  if (job.args.some((a) => a.includes('\n'))) throw new Error(`a keeper job's arguments are one a line: ${JSON.stringify(job.args)}`);
  const id = crypto.randomBytes(8).toString('hex');
  const file = (name: string, data: string) => ({ name: `floe-job/${name}`, type: 'file' as const, mode: 0o600, uid: 0, gid: 0, data: Buffer.from(data, 'utf8') });
  const stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as MuxStream;
  try {
    const answer = readAnswer(stream, id, (job.timeoutSeconds + 5) * 1000);
    try {
      await container.putArchive(tarArchive([
        { name: 'floe-job/', type: 'dir', mode: 0o700, uid: 0, gid: 0 },
        file('script', job.script), file('args', job.args.map((a) => `${a}\n`).join('')),
        file('secs', `${job.timeoutSeconds}\n`), file('id', `${id}\n`), file('ready', ''),
      ]), { path: '/grade' });
    } catch (err) {
      // the keeper can take the job between podman writing `ready`, the archive's last entry,
      // and setting its owner: the copier's lchown then finds no file. The job is complete and
      // running; its answer is on the way (seen once in ~1,500 rollouts of a demo run)
      if (!keeperTookTheJob(err)) throw err;
    }
    // (dockerode sends the attach options as the request body, which podman hands to stdin:
    // that line ends here; the keeper takes any line as its wake-up)
    stream.write('\n');
    return await answer;
  } finally {
    try { stream.destroy(); } catch { /* already closed */ }
  }
}

/** podman's copier (buildah copier.go, put) failing on `ready` after the keeper moved the job
 *  folder away: `error setting ownership of "/grade/floe-job/ready" …: lchown …: no such file`. */
export function keeperTookTheJob(err: unknown): boolean {
  return /floe-job\/ready"?[^\n]*no such file or directory/i.test((err as { message?: string })?.message ?? '');
}

/** The keeper's answer to job `id` on an attach stream (Docker's multiplexed framing; the
 *  keeper writes only stdout). Answers to other jobs (an earlier attempt's) are skipped. */
function readAnswer(stream: NodeJS.ReadableStream, id: string, deadlineMs: number): Promise<KeeperJobResult | null> {
  return new Promise((resolve) => {
    let frames = Buffer.alloc(0);
    let out = Buffer.alloc(0);
    const timer = setTimeout(() => done(null), deadlineMs);
    const done = (r: KeeperJobResult | null) => {
      clearTimeout(timer);
      stream.removeAllListeners('data');
      resolve(r);
    };
    stream.on('data', (chunk: Buffer) => {
      frames = Buffer.concat([frames, chunk]);
      while (frames.length >= 8 && frames.length >= 8 + frames.readUInt32BE(4)) {
        const size = frames.readUInt32BE(4);
        if (frames[0] === 1) out = Buffer.concat([out, frames.subarray(8, 8 + size)]);
        frames = frames.subarray(8 + size);
      }
      for (;;) {
        const nl = out.indexOf(10);
        if (nl < 0) return;
        const m = new RegExp(`^${HEADER} ([0-9a-f]+) (\\d+) (\\d+) (\\d+)$`).exec(out.subarray(0, nl).toString('latin1'));
        if (!m) { out = out.subarray(nl + 1); continue; } // not a header: skip the line
        const [outLen, errLen] = [Number(m[3]), Number(m[4])];
        if (out.length < nl + 1 + outLen + errLen) return; // the payload is still coming
        const body = out.subarray(nl + 1, nl + 1 + outLen + errLen);
        out = out.subarray(nl + 1 + outLen + errLen);
        if (m[1] === id) return done({ exitCode: Number(m[2]), stdout: Buffer.from(body.subarray(0, outLen)), stderr: body.subarray(outLen).toString('utf8') });
      }
    });
    stream.on('end', () => done(null));
    stream.on('close', () => done(null));
    stream.on('error', () => done(null));
  });
}
