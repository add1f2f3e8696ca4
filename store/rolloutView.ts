import pg from 'pg';
import type { Queryable } from './pool.js';
import type { TurnRow } from './rollouts.js';

/** What the rollout viewer (`floe view`, report/viewer/) reads: a run's rollouts with their
 *  gate, batch and engines; one rollout's turns, gate decision, submission and batch; one
 *  turn's ids, behaviour log-probs and weight versions; one task across a run. Tables:
 *  runs, rollouts, turns, turn_tokens, gate_decisions, submissions, batch_members,
 *  policy_versions, evictions, evaluations, task_stats, tasks (db/migrations/001–011).
 *  Every function here is a SELECT: the viewer's pool refuses writes (readOnlyPool). */

/** A pool whose every session is read-only (`default_transaction_read_only`, set at connection
 *  start): an INSERT, UPDATE or DELETE through it fails with "cannot execute … in a read-only
 *  transaction", whatever the code above it does. */
export function readOnlyPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 4, options: '-c default_transaction_read_only=on' });
  pool.on('error', (err) => process.stderr.write(`[floe view] postgres pool error: ${err.message}\n`));
  return pool;
}

export interface ViewRun { runId: string; name: string; workflowId: string; status: string; startedAt: Date; endedAt: Date | null; tokenizer: string }

/** A rollout as the viewer's list shows it. */
export interface ViewRolloutRow {
  rolloutId: string;
  taskId: string;
  groupId: string;
  attempt: number;
  purpose: string;
  status: string;
  workflowId: string | null;
  versionStart: number | null;
  versionEnd: number | null;
  reward: number | null;
  gate: string | null;
  staleness: number | null;
  shortcutFlags: string[];
  discardReason: string | null;
  nTurns: number | null;
  completionTokens: number | null;
  /** Engines that answered its turns, in order of first use. */
  engines: string[];
  /** The weight update whose batch trained it (null: not trained). */
  batchVersion: number | null;
  /** The raw-format reason of its first refused turn (null: none refused). */
  formatReason: string | null;
  startedAt: Date;
}

export async function getViewRun(db: Queryable, runId: string): Promise<ViewRun | null> {
  const r = await db.query<{ run_id: string; name: string; workflow_id: string; status: string; started_at: Date; ended_at: Date | null; tokenizer: string | null }>(
    `select run_id, name, workflow_id, status, started_at, ended_at, config->'policy'->>'tokenizer' as tokenizer from runs where run_id = $1`, [runId]);
  const x = r.rows[0];
  return x ? { runId: x.run_id, name: x.name, workflowId: x.workflow_id, status: x.status, startedAt: x.started_at, endedAt: x.ended_at, tokenizer: x.tokenizer || 'byte' } : null;
}

/** The most recently started runs (for `floe view` without a run id). */
export async function listViewRuns(db: Queryable, limit = 50): Promise<ViewRun[]> {
  const r = await db.query<{ run_id: string; name: string; workflow_id: string; status: string; started_at: Date; ended_at: Date | null; tokenizer: string | null }>(
    `select run_id, name, workflow_id, status, started_at, ended_at, config->'policy'->>'tokenizer' as tokenizer from runs order by started_at desc limit $1`, [limit]);
  return r.rows.map((x) => ({ runId: x.run_id, name: x.name, workflowId: x.workflow_id, status: x.status, startedAt: x.started_at, endedAt: x.ended_at, tokenizer: x.tokenizer || 'byte' }));
}

interface ListDbRow { rollout_id: string; task_id: string; group_id: string; attempt: number; purpose: string; status: string; workflow_id: string | null; version_start: number | null; version_end: number | null; reward: number | null; gate: string | null; staleness: number | null; shortcut_flags: string[]; discard_reason: string | null; n_turns: number | null; completion_tokens: number | null; engines: string[] | null; batch_version: number | null; format_reason: string | null; started_at: Date }

const LIST_SQL = `select r.rollout_id, r.task_id, r.group_id, r.attempt, r.purpose, r.status, r.workflow_id, r.version_start, r.version_end, r.reward,
         coalesce(g.gate, r.gate) as gate, r.staleness, r.shortcut_flags, r.discard_reason, r.n_turns, r.completion_tokens, b.version as batch_version, r.started_at,
         (select array_agg(e.engine_id order by e.first) from (select engine_id, min(turn_index) as first from turns t where t.rollout_id = r.rollout_id and engine_id is not null group by engine_id) e) as engines,
         (select t.format_reason from turns t where t.rollout_id = r.rollout_id and not t.format_ok order by t.turn_index limit 1) as format_reason
  from rollouts r left join gate_decisions g using (rollout_id) left join batch_members b using (rollout_id)`;

