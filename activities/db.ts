import type pg from 'pg';
import type { RunConfig } from '../core/config.js';
import type { LoopRunState as RunState } from '../core/runLoop.js';
import { insertRun, setRunStatus } from '../store/runs.js';

/** Run rows of the audit history (store/runs.ts). The pool lives in store/pool.ts. */

export { dbPool, closeDbPool } from '../store/pool.js';

export function createDbActivities(pool: pg.Pool) {
  return {
    /** Idempotent: a retried activity or a continued-as-new run does not duplicate the row. */
    async recordRunStart(input: { runId: string; workflowId: string; name: string; config: RunConfig }): Promise<void> {
      await insertRun(pool, input);
    },

    async recordRunState(input: { runId: string; state: RunState; summary?: unknown }): Promise<void> {
      await setRunStatus(pool, { runId: input.runId, status: input.state, summary: input.summary });
    },
  };
}

export type DbActivities = ReturnType<typeof createDbActivities>;
