import type { RenderDrift } from '../core/tokenPath.js';
import { jsonOrNull, pgSafeJson, pgSafeText, type Queryable } from './pool.js';

/** Rollouts and what they consist of. Tables: rollouts, turns, turn_tokens, gate_decisions,
 *  submissions (db/migrations/001, 002, 003, 005); view v_rollout_sequences, v_shortcuts.
 *
 *  A turn is two rows: its token ids (turn_tokens), written by the generate activity as soon
 *  as the engine answered (the next turn's prompt is built from them, and ids do not travel
 *  through workflow histories), and its turns row, written once by the rollout workflow's
 *  recordTurn activity when everything about the turn is known (the tool's result included).
 *  Every write is idempotent: activities may be retried. */

export type RolloutPurpose = 'train' | 'recheck' | 'eval' | 'test' | 'audit';
export type RolloutStatus = 'running' | 'finished' | 'discarded' | 'failed';

export interface RolloutStart { runId: string; rolloutId: string; taskId: string; groupId: string; attempt: number; purpose: RolloutPurpose; workflowId: string }

export interface RolloutEnd {
  rolloutId: string;
  reward: number;
  gate: string;
  nTurns: number;
  promptTokens: number;
  completionTokens: number;
  versionStart: number | null;
  versionEnd: number | null;
  shortcutFlags: string[];
  status: 'finished' | 'failed';
}

export interface RolloutRow {
  rolloutId: string;
  runId: string;
  taskId: string;
  groupId: string;
  attempt: number;
  purpose: RolloutPurpose;
  status: RolloutStatus;
  versionStart: number | null;
  versionEnd: number | null;
  reward: number | null;
  gate: string | null;
  nTurns: number | null;
  promptTokens: number | null;
  completionTokens: number | null;
  shortcutFlags: string[];
  discardReason: string | null;
  staleness: number | null;
  startedAt: Date;
  endedAt: Date | null;
}

// ---- rollouts

export async function insertRollout(db: Queryable, s: RolloutStart): Promise<void> {
  await db.query(
    `insert into rollouts (rollout_id, run_id, task_id, group_id, attempt, purpose, workflow_id) values ($1, $2, $3, $4, $5, $6, $7)
     on conflict (rollout_id) do nothing`,
    [s.rolloutId, s.runId, s.taskId, s.groupId, s.attempt, s.purpose, s.workflowId],
  );
}

/** The rollout's outcome; a rollout already discarded as stale stays discarded. */
export async function finishRollout(db: Queryable, e: RolloutEnd): Promise<void> {
  await db.query(
    `update rollouts set status = case when status = 'discarded' then status else $2 end, reward = $3, gate = $4, n_turns = $5,
       prompt_tokens = $6, completion_tokens = $7, version_start = $8, version_end = $9, shortcut_flags = $10, ended_at = now()
     where rollout_id = $1`,
    [e.rolloutId, e.status, e.reward, e.gate, e.nTurns, e.promptTokens, e.completionTokens, e.versionStart, e.versionEnd, e.shortcutFlags],
  );
}

/** Discard rollouts (too stale to train on), with their staleness; once only. */
export async function discardRollouts(db: Queryable, input: { rolloutIds: string[]; reason: string; staleness: Record<string, number> }): Promise<void> {
  await db.query(
    `update rollouts r set status = 'discarded', discard_reason = $2, staleness = x.staleness
     from unnest($1::text[], $3::int[]) as x(rollout_id, staleness)
     where r.rollout_id = x.rollout_id and r.status <> 'discarded'`,
    [input.rolloutIds, input.reason, input.rolloutIds.map((id) => input.staleness[id] ?? null)],
  );
}

/** Staleness of rollouts at collection (policy version then minus version_start). */
export async function setRolloutStaleness(db: Queryable, staleness: Record<string, number>): Promise<void> {
  const ids = Object.keys(staleness);
  if (!ids.length) return;
  await db.query(
    `update rollouts r set staleness = x.staleness from unnest($1::text[], $2::int[]) as x(rollout_id, staleness) where r.rollout_id = x.rollout_id`,
    [ids, ids.map((id) => staleness[id])],
  );
}

