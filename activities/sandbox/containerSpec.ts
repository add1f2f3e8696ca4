import type Docker from 'dockerode';
import { ApplicationFailure } from '@temporalio/common';
import { SHM_MB, TESTBED_DIR, sandboxMemoryMb, sandboxTmpfs, type SandboxLimits } from '../../core/sandboxPolicy.js';
import { imageLoadHint } from '../../core/taskLayouts.js';
import { ROOT_USER } from './exec.js';
import { tarArchive, type TarEntry } from './tar.js';
import { KEEPER_WITH_JOBS } from './keeper.js';

/** The container spec: one locked-down recipe for every sandbox and grader container.
 *
 *  Measured on podman 4.3 (Docker API through dockerode, runc, cgroup v1):
 *  - HostConfig.Tmpfs accepts size, mode, nosuid, nodev, notmpcopyup and podman's `U`; it
 *    refuses `uid=`/`gid=`, and podman resets the mount root's mode to the image directory's.
 *    Ownership and mode of each mount root are therefore set after start with putArchive of a
 *    `./` entry (podman applies the entry's owner and mode to the target directory).
 *  - CapAdd is handed to non-root exec users too (the agent got CAP_DAC_READ_SEARCH and
 *    CAP_KILL as ambient capabilities), so nothing is added: CapDrop ALL, and root in the
 *    container is an ordinary user. The keeper (PID 1, keeper.ts) runs as root so the agent
 *    cannot kill it; cleanup runs as the agent (`kill -9 -1` reaches every process of the agent
 *    in the container's PID namespace and nothing outside it). A fast grader has no keeper: its
 *    test run is PID 1 (spec.main), and the container ends with it.
 *  - ReadonlyRootfs makes podman add unsized tmpfs at /run and /var/tmp; they are listed with a
 *    size in sandboxTmpfs instead.
 *  - Ulimits nproc above the host's hard limit is refused; 4096 is accepted. RLIMIT_NPROC counts
 *    every uid-1000 process on the host, so it is set well above pidsLimit: the per-container
 *    pids cgroup is the real limit, and one sandbox's fork bomb cannot starve another's. */

const MiB = 1024 * 1024;

/** The container is gone, or stopped for good (its keeper died): a retry cannot help. */
export function isNoSuchContainer(err: unknown): boolean {
  const e = err as { statusCode?: number; message?: string };
  return e?.statusCode === 404 || /no such container|container state improper|is not running/i.test(e?.message ?? '');
}

function isNoSuchImage(err: unknown): boolean {
  const e = err as { statusCode?: number; message?: string };
  return (e?.statusCode === 404 && /image/i.test(e?.message ?? '')) || /no such image|image not known/i.test(e?.message ?? '');
}

/** A container that is gone will not come back on retry. */
export function sandboxGone(containerId: string, err: unknown): ApplicationFailure {
  return ApplicationFailure.nonRetryable(`sandbox container ${containerId.slice(0, 12)} no longer exists (${(err as Error).message}); it was destroyed or reaped — start a new sandbox`, 'SandboxGone');
}

export interface ContainerSpec {
  image: string;
  limits: SandboxLimits;
  labels: Record<string, string>;
  /** Where the repository goes (repoDirOf): /testbed gets its own empty tmpfs over the
   *  image's, filled by prepareRepository; /work/repo is a folder of /work. */
  repoDir: string;
  /** Image paths covered by an empty root-only tmpfs (hidden tests an image ships). */
  hide?: string[];
  /** Tar archives put into the container right after start, by mount path: appended to that
   *  mount root's own archive (one putArchive), or put on their own where the path is not a
   *  mount root startLockedContainer sets up. Entries keep their owner and mode. */
  content?: Record<string, Buffer>;
  /** Instead of the keeper (keeper.ts), the container's own first process (the grader: its test run
   *  is PID 1, so it needs no exec). Its stdin stays open for an attach, and its output is read
   *  by attaching (no log is kept); it must wait for a word on stdin before it uses `content`. */
  main?: { user: string; env: string[]; cmd: string[] };
}

