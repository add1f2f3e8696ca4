import pg from 'pg';
import type { RunConfig } from '../core/config.js';
import type { RunState } from '../workflows/messages.js';

/** Postgres audit history: activities that append rows. One pool per worker process. */

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

export function createDbActivities(pool: pg.Pool) {
  return {
    /** Idempotent: a retried activity or a continued-as-new run does not duplicate the row. */
    async recordRunStart(input: { runId: string; workflowId: string; name: string; config: RunConfig }): Promise<void> {
      await pool.query(
        `insert into runs (run_id, workflow_id, name, config) values ($1, $2, $3, $4)
         on conflict (run_id) do nothing`,
        [input.runId, input.workflowId, input.name, JSON.stringify(input.config)],
      );
    },

    async recordRunState(input: { runId: string; state: RunState; summary?: unknown }): Promise<void> {
      const ended = input.state === 'stopped' || input.state === 'completed' || input.state === 'failed';
      await pool.query(
        `update runs set status = $2, summary = coalesce($3, summary),
                ended_at = case when $4 then now() else ended_at end
         where run_id = $1`,
        [input.runId, input.state, input.summary === undefined ? null : JSON.stringify(input.summary), ended],
      );
    },
  };
}

export type DbActivities = ReturnType<typeof createDbActivities>;
