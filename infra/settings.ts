import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { postgresExposureProblem } from '../core/exposure.js';

/** Where floe keeps its tools, data, logs and sockets, and how to reach each service.
 *  Every value can be overridden by an environment variable, so a deployment can point
 *  floe at a Temporal cluster, a remote Docker host or an external Postgres. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function env(name: string, fallback: string): string {
  const v = process.env[name];
  return v === undefined || v === '' ? fallback : v;
}

function port(name: string, fallback: number): number {
  const raw = env(name, String(fallback));
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535) {
    throw new Error(`${name}=${raw} is not a TCP port (1-65535); unset it or give a valid port`);
  }
  return n;
}

export interface Settings {
  home: string;
  toolsBin: string;
  dataDir: string;
  logDir: string;
  runDir: string;
  temporal: { cliVersion: string; host: string; port: number; uiPort: number; namespace: string; address: string; uiUrl: string; dbFile: string; external: boolean };
  postgres: { host: string; port: number; user: string; database: string; dataDir: string; url: string; external: boolean };
  docker: { socket: string; host: string; external: boolean };
  sandboxImage: { name: string; recipe: string };
  python: { venv: string; bin: string };
  /** The grading harness's environment (harness/setup.sh: the swebench package, floe_harness). */
  harness: { venv: string; bin: string };
}

export function loadSettings(): Settings {
  const home = path.resolve(env('FLOE_HOME', path.join(repoRoot, '.floe')));
  const dataDir = path.join(home, 'data');
  const runDir = path.join(home, 'run');
  const tHost = env('FLOE_TEMPORAL_HOST', '127.0.0.1');
  const tPort = port('FLOE_TEMPORAL_PORT', 7233);
  const uiPort = port('FLOE_TEMPORAL_UI_PORT', 8233);
  const tAddress = env('FLOE_TEMPORAL_ADDRESS', `${tHost}:${tPort}`);
  const pgPort = port('FLOE_PG_PORT', 55432);
  const pgHost = env('FLOE_PG_HOST', '127.0.0.1');
  const pgUser = env('FLOE_PG_USER', 'floe');
  const pgDb = env('FLOE_PG_DATABASE', 'floe');
  const pgUrl = env('FLOE_DATABASE_URL', `postgres://${pgUser}@${pgHost}:${pgPort}/${pgDb}`);
  // a Postgres beyond loopback must ask for a password or speak TLS (core/exposure.ts)
  const pgProblem = postgresExposureProblem(pgUrl, {
    env: process.env,
    passwordFile: fs.existsSync(process.env.PGPASSFILE ?? path.join(os.homedir(), '.pgpass')),
    variable: process.env.FLOE_DATABASE_URL ? 'FLOE_DATABASE_URL' : 'FLOE_PG_HOST',
  });
  if (pgProblem) throw new Error(pgProblem);
  const socket = path.join(runDir, 'podman.sock');
  const venv = path.join(home, 'venv');
  return {
    home,
    toolsBin: path.join(home, 'tools', 'bin'),
    dataDir,
    logDir: path.join(home, 'logs'),
    runDir,
    temporal: {
      cliVersion: 'v1.5.1',
      host: tHost,
      port: tPort,
      uiPort,
      namespace: env('FLOE_TEMPORAL_NAMESPACE', 'default'),
      address: tAddress,
      uiUrl: env('FLOE_TEMPORAL_UI_URL', `http://${tHost}:${uiPort}`),
      dbFile: path.join(dataDir, 'temporal.sqlite'),
      external: process.env.FLOE_TEMPORAL_ADDRESS !== undefined,
    },
    postgres: {
      host: pgHost,
      port: pgPort,
      user: pgUser,
      database: pgDb,
      dataDir: path.join(dataDir, 'pg'),
      url: pgUrl,
      external: process.env.FLOE_DATABASE_URL !== undefined,
    },
    docker: {
      socket,
      host: env('DOCKER_HOST', `unix://${socket}`),
      external: process.env.DOCKER_HOST !== undefined,
    },
    sandboxImage: { name: 'floe-sandbox', recipe: path.join(repoRoot, 'infra', 'sandbox-image.sh') },
    python: { venv, bin: path.join(venv, 'bin', 'python') },
    harness: { venv: path.join(home, 'harness-venv'), bin: path.join(home, 'harness-venv', 'bin', 'python') },
  };
}
