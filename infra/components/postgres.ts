import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Settings } from '../settings.js';
import type { Component, Health } from './types.js';
import { aptInstall, isRoot, log, portOpen, readPid, run, tail, waitFor } from '../proc.js';
import { migrate } from '../../db/migrate.js';
import { redactUrl } from '../../core/exposure.js';

/** PostgreSQL 15 from Debian, as a cluster under the project's data folder (trust auth on loopback). */

const PG_BIN = '/usr/lib/postgresql/15/bin';
const logFile = (s: Settings) => path.join(s.logDir, 'postgres.log');
const socketDir = (s: Settings) => path.join(s.runDir, 'pg');

/** initdb and postgres refuse to run as root: when we are root, run them as the `postgres` user. */
function asPgUser(cmd: string, args: string[]) {
  if (!isRoot()) return run(cmd, args);
  return run('runuser', ['-u', 'postgres', '--', cmd, ...args]);
}

function ensureBinaries(): void {
  if (fs.existsSync(path.join(PG_BIN, 'pg_ctl'))) return;
  aptInstall('postgres', ['postgresql-15']);
}

/** The `postgres` user must be able to reach the data folder: a checkout inside a private
 *  folder (mktemp -d makes them 0700) gets search permission (o+x, not read) on each parent. */
function ensureTraversable(dir: string): void {
  if (!isRoot()) return;
  for (let p = path.dirname(path.resolve(dir)); ; p = path.dirname(p)) {
    const mode = fs.statSync(p).mode;
    if ((mode & 0o001) === 0) {
      fs.chmodSync(p, (mode & 0o7777) | 0o001);
      log('postgres', `granted the postgres user passage through ${p} (o+x)`);
    }
    if (p === path.dirname(p)) break;
  }
}

function chownToPg(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  if (isRoot()) run('chown', ['-R', 'postgres:postgres', dir]);
}

export async function pgReady(s: Settings): Promise<boolean> {
  const client = new pg.Client({ connectionString: s.postgres.url, connectionTimeoutMillis: 1000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function createDatabase(s: Settings): Promise<void> {
  const admin = new pg.Client({ host: s.postgres.host, port: s.postgres.port, user: s.postgres.user, database: 'postgres' });
  await admin.connect();
  try {
    const exists = await admin.query('select 1 from pg_database where datname = $1', [s.postgres.database]);
    if (exists.rowCount === 0) {
      log('postgres', `creating database ${s.postgres.database}`);
      await admin.query(`create database "${s.postgres.database.replace(/"/g, '""')}"`);
    }
  } finally {
    await admin.end();
  }
}

export const postgres: Component = {
  name: 'postgres',
  async up(s) {
    if (!s.postgres.external) {
      if (!(await portOpen(s.postgres.host, s.postgres.port))) {
        ensureBinaries();
        const dataDir = s.postgres.dataDir;
        ensureTraversable(dataDir);
        if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
          log('postgres', `initdb ${path.relative(process.cwd(), dataDir)}`);
          chownToPg(dataDir);
          const r = asPgUser(path.join(PG_BIN, 'initdb'), ['-D', dataDir, '-U', s.postgres.user, '-A', 'trust', '-E', 'UTF8', '--no-instructions']);
          if (r.code !== 0) throw new Error(`postgres: initdb failed: ${r.stderr.trim()}`);
        }
        chownToPg(socketDir(s));
        fs.mkdirSync(s.logDir, { recursive: true });
        if (isRoot()) { fs.closeSync(fs.openSync(logFile(s), 'a')); run('chown', ['postgres:postgres', logFile(s)]); }
        log('postgres', `starting on ${s.postgres.host}:${s.postgres.port}…`);
        const opts = `-p ${s.postgres.port} -h ${s.postgres.host} -k ${socketDir(s)} -c fsync=on -c max_connections=200`;
        const r = asPgUser(path.join(PG_BIN, 'pg_ctl'), ['-D', dataDir, '-l', logFile(s), '-o', opts, '-w', '-t', '60', 'start']);
        if (r.code !== 0) throw new Error(`postgres: pg_ctl start failed: ${r.stderr.trim() || r.stdout.trim()}\n${tail(logFile(s))}\nSee ${logFile(s)}`);
      }
      await waitFor('Postgres', () => portOpen(s.postgres.host, s.postgres.port), 30_000, `see ${logFile(s)}`);
      await createDatabase(s);
    }
    const applied = await migrate(s.postgres.url);
    log('postgres', `ready at ${redactUrl(s.postgres.url)}${applied.length ? `; applied migrations ${applied.join(', ')}` : '; schema up to date'}`);
  },
  async down(s) {
    if (s.postgres.external || !fs.existsSync(path.join(s.postgres.dataDir, 'postmaster.pid'))) return;
    const r = asPgUser(path.join(PG_BIN, 'pg_ctl'), ['-D', s.postgres.dataDir, '-m', 'fast', '-w', 'stop']);
    if (r.code === 0) log('postgres', 'stopped');
  },
  async doctor(s): Promise<Health> {
    if (await pgReady(s)) {
      const client = new pg.Client({ connectionString: s.postgres.url });
      await client.connect();
      try {
        const v = await client.query<{ version: string }>('select max(version) as version from floe_schema_migrations').catch(() => null);
        return { ok: true, detail: `${redactUrl(s.postgres.url)}; schema version ${v?.rows[0]?.version ?? 'none (run floe up)'}` };
      } finally {
        await client.end();
      }
    }
    const pidAlive = readPid(path.join(s.postgres.dataDir, 'postmaster.pid')) !== null;
    return { ok: false, detail: `${redactUrl(s.postgres.url)} does not answer${pidAlive ? ' (postmaster running)' : ''}`, fix: s.postgres.external ? 'check FLOE_DATABASE_URL' : `run \`floe up\`; if it keeps failing see ${logFile(s)}` };
  },
};
