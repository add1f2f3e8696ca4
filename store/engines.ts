import type { EngineWeights } from '../core/weightVersions.js';
import { jsonOrNull, type Queryable } from './pool.js';

/** Inference engines of runs. Tables: engine_weights (which version each engine of a run
 *  serves, and its update epoch; db/migrations/004_engine_versions.sql), engine_requests
 *  (every generation request floe sent), engine_events (placements, failures, weight loads,
 *  resyncs; 001); views v_engine_load, v_resubmitted_turns, v_engine_requests.
 *
 *  engine_weights is read by generation (control worker) and written by weight loads (gpu
 *  worker) and resyncs; every write is one statement, so two workers never see half an update. */

/** An engine as these rows know it (an EngineEndpoint fits). */
export interface EngineRef { id: string; url: string; kind?: string }

/** A resync claimed longer ago than this is taken over (the worker doing it died). */
const RESYNC_LEASE_MS = 10 * 60_000;

const WEIGHT_COLUMNS = 'version, epoch, state, path';

// ---- engine_weights

/** The engine's row; created at version 0 (the launch weights every engine of a run starts
 *  from) when the run has not used it yet. */
export async function getEngineWeights(db: Queryable, runId: string, e: EngineRef): Promise<EngineWeights> {
  const r = await db.query<EngineWeights>(
    `insert into engine_weights (run_id, engine_id, url, kind, version) values ($1, $2, $3, $4, 0)
     on conflict (run_id, engine_id) do update set url = engine_weights.url
     returning ${WEIGHT_COLUMNS}`, [runId, e.id, e.url, e.kind ?? 'reference']);
  return r.rows[0];
}

export async function getEngineEpoch(db: Queryable, runId: string, engineId: string): Promise<number> {
  const r = await db.query<{ epoch: number }>('select epoch from engine_weights where run_id = $1 and engine_id = $2', [runId, engineId]);
  if (!r.rowCount) throw new Error(`engine ${engineId} has no engine_weights row in run ${runId}`);
  return r.rows[0].epoch;
}

/** A weight update begins: the epoch moves on (once, however often a retried activity calls this). */
export async function beginEngineUpdate(db: Queryable, runId: string, e: EngineRef): Promise<EngineWeights> {
  await getEngineWeights(db, runId, e);
  const r = await db.query<EngineWeights>(
    `update engine_weights set epoch = case when state = 'updating' then epoch else epoch + 1 end, state = 'updating', updated_at = now()
     where run_id = $1 and engine_id = $2 returning ${WEIGHT_COLUMNS}`, [runId, e.id]);
  return r.rows[0];
}

/** The engine now serves `version` from `path` (the end of an update or of a resync). */
export async function setEngineServing(db: Queryable, runId: string, e: EngineRef, version: number, path: string): Promise<EngineWeights> {
  await getEngineWeights(db, runId, e);
  const r = await db.query<EngineWeights>(
    `update engine_weights set epoch = epoch + 1, state = 'serving', version = $3, path = $4, updated_at = now()
     where run_id = $1 and engine_id = $2 returning ${WEIGHT_COLUMNS}`, [runId, e.id, version, path]);
  return r.rows[0];
}

/** The engine stopped answering: it may come back with its launch weights. In every run
 *  that uses it at this url; an update under way keeps its state (it reloads anyway).
 *  Returns the number of runs marked. */
export async function markEngineUnknown(db: Queryable, e: EngineRef): Promise<number> {
  const r = await db.query(
    `update engine_weights set state = 'unknown', epoch = epoch + 1, updated_at = now()
     where engine_id = $1 and url = $2 and state in ('serving', 'resyncing')`, [e.id, e.url]);
  return r.rowCount ?? 0;
}

/** Claim the resync of an engine in state unknown; null when another worker has it (or it is not unknown). */
export async function claimEngineResync(db: Queryable, runId: string, engineId: string): Promise<EngineWeights | null> {
  const r = await db.query<EngineWeights>(
    `update engine_weights set state = 'resyncing', updated_at = now()
     where run_id = $1 and engine_id = $2 and (state = 'unknown' or (state = 'resyncing' and updated_at < now() - $3::interval))
     returning ${WEIGHT_COLUMNS}`, [runId, engineId, `${RESYNC_LEASE_MS} milliseconds`]);
  return r.rows[0] ?? null;
}

