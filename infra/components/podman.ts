import fs from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import type { Settings } from '../settings.js';
import type { Component, Health } from './types.js';
import { aptInstall, log, readPid, startDaemon, stopDaemon, tail, waitFor, which } from '../proc.js';
import { dockerFromSettings } from '../docker.js';
import { withoutNewNamespaces, type SeccompProfile } from '../../core/seccomp.js';

/** The container engine: podman serving the Docker API on a socket, which dockerode speaks.
 *  A real Docker daemon (DOCKER_HOST) is used instead when one is configured. */

const pidFile = (s: Settings) => path.join(s.runDir, 'podman.pid');
const logFile = (s: Settings) => path.join(s.logDir, 'podman.log');

/** podman settings measured on these machines (docs/guides/operations.md "The container
 *  engine"): runc (crun fails on this cgroup setup) and explicit rlimits (the defaults are
 *  refused). Kept in the project's own file, passed through CONTAINERS_CONF, so the host's /etc
 *  is left alone. */
export function containersConf(s: Settings): string {
  return path.join(s.home, 'containers.conf');
}

/** floe's seccomp profile (core/seccomp.ts: podman's default, without new namespaces),
 *  written by floe up next to containers.conf, which makes it every container's. */
export function seccompProfile(s: Settings): string {
  return path.join(s.home, 'sandbox-seccomp.json');
}

/** podman's own default profile, as its packages install it. */
const DEFAULT_PROFILES = ['/usr/share/containers/seccomp.json', '/etc/containers/seccomp.json'];

function writeSeccompProfile(s: Settings): void {
  const base = DEFAULT_PROFILES.find((f) => fs.existsSync(f));
  if (!base) throw new Error(`podman's default seccomp profile is not here (${DEFAULT_PROFILES.join(', ')}); floe builds the sandboxes' profile from it. Install it: apt-get install golang-github-containers-common`);
  const text = `${JSON.stringify(withoutNewNamespaces(JSON.parse(fs.readFileSync(base, 'utf8')) as SeccompProfile), null, 1)}\n`;
  if (!fs.existsSync(seccompProfile(s)) || fs.readFileSync(seccompProfile(s), 'utf8') !== text) fs.writeFileSync(seccompProfile(s), text);
}

const conf = (s: Settings) => `# written by floe up
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]
netns = "none"
# every sandbox and grader container: no user (or other) namespaces of its own (core/seccomp.ts)
seccomp_profile = "${seccompProfile(s)}"

[engine]
runtime = "runc"
# podman keeps two conmon processes per exec alive this long (default 300 s); at a few
# execs a second that is thousands of idle processes and gigabytes of memory.
exit_command_delay = 5
`;

export function podmanEnv(s: Settings): NodeJS.ProcessEnv {
  return { ...process.env, CONTAINERS_CONF: containersConf(s) };
}

async function pingDocker(s: Settings): Promise<boolean> {
  try {
    await dockerFromSettings(s).ping();
    return true;
  } catch {
    return false;
  }
}

export const podman: Component = {
  name: 'podman',
  async up(s) {
    if (s.docker.external) {
      if (!(await pingDocker(s))) throw new Error(`container engine at DOCKER_HOST=${s.docker.host} does not answer; start it or unset DOCKER_HOST`);
      log('podman', `using Docker API at ${s.docker.host}`);
      return;
    }
    if (!which('podman') || !which('runc')) aptInstall('podman', ['podman', 'runc', 'uidmap', 'fuse-overlayfs']);
    fs.mkdirSync(s.home, { recursive: true });
    fs.mkdirSync(s.runDir, { recursive: true });
    writeSeccompProfile(s);
    const CONF = conf(s);
    if (!fs.existsSync(containersConf(s)) || fs.readFileSync(containersConf(s), 'utf8') !== CONF) fs.writeFileSync(containersConf(s), CONF);
    const servedConf = path.join(s.runDir, 'podman.conf-served');
    if (await pingDocker(s)) {
      const current = fs.existsSync(servedConf) && fs.readFileSync(servedConf, 'utf8') === CONF;
      if (current) {
        log('podman', `already serving the Docker API on ${s.docker.socket}`);
        return;
      }
      log('podman', 'settings changed: restarting the API service');
      await stopDaemon(pidFile(s));
    }
    fs.mkdirSync(s.runDir, { recursive: true });
    fs.rmSync(s.docker.socket, { force: true });
    startDaemon({ name: 'podman', cmd: 'podman', args: ['system', 'service', '--time=0', `unix://${s.docker.socket}`], logFile: logFile(s), pidFile: pidFile(s), env: podmanEnv(s) });
    fs.writeFileSync(servedConf, CONF);
    await waitFor('podman API socket', () => pingDocker(s), 30_000, `see ${logFile(s)}:\n${tail(logFile(s))}`);
    log('podman', `serving the Docker API on ${s.docker.socket}`);
  },
  async down(s) {
    if (await stopDaemon(pidFile(s))) log('podman', 'stopped');
  },
  async doctor(s): Promise<Health> {
    if (await pingDocker(s)) {
      const v = await dockerFromSettings(s).version().catch(() => null);
      return { ok: true, detail: `${s.docker.host} answers (${v ? `${v.Components?.[0]?.Name ?? 'engine'} ${v.Version}` : 'version unknown'})` };
    }
    const pid = readPid(pidFile(s));
    return { ok: false, detail: `${s.docker.host} does not answer${pid ? ` (process ${pid} running)` : ''}`, fix: s.docker.external ? 'start the Docker daemon or unset DOCKER_HOST' : `run \`floe up\`; see ${logFile(s)}` };
  },
};

export type { Docker };