const ROLLOUT_COLUMNS = `rollout_id, run_id, task_id, group_id, attempt, purpose, status, version_start, version_end, reward, gate, n_turns,
  prompt_tokens, completion_tokens, shortcut_flags, discard_reason, staleness, started_at, ended_at`;

interface RolloutDbRow { rollout_id: string; run_id: string; task_id: string; group_id: string; attempt: number; purpose: RolloutPurpose; status: RolloutStatus; version_start: number | null; version_end: number | null; reward: number | null; gate: string | null; n_turns: number | null; prompt_tokens: number | null; completion_tokens: number | null; shortcut_flags: string[]; discard_reason: string | null; staleness: number | null; started_at: Date; ended_at: Date | null }

const rolloutRow = (r: RolloutDbRow): RolloutRow => ({
  rolloutId: r.rollout_id, runId: r.run_id, taskId: r.task_id, groupId: r.group_id, attempt: r.attempt, purpose: r.purpose, status: r.status,
  versionStart: r.version_start, versionEnd: r.version_end, reward: r.reward, gate: r.gate, nTurns: r.n_turns, promptTokens: r.prompt_tokens,
  completionTokens: r.completion_tokens, shortcutFlags: r.shortcut_flags, discardReason: r.discard_reason, staleness: r.staleness, startedAt: r.started_at, endedAt: r.ended_at,
});

/** The rollouts of a run, in the order they started. */
export async function listRollouts(db: Queryable, runId: string, filter: { status?: RolloutStatus } = {}): Promise<RolloutRow[]> {
  const r = await db.query<RolloutDbRow>(
    `select ${ROLLOUT_COLUMNS} from rollouts where run_id = $1 and ($2::text is null or status = $2) order by started_at, rollout_id`,
    [runId, filter.status ?? null]);
  return r.rows.map(rolloutRow);
}

export async function countRollouts(db: Queryable, runId: string, filter: { status?: RolloutStatus } = {}): Promise<number> {
  const r = await db.query<{ n: number }>(`select count(*)::int as n from rollouts where run_id = $1 and ($2::text is null or status = $2)`, [runId, filter.status ?? null]);
  return r.rows[0].n;
}

/** How many of a run's rollouts in `status` had each staleness (null: not recorded). */
export async function countRolloutsByStaleness(db: Queryable, runId: string, status: RolloutStatus): Promise<{ staleness: number | null; n: number }[]> {
  const r = await db.query<{ staleness: number | null; n: number }>(
    `select staleness, count(*)::int as n from rollouts where run_id = $1 and status = $2 group by staleness`, [runId, status]);
  return r.rows;
}

/** Rewards of a run's finished recheck rollouts, with the policy version they ran under. */
export async function listRecheckRewards(db: Queryable, runId: string): Promise<{ taskId: string; version: number; reward: number }[]> {
  const r = await db.query<{ task_id: string; version: number; reward: number }>(
    `select task_id, coalesce(version_end, version_start) as version, reward from rollouts
     where run_id = $1 and purpose = 'recheck' and status = 'finished' and reward is not null
       and coalesce(version_end, version_start) is not null`, [runId]);
  return r.rows.map((x) => ({ taskId: x.task_id, version: x.version, reward: x.reward }));
}

/** Rollouts per shortcut flag in a run (v_shortcuts), by flag. */
export async function countShortcutFlags(db: Queryable, runId: string): Promise<{ flag: string; rollouts: number }[]> {
  const r = await db.query<{ flag: string; rollouts: number }>('select flag, rollouts::int as rollouts from v_shortcuts where run_id = $1 order by flag', [runId]);
  return r.rows;
}

// ---- turns and their token ids

/** Everything about one turn, as its turns row holds it. */
export interface TurnRow {
  rolloutId: string;
  turnIndex: number;
  engineId: string | null;
  /** The generated text (a view of the ids for people; NUL becomes U+FFFD when stored). */
  rawText: string;
  promptTokens: number | null;
  completionTokens: number | null;
  finishReason: string | null;
  /** Distinct policy versions of the turn's tokens, in order. */
  weightVersions: number[] | null;
  formatOk: boolean;
  formatReason: string | null;
  toolName: string | null;
  toolArgs: unknown;
  /** What the model saw next (null: the turn ran no tool, or the tool did not answer). */
  observation: string | null;
  exitCode: number | null;
  shortcutFlags: string[];
  genMs: number | null;
  toolMs: number | null;
}

