import type pg from 'pg';
import type { EngineWeights, WeightState } from '../../core/weightVersions.js';
import type { EngineEndpoint } from './adapter.js';

/** The engine_weights rows (db/migrations/004_engine_versions.sql): which version each
 *  engine of a run serves, and its update epoch. Read by generation (control worker),
 *  written by weight loads (gpu worker) and resyncs; every write is one statement, so two
 *  workers never see half an update. */

/** A resync claimed longer ago than this is taken over (the worker doing it died). */
const RESYNC_LEASE_MS = 10 * 60_000;

const COLUMNS = 'version, epoch, state, path';

export class EngineVersions {
  constructor(private readonly pool: pg.Pool) {}

  /** The engine's row; created at version 0 (the launch weights every engine of a run starts
   *  from) when the run has not used it yet. */
  async get(runId: string, e: EngineEndpoint): Promise<EngineWeights> {
    const r = await this.pool.query<EngineWeights>(
      `insert into engine_weights (run_id, engine_id, url, kind, version) values ($1, $2, $3, $4, 0)
       on conflict (run_id, engine_id) do update set url = engine_weights.url
       returning ${COLUMNS}`, [runId, e.id, e.url, e.kind ?? 'reference']);
    return r.rows[0];
  }

  async epoch(runId: string, engineId: string): Promise<number> {
    const r = await this.pool.query<{ epoch: number }>('select epoch from engine_weights where run_id = $1 and engine_id = $2', [runId, engineId]);
    if (!r.rowCount) throw new Error(`engine ${engineId} has no engine_weights row in run ${runId}`);
    return r.rows[0].epoch;
  }

  /** A weight update begins: the epoch moves on (once, however often a retried activity calls this). */
  async beginUpdate(runId: string, e: EngineEndpoint): Promise<EngineWeights> {
    await this.get(runId, e);
    const r = await this.pool.query<EngineWeights>(
      `update engine_weights set epoch = case when state = 'updating' then epoch else epoch + 1 end, state = 'updating', updated_at = now()
       where run_id = $1 and engine_id = $2 returning ${COLUMNS}`, [runId, e.id]);
    return r.rows[0];
  }

  /** The engine now serves `version` from `path` (the end of an update or of a resync). */
  async serving(runId: string, e: EngineEndpoint, version: number, path: string): Promise<EngineWeights> {
    await this.get(runId, e);
    const r = await this.pool.query<EngineWeights>(
      `update engine_weights set epoch = epoch + 1, state = 'serving', version = $3, path = $4, updated_at = now()
       where run_id = $1 and engine_id = $2 returning ${COLUMNS}`, [runId, e.id, version, path]);
    return r.rows[0];
  }

  /** The engine stopped answering: it may come back with its launch weights. In every run
   *  that uses it at this url; an update under way keeps its state (it reloads anyway). */
  async markUnknown(e: EngineEndpoint): Promise<number> {
    const r = await this.pool.query(
      `update engine_weights set state = 'unknown', epoch = epoch + 1, updated_at = now()
       where engine_id = $1 and url = $2 and state in ('serving', 'resyncing')`, [e.id, e.url]);
    return r.rowCount ?? 0;
  }

  /** Claim the resync of an engine in state unknown; null when another worker has it (or it is not unknown). */
  async claimResync(runId: string, engineId: string): Promise<EngineWeights | null> {
    const r = await this.pool.query<EngineWeights>(
      `update engine_weights set state = 'resyncing', updated_at = now()
       where run_id = $1 and engine_id = $2 and (state = 'unknown' or (state = 'resyncing' and updated_at < now() - $3::interval))
       returning ${COLUMNS}`, [runId, engineId, `${RESYNC_LEASE_MS} milliseconds`]);
    return r.rows[0] ?? null;
  }

  async state(runId: string, engineId: string): Promise<WeightState | null> {
    const r = await this.pool.query<{ state: WeightState }>('select state from engine_weights where run_id = $1 and engine_id = $2', [runId, engineId]);
    return r.rows[0]?.state ?? null;
  }
}
