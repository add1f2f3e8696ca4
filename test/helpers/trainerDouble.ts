import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** TEST DOUBLE. The part of floe's trainer server (engine/floe_engine/trainer_server.py) a run
 *  start looks at: GET /health → {ok, version, model, path, busy}, at the version given. It
 *  trains nothing; a run whose batch fills needs the real trainer. Lives in test/ only. */
export interface TrainerDouble { url: string; close(): Promise<void> }

export async function startTrainerDouble(o: { version?: number } = {}): Promise<TrainerDouble> {
  const version = o.version ?? 0;
  const server = http.createServer((req, res) => {
    const ok = req.method === 'GET' && req.url === '/health';
    res.writeHead(ok ? 200 : 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify(ok ? { ok: true, version, model: 'trainer-test-double', path: `/nowhere/v${version}`, busy: false } : { error: 'not found' }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(() => r())) };
}

/** A port on 127.0.0.1 nobody listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
