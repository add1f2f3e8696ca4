import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { checkRawOutput, DEFAULT_SPECIAL_TOKEN_TEXTS, type FormatVerdict } from '../core/toolFormat.js';
import { renderSpec, type RenderSpec } from '../core/renderSpec.js';
import { conversation, SYSTEM_PROMPT, toolSchemas, type TurnRecord } from '../core/harness.js';
import type { RouterPolicy } from '../core/router.js';
import { endsTurn, nextPrompt, renderDrift, type RenderDrift, type TurnTokens } from '../core/tokenPath.js';
import { complete, EngineHttpError, type CompletionChoice, type EngineEndpoint } from './engineClient.js';
import { LiveRouter } from './router.js';
import type { Renderer, Renderers } from './renderer.js';

/** Generation of one agent turn, token in / token out: the prompt is the rollout's ids so
 *  far (from turn_tokens) plus the renderer's ids for the last tool result and the next
 *  assistant header; the engine gets ids and returns ids; the raw ids are checked against
 *  the format before any parser; the turn is recorded (ids, logprobs, weight versions, and
 *  text as a view for people). The workflow receives only the verdict and counts. */

export interface GenerateTurnInput {
  runId: string;
  rolloutId: string;
  turnIndex: number;
  taskId: string;
  /** The rollout's group: requests of one group share a prompt prefix (sticky placement). */
  groupId?: string;
  engines: EngineEndpoint[];
  router: RouterPolicy;
  /** Tokenizer and chat template; absent in histories recorded before the token path (byte + plain). */
  render?: RenderSpec;
  systemPrompt?: string;
  sampling: { temperature: number; topP: number; maxTokensPerTurn: number };
  seed?: number;
}

export type GeneratedTurn =
  | {
      kind: 'generated';
      engineId: string;
      verdict: FormatVerdict;
      finishReason: string;
      promptTokens: number;
      completionTokens: number;
      /** Distinct policy versions of this turn's tokens, in order. */
      versions: number[];
      genMs: number;
      /** Where the template's full rendering differs from the ids the model saw (null: none). */
      drift?: RenderDrift | null;
    }
  | { kind: 'prompt_too_long'; engineId: string; detail: string };

const MAX_TEXT_IN_HISTORY = 8192;

/** Postgres text cannot hold NUL. The exact generated ids are kept in turn_tokens (and the
 *  next prompt is built from them); the text column, a view, gets U+FFFD in their place. */
export const pgSafeText = (t: string): string => t.replace(/\u0000/g, '\uFFFD');

/** JSON for a jsonb column: jsonb refuses the \u0000 escape too. */
export const pgSafeJson = (v: unknown): string => pgSafeText(JSON.stringify(v)).replace(/\\u0000/g, '\\ufffd');

function heartbeat(): void {
  try { Context.current().heartbeat(); } catch { /* called outside an activity (tests) */ }
}