/** A claimed resync failed: the engine is unknown again (another placement may retry it). */
export async function releaseEngineResync(db: Queryable, runId: string, engineId: string): Promise<void> {
  await db.query(`update engine_weights set state = 'unknown' where run_id = $1 and engine_id = $2 and state = 'resyncing'`, [runId, engineId]);
}

/** Every engine of a run with what it serves, by engine id. */
export async function listEngineWeights(db: Queryable, runId: string): Promise<(EngineWeights & { engineId: string; url: string; kind: string })[]> {
  const r = await db.query<EngineWeights & { engine_id: string; url: string; kind: string }>(
    `select engine_id, url, kind, ${WEIGHT_COLUMNS} from engine_weights where run_id = $1 order by engine_id`, [runId]);
  return r.rows.map(({ engine_id, ...w }) => ({ engineId: engine_id, ...w }));
}

// ---- engine_requests

export interface EngineRequestSent {
  requestId: string;
  runId: string;
  rolloutId: string;
  turnIndex: number;
  /** 0, 1, … within the turn. */
  seq: number;
  engineId: string;
  kind: string;
  /** The version the engine served when the request was sent. */
  version: number;
  epochSent: number;
  /** Ids sent (the turn's prompt + ids kept before it). */
  prefixTokens: number;
  /** Ids of this turn already generated by earlier requests. */
  keptBefore: number;
}

export type RequestOutcome = 'answered' | 'aborted' | 'dropped' | 'failed';

export async function insertEngineRequest(db: Queryable, r: EngineRequestSent): Promise<void> {
  await db.query(
    `insert into engine_requests (request_id, run_id, rollout_id, turn_index, seq, engine_id, kind, version, epoch_sent, prefix_tokens, kept_before, outcome)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'sent')`,
    [r.requestId, r.runId, r.rolloutId, r.turnIndex, r.seq, r.engineId, r.kind, r.version, r.epochSent, r.prefixTokens, r.keptBefore]);
}

/** The answer to a request (or its failure): ids returned, finish reason, outcome, the version
 *  its kept ids are stamped with (null: the version it was sent under stays), the epoch then. */
export async function answerEngineRequest(db: Queryable, requestId: string, a: { generated: number | null; finishReason: string | null; outcome: RequestOutcome; version: number | null; detail: unknown; epochAnswered: number | null }): Promise<void> {
  await db.query(
    `update engine_requests set answered_at = now(), generated = $2, finish_reason = $3, outcome = $4, version = coalesce($5, version), detail = $6, epoch_answered = $7 where request_id = $1`,
    [requestId, a.generated, a.finishReason, a.outcome, a.version, jsonOrNull(a.detail), a.epochAnswered]);
}

export interface EngineRequestRow {
  requestId: string;
  runId: string;
  rolloutId: string;
  turnIndex: number;
  seq: number;
  engineId: string;
  kind: string;
  version: number | null;
  epochSent: number | null;
  epochAnswered: number | null;
  prefixTokens: number;
  keptBefore: number;
  generated: number | null;
  finishReason: string | null;
  outcome: string;
  detail: unknown;
  sentAt: Date;
  answeredAt: Date | null;
}

interface RequestDbRow { request_id: string; run_id: string; rollout_id: string; turn_index: number; seq: number; engine_id: string; kind: string; version: number | null; epoch_sent: number | null; epoch_answered: number | null; prefix_tokens: number; kept_before: number; generated: number | null; finish_reason: string | null; outcome: string; detail: unknown; sent_at: Date; answered_at: Date | null }

const requestRow = (r: RequestDbRow): EngineRequestRow => ({
  requestId: r.request_id, runId: r.run_id, rolloutId: r.rollout_id, turnIndex: r.turn_index, seq: r.seq, engineId: r.engine_id, kind: r.kind, version: r.version,
  epochSent: r.epoch_sent, epochAnswered: r.epoch_answered, prefixTokens: r.prefix_tokens, keptBefore: r.kept_before, generated: r.generated, finishReason: r.finish_reason,
  outcome: r.outcome, detail: r.detail, sentAt: r.sent_at, answeredAt: r.answered_at,
});