/** Write a turn's row, once, with everything known about it. A retried activity finds the
 *  row there and leaves it as it is. */
export async function insertTurn(db: Queryable, t: TurnRow): Promise<void> {
  await db.query(
    `insert into turns (rollout_id, turn_index, engine_id, raw_text, prompt_tokens, completion_tokens, finish_reason, weight_versions,
                        format_ok, format_reason, tool_name, tool_args, observation, exit_code, shortcut_flags, gen_ms, tool_ms)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
     on conflict (rollout_id, turn_index) do nothing`,
    [t.rolloutId, t.turnIndex, t.engineId, pgSafeText(t.rawText), t.promptTokens, t.completionTokens, t.finishReason, t.weightVersions,
      t.formatOk, t.formatReason, t.toolName, t.toolArgs === null || t.toolArgs === undefined ? null : pgSafeJson(t.toolArgs),
      t.observation === null ? null : pgSafeText(t.observation), t.exitCode, t.shortcutFlags, t.genMs, t.toolMs],
  );
}

interface TurnDbRow { rollout_id: string; turn_index: number; engine_id: string | null; raw_text: string; prompt_tokens: number | null; completion_tokens: number | null; finish_reason: string | null; weight_versions: number[] | null; format_ok: boolean; format_reason: string | null; tool_name: string | null; tool_args: unknown; observation: string | null; exit_code: number | null; shortcut_flags: string[]; gen_ms: number | null; tool_ms: number | null }

const TURN_COLUMNS = `t.rollout_id, t.turn_index, t.engine_id, t.raw_text, t.prompt_tokens, t.completion_tokens, t.finish_reason, t.weight_versions,
  t.format_ok, t.format_reason, t.tool_name, t.tool_args, t.observation, t.exit_code, t.shortcut_flags, t.gen_ms, t.tool_ms`;

const turnRow = (r: TurnDbRow): TurnRow => ({
  rolloutId: r.rollout_id, turnIndex: r.turn_index, engineId: r.engine_id, rawText: r.raw_text, promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens,
  finishReason: r.finish_reason, weightVersions: r.weight_versions, formatOk: r.format_ok, formatReason: r.format_reason, toolName: r.tool_name, toolArgs: r.tool_args,
  observation: r.observation, exitCode: r.exit_code, shortcutFlags: r.shortcut_flags, genMs: r.gen_ms, toolMs: r.tool_ms,
});

/** A rollout's turns, in order. */
export async function listTurns(db: Queryable, rolloutId: string): Promise<TurnRow[]> {
  const r = await db.query<TurnDbRow>(`select ${TURN_COLUMNS} from turns t where t.rollout_id = $1 order by t.turn_index`, [rolloutId]);
  return r.rows.map(turnRow);
}

/** Every turn of every rollout of a run, by rollout and turn. */
export async function listRunTurns(db: Queryable, runId: string): Promise<TurnRow[]> {
  const r = await db.query<TurnDbRow>(
    `select ${TURN_COLUMNS} from turns t join rollouts r using (rollout_id) where r.run_id = $1 order by t.rollout_id, t.turn_index`, [runId]);
  return r.rows.map(turnRow);
}

/** The token ids of one turn (turn_tokens). */
export interface TurnTokensRow {
  rolloutId: string;
  turnIndex: number;
  /** Ids the renderer added before this turn (null: a row from before migration 003). */
  inputIds: number[] | null;
  /** Length of the prompt sent to the engine. */
  promptLen: number | null;
  completionIds: number[];
  logprobs: number[];
  tokenVersions: number[];
  renderDrift: RenderDrift | null;
}

/** Write a turn's ids as soon as they are generated. A retried generation (which placed its
 *  requests again) replaces the ids of the attempt before it: the next turn is built on the
 *  ids of the attempt whose answer the workflow received. */