/** The HostConfig every sandbox and grader container gets. */
export function sandboxHostConfig(spec: Pick<ContainerSpec, 'limits' | 'repoDir' | 'hide'>): Docker.HostConfig {
  const tmpfs: Record<string, string> = {};
  // /testbed: notmpcopyup, or podman copies the image's content (its history too) into the
  // mount; prepareRepository copies what may be seen instead
  for (const m of sandboxTmpfs(spec.limits, spec.repoDir)) tmpfs[m.path] = `rw,size=${m.sizeMb}m,nosuid,nodev${m.path === TESTBED_DIR ? ',notmpcopyup' : ''}`;
  for (const p of spec.hide ?? []) tmpfs[p] = 'rw,size=1m,nosuid,nodev,notmpcopyup';
  const memory = (sandboxMemoryMb(spec.limits, spec.repoDir) + (spec.hide?.length ?? 0)) * MiB;
  return {
    NetworkMode: 'none',
    NanoCpus: Math.round(spec.limits.cpus * 1e9),
    Memory: memory,
    MemorySwap: memory, // equal to Memory: no swap
    PidsLimit: spec.limits.pidsLimit,
    ReadonlyRootfs: true,
    Tmpfs: tmpfs,
    ShmSize: SHM_MB * MiB,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    Ulimits: [{ Name: 'nproc', Soft: 4096, Hard: 4096 }, { Name: 'nofile', Soft: 1024, Hard: 1024 }],
  };
}

/** Create and start a locked-down container; set the owner and mode of its tmpfs roots. The
 *  container is removed again if any step fails. */
export async function startLockedContainer(docker: Docker, spec: ContainerSpec): Promise<Docker.Container> {
  const container = await docker.createContainer({
    Image: spec.image,
    User: spec.main?.user ?? ROOT_USER,
    WorkingDir: '/',
    Entrypoint: spec.main?.cmd ?? ['bash', '-c', KEEPER_WITH_JOBS],
    Cmd: [],
    Labels: spec.labels,
    Env: spec.main?.env ?? ['LANG=C.UTF-8'],
    // a first process reads its go line from an attached stdin, closed when the attach ends;
    // the keeper is woken by a line on its stdin (open until an attach that wrote to it ends:
    // keeper.ts)
    ...(spec.main ? { OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true, AttachStderr: true } : { OpenStdin: true, StdinOnce: false }),
    // what a first process or the keeper prints is read by attaching: no log is kept
    HostConfig: { ...sandboxHostConfig(spec), LogConfig: { Type: 'none', Config: {} } },
  }).catch((err: unknown) => {
    // an image that is not on this host will not appear on retry (the run's preflight pulls)
    if (isNoSuchImage(err)) throw ApplicationFailure.nonRetryable(`task image ${spec.image} is not on this sandbox host; ${imageLoadHint(spec.image)}`, 'ImagesMissing');
    throw err;
  });
  try {
    await container.start();
    const roots = sandboxTmpfs(spec.limits, spec.repoDir).filter((m) => m.owner === 'agent' || m.path === '/grade');
    for (const p of spec.hide ?? []) roots.push({ path: p, sizeMb: 1, owner: 'root', mode: 0o700 });
    const content = spec.content ?? {};
    await Promise.all([
      ...roots.map((m) => {
        const id = m.owner === 'agent' ? 1000 : 0;
        const entries: TarEntry[] = [{ name: './', type: 'dir', mode: m.mode, uid: id, gid: id }];
        if (m.path === '/work' && spec.repoDir.startsWith('/work/')) entries.push({ name: './repo/', type: 'dir', mode: 0o755, uid: 1000, gid: 1000 });
        const own = tarArchive(entries);
        // a tar ends with two zero blocks: the root's entries without them, then the content
        const body = content[m.path] ? Buffer.concat([own.subarray(0, own.length - 1024), content[m.path]]) : own;
        return container.putArchive(body, { path: m.path });
      }),
      ...Object.entries(content).filter(([p]) => !roots.some((m) => m.path === p)).map(([p, tar]) => container.putArchive(tar, { path: p })),
    ]);
    return container;
  } catch (err) {
    await container.remove({ force: true }).catch(() => undefined);
    throw err;
  }
}

/** Remove a container, running or not. One whose first process has just ended (a fast
 *  grader's test run) may still be being cleaned up by podman for a moment and
 *  refuses removal meanwhile ("container state improper"): that is retried, never taken for
 *  "gone". Returns when the container is gone. */
export async function removeContainer(container: Docker.Container): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await container.remove({ force: true, v: true });
      return;
    } catch (err) {
      const e = err as { statusCode?: number; message?: string };
      const msg = e.message ?? '';
      if (e.statusCode === 404 || /no such container/i.test(msg)) return;
      if (/removal of container .* is already in progress/i.test(msg)) return;
      if (attempt < 30 && /container state improper|is not running|stopping|cleaning up/i.test(msg)) {
        await new Promise((r) => setTimeout(r, Math.min(100 * attempt, 1000)));
        continue;
      }
      throw err;
    }
  }
}

export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}