/** The requests of one turn, in the order they were sent. */
export async function listTurnRequests(db: Queryable, rolloutId: string, turnIndex: number): Promise<EngineRequestRow[]> {
  const r = await db.query<RequestDbRow>('select * from engine_requests where rollout_id = $1 and turn_index = $2 order by seq', [rolloutId, turnIndex]);
  return r.rows.map(requestRow);
}

/** The requests of a run, optionally of one engine, in the order they were sent. */
export async function listEngineRequests(db: Queryable, runId: string, filter: { engineId?: string } = {}): Promise<EngineRequestRow[]> {
  const r = await db.query<RequestDbRow>(
    'select * from engine_requests where run_id = $1 and ($2::text is null or engine_id = $2) order by sent_at, request_id', [runId, filter.engineId ?? null]);
  return r.rows.map(requestRow);
}

/** Turns of a run that took more than one request (v_resubmitted_turns): a turn that spanned a
 *  weight update shows the aborted request and its resubmission. */
export async function listResubmittedTurns(db: Queryable, runId: string): Promise<{ rolloutId: string; turnIndex: number; requests: number; engines: string[]; outcomes: string[]; versions: (number | null)[]; generated: (number | null)[] }[]> {
  const r = await db.query<{ rollout_id: string; turn_index: number; requests: number; engines: string[]; outcomes: string[]; versions: (number | null)[]; generated: (number | null)[] }>(
    `select rollout_id, turn_index, requests::int as requests, engines, outcomes, versions, generated from v_resubmitted_turns where run_id = $1 order by rollout_id, turn_index`, [runId]);
  return r.rows.map((x) => ({ rolloutId: x.rollout_id, turnIndex: x.turn_index, requests: x.requests, engines: x.engines, outcomes: x.outcomes, versions: x.versions, generated: x.generated }));
}

/** Requests per engine of a run whose ids were resubmitted (aborted or dropped). */
export async function countResubmittedRequests(db: Queryable, runId: string): Promise<Map<string, number>> {
  const r = await db.query<{ engine_id: string; n: number }>(
    `select engine_id, count(*)::int as n from engine_requests where run_id = $1 and outcome in ('aborted', 'dropped') group by engine_id`, [runId]);
  return new Map(r.rows.map((x) => [x.engine_id, x.n]));
}

/** What weight updates cost the requests in flight, over a run (docs/guides/engines.md
 *  "Requests in flight during an update"): ids thrown away (dropped answers: ids floe could not
 *  attribute to one version), ids a server computed K/V for again (a resubmission after an
 *  abort or a drop sends the turn's prompt and kept ids again, into a flushed cache; a request
 *  kept through an update has its prompt and the ids before each switch recomputed), turns that
 *  ran through an update, and how long the paused engines stood still (pause + load + flush +
 *  resume of each load by a paused engine). */
export async function inFlightUpdateCosts(db: Queryable, runId: string): Promise<{ droppedTokens: number; recomputedTokens: number; spanningTurns: number; pausedLoads: number; stallMs: number }> {
  const r = await db.query<{ dropped: string | null; resubmitted: string | null; kept: string | null; spanning: string | null }>(
    `with q as (
       select *, lag(outcome) over (partition by rollout_id, turn_index order by seq) as before
       from engine_requests where run_id = $1)
     select sum(generated) filter (where outcome = 'dropped') as dropped,
            sum(prefix_tokens) filter (where before in ('aborted', 'dropped')) as resubmitted,
            sum((select sum(prefix_tokens + x::int) from jsonb_array_elements_text(detail->'switchAt') x)) filter (where detail ? 'switchAt') as kept,
            (select count(*) from (select distinct rollout_id, turn_index from q
               where detail ? 'switchAt' or (before = 'aborted' and outcome = 'answered')) t) as spanning
     from q`, [runId]);
  const e = await db.query<{ loads: string; stall: string | null }>(
    `select count(*) as loads,
            sum(coalesce((detail->>'pause_ms')::numeric, 0) + coalesce((detail->>'load_ms')::numeric, 0) + coalesce((detail->>'flush_ms')::numeric, 0) + coalesce((detail->>'resume_ms')::numeric, 0)) as stall
     from engine_events where run_id = $1 and event = 'weights_loaded' and detail ? 'pause_ms'`, [runId]);
  const x = r.rows[0];
  return {
    droppedTokens: Number(x?.dropped ?? 0),
    recomputedTokens: Number(x?.resubmitted ?? 0) + Number(x?.kept ?? 0),
    spanningTurns: Number(x?.spanning ?? 0),
    pausedLoads: Number(e.rows[0]?.loads ?? 0),
    stallMs: Number(e.rows[0]?.stall ?? 0),
  };
}