const listRow = (x: ListDbRow): ViewRolloutRow => ({
  rolloutId: x.rollout_id, taskId: x.task_id, groupId: x.group_id, attempt: x.attempt, purpose: x.purpose, status: x.status, workflowId: x.workflow_id,
  versionStart: x.version_start, versionEnd: x.version_end, reward: x.reward, gate: x.gate, staleness: x.staleness, shortcutFlags: x.shortcut_flags,
  discardReason: x.discard_reason, nTurns: x.n_turns, completionTokens: x.completion_tokens, engines: x.engines ?? [], batchVersion: x.batch_version,
  formatReason: x.format_reason, startedAt: x.started_at,
});

/** A run's rollouts, in the order they started (the list filters them in the page). */
export async function listViewRollouts(db: Queryable, runId: string): Promise<ViewRolloutRow[]> {
  const r = await db.query<ListDbRow>(`${LIST_SQL} where r.run_id = $1 order by r.started_at, r.rollout_id`, [runId]);
  return r.rows.map(listRow);
}

/** One task's rollouts in a run, in the order they started. */
export async function listTaskRollouts(db: Queryable, runId: string, taskId: string): Promise<ViewRolloutRow[]> {
  const r = await db.query<ListDbRow>(`${LIST_SQL} where r.run_id = $1 and r.task_id = $2 order by r.started_at, r.rollout_id`, [runId, taskId]);
  return r.rows.map(listRow);
}

/** A turn without its ids: what the rollout page shows before a turn is opened (the turns row
 *  as store/rollouts.ts writes it, with token counts from turn_tokens). */
export type ViewTurn = Omit<TurnRow, 'rolloutId' | 'promptTokens' | 'completionTokens'> & {
  /** Ids the renderer added before the turn, and ids generated (null: no turn_tokens row). */
  inputTokens: number | null;
  generatedTokens: number | null;
};

export interface ViewRollout {
  row: ViewRolloutRow;
  run: ViewRun;
  problemStatement: string | null;
  turns: ViewTurn[];
  gateDecision: { gate: string; reward: number; detail: unknown } | null;
  submission: { diff: string; truncated: boolean; grade: unknown } | null;
  /** The batch that trained it: the version it produced, its advantage, and that update's
   *  recorded trainer metrics (loss, mismatch_* …: batch means, not per token). */
  batch: { version: number; advantage: number | null; metrics: Record<string, number> | null; batchRollouts: number | null } | null;
}

export async function getViewRollout(db: Queryable, rolloutId: string): Promise<ViewRollout | null> {
  const r = await db.query<ListDbRow & { run_id: string }>(`${LIST_SQL.replace('select r.rollout_id,', 'select r.run_id, r.rollout_id,')} where r.rollout_id = $1`, [rolloutId]);
  if (!r.rows[0]) return null;
  const row = listRow(r.rows[0]);
  const run = await getViewRun(db, r.rows[0].run_id);
  if (!run) return null;
  const turns = await db.query<{ turn_index: number; engine_id: string | null; raw_text: string; finish_reason: string | null; weight_versions: number[] | null; format_ok: boolean; format_reason: string | null; tool_name: string | null; tool_args: unknown; observation: string | null; exit_code: number | null; shortcut_flags: string[]; gen_ms: number | null; tool_ms: number | null; input_tokens: number | null; generated_tokens: number | null }>(
    `select t.turn_index, t.engine_id, t.raw_text, t.finish_reason, t.weight_versions, t.format_ok, t.format_reason, t.tool_name, t.tool_args, t.observation,
            t.exit_code, t.shortcut_flags, t.gen_ms, t.tool_ms,
            cardinality(k.input_ids) as input_tokens, cardinality(k.completion_ids) as generated_tokens
     from turns t left join turn_tokens k using (rollout_id, turn_index) where t.rollout_id = $1 order by t.turn_index`, [rolloutId]);
  const gate = await db.query<{ gate: string; reward: number; detail: unknown }>('select gate, reward, detail from gate_decisions where rollout_id = $1', [rolloutId]);
  const sub = await db.query<{ diff: string; truncated: boolean; grade: unknown }>('select diff, truncated, grade from submissions where rollout_id = $1', [rolloutId]);
  const batch = await db.query<{ version: number; advantage: number | null; metrics: Record<string, number> | null; batch_rollouts: number | null }>(
    `select b.version, b.advantage, p.metrics, p.batch_rollouts from batch_members b left join policy_versions p on p.run_id = b.run_id and p.version = b.version where b.rollout_id = $1`, [rolloutId]);
  const problem = await db.query<{ problem: string | null }>(`select instance->>'problemStatement' as problem from tasks where task_id = $1`, [row.taskId]);
  const b = batch.rows[0];
  return {
    row, run,
    problemStatement: problem.rows[0]?.problem ?? null,
    turns: turns.rows.map((t) => ({
      turnIndex: t.turn_index, engineId: t.engine_id, rawText: t.raw_text, finishReason: t.finish_reason, weightVersions: t.weight_versions, formatOk: t.format_ok,
      formatReason: t.format_reason, toolName: t.tool_name, toolArgs: t.tool_args, observation: t.observation, exitCode: t.exit_code, shortcutFlags: t.shortcut_flags,
      genMs: t.gen_ms, toolMs: t.tool_ms, inputTokens: t.input_tokens, generatedTokens: t.generated_tokens,
    })),
    gateDecision: gate.rows[0] ?? null,
    submission: sub.rows[0] ?? null,
    batch: b ? { version: b.version, advantage: b.advantage, metrics: b.metrics, batchRollouts: b.batch_rollouts } : null,
  };
}

