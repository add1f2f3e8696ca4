import Docker from 'dockerode';
import type { Settings } from './settings.js';

/** A dockerode client for the configured engine: podman's socket by default, or DOCKER_HOST
 *  (unix:// or tcp://host:port, e.g. a remote Docker host that runs a sandbox worker). */
export function dockerFromSettings(s: Settings): Docker {
  const host = s.docker.host;
  if (host.startsWith('unix://')) return new Docker({ socketPath: host.slice('unix://'.length) });
  const m = /^(tcp|http|https):\/\/([^:/]+)(?::(\d+))?/.exec(host);
  if (!m) throw new Error(`DOCKER_HOST=${host} is not unix:///path or tcp://host:port`);
  return new Docker({ host: m[2], port: m[3] ? Number(m[3]) : 2375, protocol: m[1] === 'https' ? 'https' : 'http' });
}