export async function upsertTurnTokens(db: Queryable, t: Omit<TurnTokensRow, 'inputIds' | 'promptLen'> & { inputIds: number[]; promptLen: number }): Promise<void> {
  await db.query(
    `insert into turn_tokens (rollout_id, turn_index, prompt_ids, input_ids, prompt_len, completion_ids, logprobs, token_versions, render_drift) values ($1, $2, '{}', $3, $4, $5, $6, $7, $8)
     on conflict (rollout_id, turn_index) do update set input_ids = excluded.input_ids, prompt_len = excluded.prompt_len, completion_ids = excluded.completion_ids,
       logprobs = excluded.logprobs, token_versions = excluded.token_versions, render_drift = excluded.render_drift`,
    [t.rolloutId, t.turnIndex, t.inputIds, t.promptLen, t.completionIds, t.logprobs, t.tokenVersions, jsonOrNull(t.renderDrift)],
  );
}

interface TokensDbRow { rollout_id: string; turn_index: number; input_ids: number[] | null; prompt_len: number | null; completion_ids: number[]; logprobs: number[]; token_versions: number[]; render_drift: RenderDrift | null }

const TOKEN_COLUMNS = 'k.rollout_id, k.turn_index, k.input_ids, k.prompt_len, k.completion_ids, k.logprobs, k.token_versions, k.render_drift';

const tokensRow = (r: TokensDbRow): TurnTokensRow => ({
  rolloutId: r.rollout_id, turnIndex: r.turn_index, inputIds: r.input_ids, promptLen: r.prompt_len, completionIds: r.completion_ids,
  logprobs: r.logprobs, tokenVersions: r.token_versions, renderDrift: r.render_drift,
});

/** A rollout's turn ids, in order. */
export async function listTurnTokens(db: Queryable, rolloutId: string): Promise<TurnTokensRow[]> {
  const r = await db.query<TokensDbRow>(`select ${TOKEN_COLUMNS} from turn_tokens k where k.rollout_id = $1 order by k.turn_index`, [rolloutId]);
  return r.rows.map(tokensRow);
}

/** The turn ids of every rollout of a run. */
export async function listRunTurnTokens(db: Queryable, runId: string): Promise<TurnTokensRow[]> {
  const r = await db.query<TokensDbRow>(
    `select ${TOKEN_COLUMNS} from turn_tokens k join rollouts r using (rollout_id) where r.run_id = $1 order by k.rollout_id, k.turn_index`, [runId]);
  return r.rows.map(tokensRow);
}

/** A rollout's turns before `beforeTurn` as the next generation needs them: the text of each
 *  turn and the tool result the model saw after it (turns), with its ids (turn_tokens). Only
 *  turns that have both rows count: a turn's row is written once its tool has answered. */
export async function listTurnHistory(db: Queryable, rolloutId: string, beforeTurn: number): Promise<(TurnTokensRow & { rawText: string; observation: string | null })[]> {
  const r = await db.query<TokensDbRow & { raw_text: string; observation: string | null }>(
    `select ${TOKEN_COLUMNS}, t.raw_text, t.observation
     from turns t join turn_tokens k using (rollout_id, turn_index) where t.rollout_id = $1 and t.turn_index < $2 order by t.turn_index`, [rolloutId, beforeTurn]);
  return r.rows.map((x) => ({ ...tokensRow(x), rawText: x.raw_text, observation: x.observation }));
}

/** The ids of the given rollouts' turns with each rollout's group and reward (what a
 *  training batch is built from), by rollout and turn. */
export async function listRolloutTokens(db: Queryable, rolloutIds: string[]): Promise<(TurnTokensRow & { groupId: string; reward: number })[]> {
  const r = await db.query<TokensDbRow & { group_id: string; reward: number }>(
    `select ${TOKEN_COLUMNS}, r.group_id, r.reward
     from turn_tokens k join rollouts r using (rollout_id)
     where r.rollout_id = any($1) order by r.rollout_id, k.turn_index`, [rolloutIds]);
  return r.rows.map((x) => ({ ...tokensRow(x), groupId: x.group_id, reward: x.reward }));
}

export interface RolloutSequenceRow { rolloutId: string; ids: number[]; lossMask: number[]; logprobs: number[]; tokenVersions: number[]; generatedTokens: number; sequenceTokens: number }

interface SequenceDbRow { rollout_id: string; ids: number[]; loss_mask: number[]; logprobs: number[]; token_versions: number[]; generated_tokens: number; sequence_tokens: number }

