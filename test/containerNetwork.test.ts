import { afterAll, describe, expect, it } from 'vitest';
import type Docker from 'dockerode';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { portOpen } from '../infra/proc.js';
import { settings } from './helpers/platform.js';

/** A container created through dockerode with NetworkMode none cannot reach the network:
 *  it has only a loopback interface, and a port that answers on the host's loopback does
 *  not answer from inside. */

const docker = dockerFromSettings(settings);
const created: Docker.Container[] = [];

async function execIn(c: Docker.Container, cmd: string[]): Promise<{ code: number; out: string }> {
  const ex = await c.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await ex.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  const sink = { write: (b: Buffer) => { chunks.push(b); return true; } } as unknown as NodeJS.WritableStream;
  docker.modem.demuxStream(stream, sink, sink);
  await new Promise((r) => stream.on('end', r));
  const info = await ex.inspect();
  return { code: info.ExitCode ?? -1, out: Buffer.concat(chunks).toString('utf8') };
}

afterAll(async () => {
  for (const c of created) await c.remove({ force: true }).catch(() => undefined);
});

describe('container engine through dockerode', () => {
  it('runs a container with NetworkMode none that cannot reach the network', async () => {
    const c = await docker.createContainer({
      Image: sandboxImageTag(settings),
      Cmd: ['sleep', '60'],
      Labels: { 'floe.test': 'network' },
      HostConfig: { NetworkMode: 'none' },
    });
    created.push(c);
    await c.start();
    expect((await c.inspect()).HostConfig.NetworkMode).toBe('none');

    const ifaces = await execIn(c, ['ls', '/sys/class/net']);
    expect(ifaces.out.split(/\s+/).filter(Boolean)).toEqual(['lo']);

    // Positive control: the Temporal port answers on the host's loopback…
    expect(await portOpen('127.0.0.1', settings.temporal.port)).toBe(true);
    // …and is unreachable from inside the container.
    const probe = `import socket,sys
try:
    socket.create_connection(("127.0.0.1", ${settings.temporal.port}), timeout=3); print("REACHED")
except OSError as e:
    print("BLOCKED", e.errno)`;
    const r = await execIn(c, ['python3', '-c', probe]);
    expect(r.out).toMatch(/BLOCKED/);
    const dns = await execIn(c, ['python3', '-c', 'import socket\ntry:\n  socket.getaddrinfo("deb.debian.org", 80); print("RESOLVED")\nexcept OSError: print("NO-DNS")']);
    expect(dns.out).toMatch(/NO-DNS/);
  });
});