export function createGenerateActivities(pool: pg.Pool, router: LiveRouter, renderers: Renderers) {
  async function history(input: GenerateTurnInput): Promise<{ messages: ReturnType<typeof conversation>; earlier: TurnTokens[] }> {
    const task = await pool.query<{ problem: string }>(`select instance->>'problemStatement' as problem from tasks where task_id = $1`, [input.taskId]);
    if (!task.rowCount) throw ApplicationFailure.nonRetryable(`task ${input.taskId} is not in the tasks table; load the pool first`, 'UnknownTask');
    const turns = await pool.query<{ raw_text: string; observation: string | null; input_ids: number[] | null; completion_ids: number[]; logprobs: number[]; token_versions: number[] }>(
      `select t.raw_text, t.observation, k.input_ids, k.completion_ids, k.logprobs, k.token_versions
       from turns t join turn_tokens k using (rollout_id, turn_index) where t.rollout_id = $1 and t.turn_index < $2 order by t.turn_index`, [input.rolloutId, input.turnIndex]);
    if (turns.rowCount !== input.turnIndex) throw new Error(`rollout ${input.rolloutId}: expected ${input.turnIndex} earlier turns in Postgres, found ${turns.rowCount}`);
    if (turns.rows.some((t) => t.input_ids === null)) throw ApplicationFailure.nonRetryable(`rollout ${input.rolloutId} was recorded before the token path (no input_ids); it cannot be continued`, 'LegacyRollout');
    const records: TurnRecord[] = turns.rows.map((t) => ({ rawText: t.raw_text, observation: t.observation }));
    return {
      messages: conversation(input.systemPrompt ?? SYSTEM_PROMPT, task.rows[0].problem, records),
      earlier: turns.rows.map((t) => ({ inputIds: t.input_ids!, completionIds: t.completion_ids, logprobs: t.logprobs, versions: t.token_versions })),
    };
  }

  /** The ids this turn adds, the whole prompt, and any drift of the template from it. */
  async function prompt(r: Renderer, input: GenerateTurnInput): Promise<{ inputIds: number[]; prompt: number[]; drift: RenderDrift | null }> {
    const { messages, earlier } = await history(input);
    const tools = toolSchemas();
    if (earlier.length === 0) {
      const ids = (await r.start(messages, tools)).ids;
      return { inputIds: ids, prompt: ids, drift: null };
    }
    const last = earlier[earlier.length - 1];
    if (!endsTurn(last.completionIds, r.info.stop_token_ids)) throw ApplicationFailure.nonRetryable(`rollout ${input.rolloutId}: turn ${input.turnIndex - 1} did not end with an end-of-turn token, so it cannot be continued`, 'UnfinishedTurn');
    const inputIds = (await r.continuation(messages, tools)).ids;
    const ids = nextPrompt(earlier, inputIds);
    return { inputIds, prompt: ids, drift: renderDrift(ids, (await r.full(messages, tools)).ids) };
  }

  return {
    async generateTurn(input: GenerateTurnInput): Promise<GeneratedTurn> {
      const beat = setInterval(heartbeat, 5000);
      try {
        return await generate(input);
      } finally {
        clearInterval(beat);
      }
    },
  };

  async function generate(input: GenerateTurnInput): Promise<GeneratedTurn> {
    const r = await renderers.get(input.render ?? renderSpec({})); // histories from before the token path: the tiny policy's
    const p = await prompt(r, input);
    const tried: string[] = [];
    for (;;) {
      const placed = await router.place(input.router, input.engines, input.rolloutId, tried, input.groupId);
      if (!placed) throw new Error(`no healthy engine for rollout ${input.rolloutId} (tried ${tried.join(', ') || 'none'}); check the engines' /health`);
      const { engine } = placed;
      await pool.query(`insert into engine_events (run_id, engine_id, event, running, waiting, inflight, detail) values ($1, $2, 'placed', $3, $4, $5, $6)`,
        [input.runId, engine.id, placed.load.running, placed.load.waiting, placed.load.inflight, JSON.stringify({ rolloutId: input.rolloutId, turn: input.turnIndex, policy: input.router })]);
      const started = Date.now();
      try {
        const res = await complete(engine, {
          prompt: p.prompt, max_tokens: input.sampling.maxTokensPerTurn, temperature: input.sampling.temperature, top_p: input.sampling.topP,
          user: input.rolloutId, seed: input.seed, stop_token_ids: r.info.stop_token_ids,
        });
        placed.done(true);
        return await record(input, engine, r, p, res.choices[0], Date.now() - started);
      } catch (err) {
        if (err instanceof EngineHttpError && err.status === 400 && /context|too long|length/i.test(err.message)) {
          placed.done(true);
          return { kind: 'prompt_too_long', engineId: engine.id, detail: err.message };
        }
        placed.done(false);
        await pool.query(`insert into engine_events (run_id, engine_id, event, detail) values ($1, $2, 'failed', $3)`, [input.runId, engine.id, JSON.stringify({ error: (err as Error).message })]);
        tried.push(engine.id);
        if (tried.length >= input.engines.length) throw err; // Temporal retries the activity
      }
    }
  }

  async function record(input: GenerateTurnInput, engine: EngineEndpoint, r: Renderer, p: { inputIds: number[]; prompt: number[]; drift: RenderDrift | null }, choice: CompletionChoice, genMs: number): Promise<GeneratedTurn> {
    const tokenIds = choice.token_ids;
    if (!Array.isArray(tokenIds)) throw ApplicationFailure.nonRetryable(`engine ${engine.id} returned no token_ids; floe needs the generated ids (vLLM: return_token_ids, floe sends it)`, 'EngineError');
    const info = r.info;
    const finishReason = choice.finish_reason ?? 'abort';
    const stopped = finishReason === 'stop' && endsTurn(tokenIds, info.stop_token_ids);
    const body = stopped ? tokenIds.slice(0, -1) : tokenIds;
    const endToken = stopped ? tokenIds[tokenIds.length - 1] : info.eos_token_id;
    // The text is a view of the ids, decoded by the model's own tokenizer (an engine's text may
    // hide special tokens); byte-level ids are also checked byte for byte.
    const text = await r.decode(body);
    const bytes = info.kind === 'byte' && body.every((t) => t < 256) ? body : undefined;
    const verdict = checkRawOutput({
      text,
      tokenIds,
      bytes,
      finishReason,
      eosTokenId: endToken,
      // every control token is banned inside the turn; the one that ended it only as its last token
      specialTokenIds: [...new Set([...info.special_token_ids, ...info.stop_token_ids])].filter((t) => t !== endToken),
      specialTokenTexts: [...new Set([...DEFAULT_SPECIAL_TOKEN_TEXTS, ...info.special_token_texts])],
    });
    const logprobs = choice.logprobs?.token_logprobs ?? [];
    const tokenVersions = choice.weight_versions ?? [];
    const versions = [...new Set(tokenVersions)];
    const promptTokens = p.prompt.length;
    const completionTokens = tokenIds.length;
    const call = verdict.ok ? verdict.call : null;
    await pool.query(
      `insert into turns (rollout_id, turn_index, engine_id, raw_text, prompt_tokens, completion_tokens, finish_reason, weight_versions, format_ok, format_reason, tool_name, tool_args, gen_ms)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
       on conflict (rollout_id, turn_index) do update set engine_id = excluded.engine_id, raw_text = excluded.raw_text,
         prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, finish_reason = excluded.finish_reason,
         weight_versions = excluded.weight_versions, format_ok = excluded.format_ok, format_reason = excluded.format_reason,
         tool_name = excluded.tool_name, tool_args = excluded.tool_args, gen_ms = excluded.gen_ms`,
      [input.rolloutId, input.turnIndex, engine.id, pgSafeText(text), promptTokens, completionTokens, choice.finish_reason, versions,
        verdict.ok, verdict.ok ? null : verdict.reason, call?.name ?? null, call ? pgSafeJson(call.arguments) : null, genMs],
    );
    await pool.query(
      `insert into turn_tokens (rollout_id, turn_index, prompt_ids, input_ids, prompt_len, completion_ids, logprobs, token_versions, render_drift) values ($1, $2, '{}', $3, $4, $5, $6, $7, $8)
       on conflict (rollout_id, turn_index) do update set input_ids = excluded.input_ids, prompt_len = excluded.prompt_len, completion_ids = excluded.completion_ids,
         logprobs = excluded.logprobs, token_versions = excluded.token_versions, render_drift = excluded.render_drift`,
      [input.rolloutId, input.turnIndex, p.inputIds, promptTokens, tokenIds, logprobs, tokenVersions, p.drift ? JSON.stringify(p.drift) : null],
    );
    const verdictForHistory: FormatVerdict = verdict.ok ? verdict : { ...verdict, detail: verdict.detail.slice(0, MAX_TEXT_IN_HISTORY) };
    return { kind: 'generated', engineId: engine.id, verdict: verdictForHistory, finishReason, promptTokens, completionTokens, versions, genMs, drift: p.drift };
  }
}

export type GenerateActivities = ReturnType<typeof createGenerateActivities>;