// ---- engine_events

export type EngineEventKind = 'placed' | 'failed' | 'weights_loaded' | 'resynced' | 'resync_failed' | 'unhealthy' | 'healthy';

export interface EngineEvent {
  /** null: an event outside any run. */
  runId: string | null;
  engineId: string;
  event: EngineEventKind;
  version?: number | null;
  running?: number | null;
  waiting?: number | null;
  inflight?: number | null;
  detail?: unknown;
}

export async function insertEngineEvent(db: Queryable, e: EngineEvent): Promise<void> {
  await db.query(
    'insert into engine_events (run_id, engine_id, event, version, running, waiting, inflight, detail) values ($1, $2, $3, $4, $5, $6, $7, $8)',
    [e.runId, e.engineId, e.event, e.version ?? null, e.running ?? null, e.waiting ?? null, e.inflight ?? null, jsonOrNull(e.detail)]);
}

export interface EngineEventRow { id: number; runId: string | null; engineId: string; event: string; version: number | null; running: number | null; waiting: number | null; inflight: number | null; detail: unknown; at: Date }

/** A run's engine events, optionally of one engine and of some kinds, in order. */
export async function listEngineEvents(db: Queryable, runId: string, filter: { engineId?: string; events?: EngineEventKind[] } = {}): Promise<EngineEventRow[]> {
  const r = await db.query<{ id: string; run_id: string | null; engine_id: string; event: string; version: number | null; running: number | null; waiting: number | null; inflight: number | null; detail: unknown; at: Date }>(
    `select id, run_id, engine_id, event, version, running, waiting, inflight, detail, at from engine_events
     where run_id = $1 and ($2::text is null or engine_id = $2) and ($3::text[] is null or event = any($3)) order by at, id`,
    [runId, filter.engineId ?? null, filter.events ?? null]);
  return r.rows.map((x) => ({ id: Number(x.id), runId: x.run_id, engineId: x.engine_id, event: x.event, version: x.version, running: x.running, waiting: x.waiting, inflight: x.inflight, detail: x.detail, at: x.at }));
}

/** Placements, failures and the highest load seen per engine of a run, by engine id. */
export async function engineLoadTotals(db: Queryable, runId: string): Promise<{ engineId: string; placements: number; failures: number; maxRunning: number | null; maxWaiting: number | null }[]> {
  const r = await db.query<{ engine_id: string; placements: number; failures: number; max_running: number | null; max_waiting: number | null }>(
    `select engine_id, count(*) filter (where event = 'placed')::int as placements,
            count(*) filter (where event = 'failed')::int as failures,
            max(running) as max_running, max(waiting) as max_waiting
     from engine_events where run_id = $1 group by engine_id order by engine_id`, [runId]);
  return r.rows.map((x) => ({ engineId: x.engine_id, placements: x.placements, failures: x.failures, maxRunning: x.max_running, maxWaiting: x.max_waiting }));
}

/** Placements per engine per update window, bucketed in SQL by the timestamps of the run's
 *  weight updates (width_bucket over the sorted policy_versions.created_at of versions ≥ 1):
 *  bucket k-1 holds the placements that fed update k, bucket N the ones after the last
 *  update. Done in SQL because a long run has a placement per turn. */
export async function countPlacementsPerUpdate(db: Queryable, runId: string): Promise<{ engineId: string; bucket: number; n: number }[]> {
  const r = await db.query<{ engine_id: string; bucket: number; n: number }>(
    `select engine_id, coalesce(width_bucket(at, (select array_agg(created_at order by created_at)
              from policy_versions where run_id = $1 and version >= 1)), 0) as bucket,
            count(*)::int as n
     from engine_events where run_id = $1 and event = 'placed' group by 1, 2`, [runId]);
  return r.rows.map((x) => ({ engineId: x.engine_id, bucket: x.bucket, n: x.n }));
}
