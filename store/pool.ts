import pg from 'pg';

/** The Postgres pool of a process (one per worker process, CLI command or test file), and
 *  what every store module takes as its first argument. Tables: none of its own. */

/** A pool, or one client checked out of it (a transaction the caller runs). */
export type Queryable = pg.Pool | pg.PoolClient;

let shared: pg.Pool | null = null;

export function dbPool(url: string): pg.Pool {
  if (!shared) {
    shared = new pg.Pool({ connectionString: url, max: 10 });
    shared.on('error', (err) => process.stderr.write(`[floe] postgres pool error: ${err.message}\n`));
  }
  return shared;
}

export async function closeDbPool(): Promise<void> {
  const p = shared;
  shared = null;
  await p?.end();
}

/** Postgres text cannot hold NUL. The exact generated ids are kept in turn_tokens (and the
 *  next prompt is built from them); the text column, a view, gets U+FFFD in their place. */
export const pgSafeText = (t: string): string => t.replace(/\u0000/g, '\uFFFD');

/** JSON for a jsonb column: jsonb refuses the \u0000 escape too. */
export const pgSafeJson = (v: unknown): string => pgSafeText(JSON.stringify(v)).replace(/\\u0000/g, '\\ufffd');

/** JSON for a jsonb column that may be null. */
export const jsonOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : JSON.stringify(v));
