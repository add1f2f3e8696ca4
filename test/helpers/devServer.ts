import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Settings } from '../../infra/settings.js';
import { devServerArgs, temporalBin } from '../../infra/components/temporal.js';
import { portOpen, waitFor } from '../../infra/proc.js';

/** A Temporal dev server of a test's own (the real server, its history in a temporary SQLite
 *  file, no Web UI), for server settings the shared one must not get: a low continue-as-new
 *  threshold, say. `settings` point floe's clients and workers at it. */
export interface DevServer { settings: Settings; stop(): Promise<void> }

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

export async function startDevServer(base: Settings, dynamicConfig: Record<string, string | number>): Promise<DevServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-devserver-'));
  const port = await freePort();
  const host = '127.0.0.1';
  const log = fs.openSync(path.join(dir, 'temporal.log'), 'a');
  const child = spawn(temporalBin(base), devServerArgs({ dbFile: path.join(dir, 'temporal.sqlite'), host, port, uiPort: null, namespace: base.temporal.namespace, dynamicConfig }), { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await waitFor('the test\'s Temporal dev server', () => portOpen(host, port), 90_000, `see ${dir}/temporal.log`);
  const address = `${host}:${port}`;
  return {
    settings: { ...base, temporal: { ...base.temporal, host, port, address, external: true } },
    async stop() {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
