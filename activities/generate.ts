import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { checkRawOutput, type FormatVerdict } from '../core/toolFormat.js';
import { renderPrompt, type TurnRecord } from '../core/harness.js';
import type { RouterPolicy } from '../core/router.js';
import { complete, engineInfo, EngineHttpError, type EngineEndpoint, type EngineInfo } from './engineClient.js';
import { LiveRouter } from './router.js';

/** Generation of one agent turn: build the prompt from the audit history, place the request
 *  on an engine, check the raw tokens against the format before any parser, and record the
 *  turn (text, tokens, logprobs, weight versions). The workflow receives only the verdict
 *  and counts; token-level data stays in Postgres. */

export interface GenerateTurnInput {
  runId: string;
  rolloutId: string;
  turnIndex: number;
  taskId: string;
  /** The rollout's group: requests of one group share a prompt prefix (sticky placement). */
  groupId?: string;
  engines: EngineEndpoint[];
  router: RouterPolicy;
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
    }
  | { kind: 'prompt_too_long'; engineId: string; detail: string };

const MAX_TEXT_IN_HISTORY = 8192;

/** Postgres text cannot hold NUL. The exact generated ids are kept in turn_tokens; the text
 *  column gets U+FFFD in their place (and so does any later prompt built from it). */
export const pgSafeText = (t: string): string => t.replace(/\u0000/g, '\uFFFD');

/** JSON for a jsonb column: jsonb refuses the \u0000 escape too. */
export const pgSafeJson = (v: unknown): string => pgSafeText(JSON.stringify(v)).replace(/\\u0000/g, '\\ufffd');

function heartbeat(): void {
  try { Context.current().heartbeat(); } catch { /* called outside an activity (tests) */ }
}

export function createGenerateActivities(pool: pg.Pool, router: LiveRouter) {
  const infos = new Map<string, EngineInfo>();
  const info = async (e: EngineEndpoint) => {
    let i = infos.get(e.url);
    if (!i) {
      i = await engineInfo(e);
      infos.set(e.url, i);
    }
    return i;
  };

  async function conversation(rolloutId: string, turnIndex: number, taskId: string): Promise<string> {
    const task = await pool.query<{ problem: string }>(`select instance->>'problemStatement' as problem from tasks where task_id = $1`, [taskId]);
    if (!task.rowCount) throw ApplicationFailure.nonRetryable(`task ${taskId} is not in the tasks table; load the pool first`, 'UnknownTask');
    const turns = await pool.query<{ raw_text: string; observation: string | null }>(
      'select raw_text, observation from turns where rollout_id = $1 and turn_index < $2 order by turn_index', [rolloutId, turnIndex]);
    if (turns.rowCount !== turnIndex) throw new Error(`rollout ${rolloutId}: expected ${turnIndex} earlier turns in Postgres, found ${turns.rowCount}`);
    const records: TurnRecord[] = turns.rows.map((t) => ({ rawText: t.raw_text, observation: t.observation }));
    return renderPrompt(task.rows[0].problem, records);
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
    {
      const prompt = await conversation(input.rolloutId, input.turnIndex, input.taskId);
      const tried: string[] = [];
      for (;;) {
        const placed = await router.place(input.router, input.engines, input.rolloutId, tried, input.groupId);
        if (!placed) throw new Error(`no healthy engine for rollout ${input.rolloutId} (tried ${tried.join(', ') || 'none'}); check the engines' /health`);
        const { engine } = placed;
        await pool.query(`insert into engine_events (run_id, engine_id, event, running, waiting, inflight, detail) values ($1, $2, 'placed', $3, $4, $5, $6)`,
          [input.runId, engine.id, placed.load.running, placed.load.waiting, placed.load.inflight, JSON.stringify({ rolloutId: input.rolloutId, turn: input.turnIndex, policy: input.router })]);
        const started = Date.now();
        let res;
        try {
          const ei = await info(engine);
          res = await complete(engine, { prompt, max_tokens: input.sampling.maxTokensPerTurn, temperature: input.sampling.temperature, top_p: input.sampling.topP, user: input.rolloutId, seed: input.seed });
          placed.done(true);
          return await record(input, engine, ei, prompt, res.choices[0], res.usage, Date.now() - started);
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
  }

  async function record(input: GenerateTurnInput, engine: EngineEndpoint, ei: EngineInfo, prompt: string, choice: { text: string; finish_reason: string | null; token_ids?: number[]; prompt_token_ids?: number[]; logprobs?: { token_logprobs?: number[] } | null; weight_versions?: number[] }, usage: { prompt_tokens: number; completion_tokens: number } | undefined, genMs: number): Promise<GeneratedTurn> {
    const tokenIds = choice.token_ids ?? [];
    const eos = ei.eosTokenId ?? undefined;
    // Byte-level engines: the raw bytes are the ground truth for the text.
    const bytes = ei.byteLevel ? tokenIds.filter((t, i) => !(i === tokenIds.length - 1 && t === eos)).filter((t) => t < 256) : undefined;
    const verdict = checkRawOutput({
      text: choice.text,
      tokenIds,
      bytes: ei.byteLevel && bytes && bytes.length === tokenIds.filter((t, i) => !(i === tokenIds.length - 1 && t === eos)).length ? bytes : undefined,
      finishReason: choice.finish_reason ?? 'abort',
      eosTokenId: eos,
      specialTokenIds: ei.specialTokenIds,
    });
    const versions = [...new Set(choice.weight_versions ?? [])];
    const promptTokens = usage?.prompt_tokens ?? choice.prompt_token_ids?.length ?? 0;
    const completionTokens = usage?.completion_tokens ?? tokenIds.length;
    const call = verdict.ok ? verdict.call : null;
    await pool.query(
      `insert into turns (rollout_id, turn_index, engine_id, raw_text, prompt_tokens, completion_tokens, finish_reason, weight_versions, format_ok, format_reason, tool_name, tool_args, gen_ms)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
       on conflict (rollout_id, turn_index) do update set engine_id = excluded.engine_id, raw_text = excluded.raw_text,
         prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, finish_reason = excluded.finish_reason,
         weight_versions = excluded.weight_versions, format_ok = excluded.format_ok, format_reason = excluded.format_reason,
         tool_name = excluded.tool_name, tool_args = excluded.tool_args, gen_ms = excluded.gen_ms`,
      [input.rolloutId, input.turnIndex, engine.id, pgSafeText(choice.text), promptTokens, completionTokens, choice.finish_reason, versions,
        verdict.ok, verdict.ok ? null : verdict.reason, call?.name ?? null, call ? pgSafeJson(call.arguments) : null, genMs],
    );
    await pool.query(
      `insert into turn_tokens (rollout_id, turn_index, prompt_ids, completion_ids, logprobs, token_versions) values ($1, $2, $3, $4, $5, $6)
       on conflict (rollout_id, turn_index) do update set prompt_ids = excluded.prompt_ids, completion_ids = excluded.completion_ids,
         logprobs = excluded.logprobs, token_versions = excluded.token_versions`,
      [input.rolloutId, input.turnIndex, choice.prompt_token_ids ?? [], tokenIds, choice.logprobs?.token_logprobs ?? [], choice.weight_versions ?? []],
    );
    const verdictForHistory: FormatVerdict = verdict.ok ? verdict : { ...verdict, detail: verdict.detail.slice(0, MAX_TEXT_IN_HISTORY) };
    return { kind: 'generated', engineId: engine.id, verdict: verdictForHistory, finishReason: choice.finish_reason ?? 'abort', promptTokens, completionTokens, versions, genMs };
  }
}

export type GenerateActivities = ReturnType<typeof createGenerateActivities>;
