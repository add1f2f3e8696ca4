import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/** Versioned SQL migrations: `db/migrations/NNN_name.sql`, each applied once, in its own
 *  transaction, under an advisory lock so concurrent `floe up`s cannot race. */

export const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

export interface Migration { version: number; name: string; sql: string }

export function listMigrations(dir = migrationsDir): Migration[] {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.sql')).sort();
  const seen = new Set<number>();
  return files.map((f) => {
    const m = /^(\d+)_([a-z0-9_]+)\.sql$/.exec(f);
    if (!m) throw new Error(`db/migrations/${f}: name must look like 001_some_name.sql`);
    const version = Number(m[1]);
    if (seen.has(version)) throw new Error(`db/migrations/${f}: version ${version} is used twice`);
    seen.add(version);
    return { version, name: m[2], sql: fs.readFileSync(path.join(dir, f), 'utf8') };
  });
}

const LOCK_KEY = 0x666c6f65; // 'floe'

/** Apply pending migrations; returns the versions applied now. */
export async function migrate(url: string, dir = migrationsDir): Promise<number[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const applied: number[] = [];
  try {
    await client.query('select pg_advisory_lock($1)', [LOCK_KEY]);
    await client.query(`create table if not exists floe_schema_migrations (
      version integer primary key, name text not null, applied_at timestamptz not null default now())`);
    const done = new Set((await client.query<{ version: number }>('select version from floe_schema_migrations')).rows.map((r) => r.version));
    for (const m of listMigrations(dir)) {
      if (done.has(m.version)) continue;
      await client.query('begin');
      try {
        await client.query(m.sql);
        await client.query('insert into floe_schema_migrations (version, name) values ($1, $2)', [m.version, m.name]);
        await client.query('commit');
        applied.push(m.version);
      } catch (err) {
        await client.query('rollback');
        throw new Error(`migration ${m.version}_${m.name} failed and was rolled back: ${(err as Error).message}`);
      }
    }
  } finally {
    await client.query('select pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
  return applied;
}