/** One turn's ids as the engine produced them: the ids the renderer added before it, the
 *  generated ids with their behaviour log-probs (the engine's) and the weight version of each. */
export interface ViewTurnTokens { turnIndex: number; inputIds: number[]; completionIds: number[]; logprobs: number[]; tokenVersions: number[] }

export async function getViewTurnTokens(db: Queryable, rolloutId: string, turnIndex: number): Promise<ViewTurnTokens | null> {
  const r = await db.query<{ input_ids: number[] | null; completion_ids: number[]; logprobs: number[]; token_versions: number[] }>(
    'select input_ids, completion_ids, logprobs, token_versions from turn_tokens where rollout_id = $1 and turn_index = $2', [rolloutId, turnIndex]);
  const x = r.rows[0];
  return x ? { turnIndex, inputIds: x.input_ids ?? [], completionIds: x.completion_ids, logprobs: x.logprobs, tokenVersions: x.token_versions } : null;
}

/** Every turn's ids of a rollout (the static export embeds them all). */
export async function listViewTurnTokens(db: Queryable, rolloutId: string): Promise<ViewTurnTokens[]> {
  const r = await db.query<{ turn_index: number; input_ids: number[] | null; completion_ids: number[]; logprobs: number[]; token_versions: number[] }>(
    'select turn_index, input_ids, completion_ids, logprobs, token_versions from turn_tokens where rollout_id = $1 order by turn_index', [rolloutId]);
  return r.rows.map((x) => ({ turnIndex: x.turn_index, inputIds: x.input_ids ?? [], completionIds: x.completion_ids, logprobs: x.logprobs, tokenVersions: x.token_versions }));
}

/** A task across a run: its eviction decisions, frozen-weight evaluations and pool state. */
export interface ViewTaskHistory {
  evictions: { atVersion: number; decision: string; evidence: unknown }[];
  evaluations: { label: string; version: number; k: number; solved: number; attempts: number; pass1: number }[];
  state: string | null;
}

export async function getViewTaskHistory(db: Queryable, runId: string, taskId: string): Promise<ViewTaskHistory> {
  const ev = await db.query<{ at_version: number; decision: string; evidence: unknown }>(
    'select at_version, decision, evidence from evictions where run_id = $1 and task_id = $2 order by at_version, id', [runId, taskId]);
  const evals = await db.query<{ label: string; version: number; k: number; solved: number; attempts: number; pass_at_1: number }>(
    'select label, version, k, solved, attempts, pass_at_1 from evaluations where run_id = $1 and task_id = $2 order by version, label', [runId, taskId]);
  const st = await db.query<{ state: string }>('select state from task_stats where run_id = $1 and task_id = $2', [runId, taskId]);
  return {
    evictions: ev.rows.map((x) => ({ atVersion: x.at_version, decision: x.decision, evidence: x.evidence })),
    evaluations: evals.rows.map((x) => ({ label: x.label, version: x.version, k: x.k, solved: x.solved, attempts: x.attempts, pass1: x.pass_at_1 })),
    state: st.rows[0]?.state ?? null,
  };
}
