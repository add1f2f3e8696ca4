/** CPU accounting for the benchmarks (bench/throughput.ts, bench/scale.ts): per process group
 *  from /proc, the machine's busy time from /proc/stat, podman's cgroup totals. */
import fs from 'node:fs';

export const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/** CPU by process group, from /proc every second (each live process's utime+stime; a process
 *  born and gone between two samples is not seen: that share is `unattributed`, the machine's
 *  busy time minus the groups' sum, with other work on the machine). */
export function cpuGroupOf(comm: string, pid: number, ppid = -1): string {
  if (pid === process.pid) return 'bench+workers (node, this process)';
  // the control worker's render server (activities/renderer.ts spawns python -m floe_engine.render_server)
  if (ppid === process.pid && /^python/.test(comm)) return 'renderer (python, child of this process)';
  if (/^(podman|conmon|runc|crun|catatonit|slirp4netns|fuse-overlayfs|aardvark|netavark)/.test(comm)) return 'podman/conmon/runc';
  if (/^temporal/.test(comm)) return 'temporal';
  if (/^postgres|^postmaster/.test(comm)) return 'postgres';
  if (/^python|^pytest/.test(comm)) return 'python';
  if (/^(bash|sh|git|timeout|cat|sleep|tar|patch|pgrep|wc|head|find|rm|cp|sed|grep|ls|chmod|mkdir|printf|tr)$/.test(comm)) return 'container payload (bash/git/…)';
  if (/^node|^npm|^tsx|^esbuild/.test(comm)) return 'other node';
  return 'other';
}
export function readCpu(): Map<number, { group: string; comm: string; ticks: number }> {
  const out = new Map<number, { group: string; comm: string; ticks: number }>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // fields after comm: state=0 … utime=11 stime=12
      const ticks = Number(f[11]) + Number(f[12]);
      out.set(Number(d), { group: cpuGroupOf(comm, Number(d), Number(f[1])), comm, ticks });
    } catch { /* gone */ }
  }
  return out;
}
export function totalBusyTicks(): number {
  const l = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return l[0] + l[1] + l[2] + l[5] + l[6] + l[7]; // user nice system irq softirq steal
}
/** podman's cgroups (cgroup v1, cgroupfs manager): every container's payload under
 *  libpod_parent/libpod-<id>, and conmon with what it spawns (runc create/start/exec, podman's
 *  `container cleanup` exit commands) under libpod_parent/conmon. Read as totals, they count the
 *  short-lived processes a 1 s /proc sampler misses. Null where the files are not there. */
const CGROUP = '/sys/fs/cgroup/cpuacct/libpod_parent';
export function readCgroupNs(): { libpod: number; conmon: number } | null {
  try {
    return { libpod: Number(fs.readFileSync(`${CGROUP}/cpuacct.usage`, 'utf8')), conmon: Number(fs.readFileSync(`${CGROUP}/conmon/cpuacct.usage`, 'utf8')) };
  } catch {
    return null;
  }
}
export function startCpuSampler(): { stop(): { byGroupCoreSeconds: Record<string, number>; topCommands: Record<string, number>; machineBusyCoreSeconds: number; cgroupCoreSeconds: { containers: number; conmonRuncCleanup: number } | null } } {
  const cg0 = readCgroupNs();
  let prev = readCpu();
  const acc = new Map<string, number>();
  const byComm = new Map<string, number>();
  const busy0 = totalBusyTicks();
  const sample = () => {
    const now = readCpu();
    for (const [pid, p] of now) {
      const before = prev.get(pid);
      const d = p.ticks - (before?.ticks ?? 0);
      // a new process: count all it used (it started after the last sample)
      if (d > 0) {
        acc.set(p.group, (acc.get(p.group) ?? 0) + d);
        byComm.set(p.comm, (byComm.get(p.comm) ?? 0) + d);
      }
    }
    prev = now;
  };
  const timer = setInterval(sample, 1000);
  return {
    stop() {
      clearInterval(timer);
      sample();
      const byGroup: Record<string, number> = {};
      for (const [g, t] of [...acc].sort((a, b) => b[1] - a[1])) byGroup[g] = round(t / 100, 1);
      const busy = round((totalBusyTicks() - busy0) / 100, 1);
      byGroup.unattributed = round(busy - Object.values(byGroup).reduce((a, x) => a + x, 0), 1);
      const top: Record<string, number> = {};
      for (const [c, t] of [...byComm].sort((a, b) => b[1] - a[1]).slice(0, 15)) top[c] = round(t / 100, 1);
      const cg1 = readCgroupNs();
      const cgroupCoreSeconds = cg0 && cg1 ? { containers: round((cg1.libpod - cg0.libpod - (cg1.conmon - cg0.conmon)) / 1e9, 1), conmonRuncCleanup: round((cg1.conmon - cg0.conmon) / 1e9, 1) } : null;
      return { byGroupCoreSeconds: byGroup, topCommands: top, machineBusyCoreSeconds: busy, cgroupCoreSeconds };
    },
  };
}