/** Columns and row mapping of v_rollout_sequences (store/batches.ts reads the view too). */
export const SEQUENCE_COLUMNS = 's.rollout_id, s.ids, s.loss_mask, s.logprobs, s.token_versions, s.generated_tokens::int as generated_tokens, s.sequence_tokens::int as sequence_tokens';

export const sequenceRow = (r: SequenceDbRow): RolloutSequenceRow => ({
  rolloutId: r.rollout_id, ids: r.ids, lossMask: r.loss_mask, logprobs: r.logprobs, tokenVersions: r.token_versions, generatedTokens: r.generated_tokens, sequenceTokens: r.sequence_tokens,
});

/** A rollout's whole token sequence as the trainer gets it (v_rollout_sequences; null: no ids). */
export async function getRolloutSequence(db: Queryable, rolloutId: string): Promise<RolloutSequenceRow | null> {
  const r = await db.query<SequenceDbRow>(`select ${SEQUENCE_COLUMNS} from v_rollout_sequences s where s.rollout_id = $1`, [rolloutId]);
  return r.rows[0] ? sequenceRow(r.rows[0]) : null;
}

// ---- submissions and gate decisions

export async function upsertSubmission(db: Queryable, s: { rolloutId: string; diff: string; bytes: number; truncated: boolean }): Promise<void> {
  await db.query(
    `insert into submissions (rollout_id, diff, bytes, truncated) values ($1, $2, $3, $4)
     on conflict (rollout_id) do update set diff = excluded.diff, bytes = excluded.bytes, truncated = excluded.truncated`,
    [s.rolloutId, pgSafeText(s.diff), s.bytes, s.truncated],
  );
}

/** The diffs rollouts submitted, by rollout id (rollouts that submitted nothing are absent). */
export async function listSubmissions(db: Queryable, rolloutIds: string[]): Promise<{ rolloutId: string; diff: string; truncated: boolean }[]> {
  const r = await db.query('select rollout_id, diff, truncated from submissions where rollout_id = any($1) order by rollout_id', [rolloutIds]);
  return r.rows.map((x: { rollout_id: string; diff: string; truncated: boolean }) => ({ rolloutId: x.rollout_id, diff: x.diff, truncated: x.truncated }));
}

/** The grading of a submission (per-test outcomes, apply error, timings). */
export async function setSubmissionGrade(db: Queryable, rolloutId: string, grade: unknown): Promise<void> {
  await db.query('update submissions set grade = $2 where rollout_id = $1', [rolloutId, pgSafeJson(grade)]);
}

export interface GateDecisionRow { rolloutId: string; gate: string; reward: number; detail: unknown }

export async function upsertGateDecision(db: Queryable, d: GateDecisionRow): Promise<void> {
  await db.query(
    `insert into gate_decisions (rollout_id, gate, reward, detail) values ($1, $2, $3, $4)
     on conflict (rollout_id) do update set gate = excluded.gate, reward = excluded.reward, detail = excluded.detail`,
    [d.rolloutId, d.gate, d.reward, pgSafeJson(d.detail ?? {})],
  );
}

export async function getGateDecision(db: Queryable, rolloutId: string): Promise<GateDecisionRow | null> {
  const r = await db.query<{ gate: string; reward: number; detail: unknown }>('select gate, reward, detail from gate_decisions where rollout_id = $1', [rolloutId]);
  return r.rows[0] ? { rolloutId, ...r.rows[0] } : null;
}

/** Rollouts per gate decision of a run's rollouts of one purpose, most frequent first. */
export async function countGateDecisions(db: Queryable, runId: string, purpose: RolloutPurpose): Promise<{ gate: string; rollouts: number; meanReward: number | null }[]> {
  const r = await db.query<{ gate: string; rollouts: number; mean_reward: number | null }>(
    `select g.gate, count(*)::int as rollouts, avg(g.reward) as mean_reward
     from gate_decisions g join rollouts r using (rollout_id)
     where r.run_id = $1 and r.purpose = $2 group by g.gate order by rollouts desc, g.gate`, [runId, purpose]);
  return r.rows.map((x) => ({ gate: x.gate, rollouts: x.rollouts, meanReward: x.mean_reward }));
}
