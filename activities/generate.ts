import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { checkRawOutput, DEFAULT_SPECIAL_TOKEN_TEXTS, type FormatVerdict } from '../core/toolFormat.js';
import { renderSpec, type RenderSpec } from '../core/renderSpec.js';
import { conversation, SYSTEM_PROMPT, toolSchemas, type TurnRecord } from '../core/harness.js';
import type { RouterPolicy } from '../core/router.js';
import { endsTurn, nextPrompt, renderDrift, type RenderDrift, type TurnTokens } from '../core/tokenPath.js';
import { randomUUID } from 'node:crypto';
import { abortedByUpdate, attribute, emptyTurn, labelsAgree, extendTurn, MAX_REQUESTS_PER_TURN, resubmission, servable, type EngineWeights, type TurnSoFar } from '../core/weightVersions.js';
import { adapterFor, EngineHttpError, type EngineEndpoint, type FinishReason, type GenerateResult } from './engines/index.js';
import { EngineVersions } from './engines/versions.js';
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
  const weightsDb = new EngineVersions(pool);
  router.onUnreachable = async (e) => { await weightsDb.markUnknown(e); };
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
    let soFar = emptyTurn();
    let last: EngineEndpoint | null = null;
    let genMs = 0;
    for (let seq = 0; ; seq++) {
      if (seq >= MAX_REQUESTS_PER_TURN) throw new Error(`rollout ${input.rolloutId} turn ${input.turnIndex}: ${seq} requests were aborted or dropped by weight updates; the turn is retried`);
      const next = resubmission(p.prompt, soFar, input.sampling.maxTokensPerTurn);
      if (next.maxTokens === 0) return record(input, last!, r, p, soFar, 'length', genMs);
      const placed = await placeServing(input, tried);
      if (!placed) throw new Error(`no healthy engine for rollout ${input.rolloutId} (tried ${tried.join(', ') || 'none'}); check the engines' /health (\`floe engine probe <url>\`)`);
      const { engine, weights } = placed;
      const adapter = await adapterFor(engine);
      last = engine;
      const requestId = `${input.rolloutId}-t${input.turnIndex}-${seq}-${randomUUID().slice(0, 8)}`;
      await pool.query(
        `insert into engine_requests (request_id, run_id, rollout_id, turn_index, seq, engine_id, kind, version, epoch_sent, prefix_tokens, kept_before, outcome)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'sent')`,
        [requestId, input.runId, input.rolloutId, input.turnIndex, seq, engine.id, adapter.kind, weights.version, weights.epoch, next.promptIds.length, soFar.ids.length]);
      const started = Date.now();
      let res: GenerateResult;
      try {
        res = await adapter.generate({
          requestId, promptIds: next.promptIds, maxTokens: next.maxTokens, temperature: input.sampling.temperature, topP: input.sampling.topP,
          seed: input.seed === undefined ? undefined : input.seed + 1000 * seq, stopTokenIds: r.info.stop_token_ids, user: input.rolloutId,
        }, { timeoutMs: 300_000 });
      } catch (err) {
        placed.done(!(err instanceof EngineHttpError) || err.status === 400);
        await answered(requestId, null, null, 'failed', { error: (err as Error).message });
        if (err instanceof EngineHttpError && err.status === 400 && /context|too long|length/i.test(err.message)) {
          return { kind: 'prompt_too_long', engineId: engine.id, detail: err.message };
        }
        if (err instanceof EngineHttpError && err.unreachable) {
          // no answer: a timed-out request may still be generating there; a server that went away may come back with other weights
          await adapter.abort([requestId]).catch(() => undefined);
          await weightsDb.markUnknown(engine);
        }
        await pool.query(`insert into engine_events (run_id, engine_id, event, detail) values ($1, $2, 'failed', $3)`, [input.runId, engine.id, JSON.stringify({ error: (err as Error).message, requestId })]);
        tried.push(engine.id);
        if (tried.length >= input.engines.length) throw err; // Temporal retries the activity
        continue;
      }
      placed.done(true);
      genMs += Date.now() - started;
      if (adapter.inPlaceUpdates) {
        // the engine rebuilt its caches under new weights itself and says which version made each id
        if (!res.versions) throw ApplicationFailure.nonRetryable(`engine ${engine.id} (${adapter.kind}) returned no per-token weight_versions; set engines.endpoints[].kind to the server it is (vllm | sglang) so floe stamps versions itself`, 'EngineError');
        // floe never pauses such an engine, so an abort is not an update's: the turn ends with it
        soFar = extendTurn(soFar, res.tokenIds, res.logprobs, res.versions);
        await answered(requestId, res, res.versions[res.versions.length - 1] ?? weights.version, 'answered', null);
        return record(input, engine, r, p, soFar, res.finishReason, genMs);
      }
      const epoch = await weightsDb.epoch(input.runId, engine.id);
      let a = attribute(weights, epoch, res.finishReason);
      if (a.keep && !labelsAgree(a.version, res.servedLabels)) {
        // the server says other weights made these ids: it restarted with its launch weights
        a = { keep: false, reason: 'label_mismatch' };
        await weightsDb.markUnknown(engine);
      }
      if (a.keep) soFar = extendTurn(soFar, res.tokenIds, res.logprobs, a.version);
      const outcome = !a.keep ? 'dropped' : abortedByUpdate(weights.epoch, epoch, res.finishReason) ? 'aborted' : 'answered';
      await answered(requestId, res, a.keep ? a.version : null, outcome, a.keep ? null : { reason: a.reason, labels: res.servedLabels ?? null }, epoch);
      if (outcome === 'answered') return record(input, engine, r, p, soFar, res.finishReason, genMs);
      // aborted by a weight update's pause (or its ids cannot be attributed): send again from the exact prefix
    }

    async function answered(requestId: string, res: GenerateResult | null, version: number | null, outcome: string, detail: unknown, epoch?: number): Promise<void> {
      await pool.query(
        `update engine_requests set answered_at = now(), generated = $2, finish_reason = $3, outcome = $4, version = coalesce($5, version), detail = $6, epoch_answered = $7 where request_id = $1`,
        [requestId, res?.tokenIds.length ?? null, res?.finishReason ?? null, outcome, version, detail === null ? null : JSON.stringify(detail), epoch ?? null]);
    }
  }

  /** Place a request on a healthy engine that serves a known version: engines being updated
   *  are passed over while another serves (and waited for when none does); an engine that
   *  stopped answering is loaded with the run's current weights again first. */
  async function placeServing(input: GenerateTurnInput, tried: string[]): Promise<{ engine: EngineEndpoint; weights: EngineWeights; load: { running: number; waiting: number; inflight: number }; done(ok: boolean): void } | null> {
    const deadline = Date.now() + 8 * 60_000;
    for (;;) {
      const states = await Promise.all(input.engines.map((e) => weightsDb.get(input.runId, e)));
      for (const [i, w] of states.entries()) if (w.state === 'unknown') await resync(input.runId, input.engines[i]);
      const notServing = input.engines.filter((_, i) => !servable(states[i].state)).map((e) => e.id);
      if (notServing.length < input.engines.length) {
        const placed = await router.place(input.router, input.engines, input.rolloutId, [...tried, ...notServing], input.groupId);
        if (!placed) return null;
        const weights = await weightsDb.get(input.runId, placed.engine);
        if (servable(weights.state)) {
          await pool.query(`insert into engine_events (run_id, engine_id, event, version, running, waiting, inflight, detail) values ($1, $2, 'placed', $3, $4, $5, $6, $7)`,
            [input.runId, placed.engine.id, weights.version, placed.load.running, placed.load.waiting, placed.load.inflight, JSON.stringify({ rolloutId: input.rolloutId, turn: input.turnIndex, policy: input.router })]);
          return { ...placed, weights };
        }
        placed.done(true); // an update began between the two reads: place again
      }
      if (Date.now() > deadline) throw new Error(`no engine of run ${input.runId} has served a known weight version for 8 minutes (states: ${states.map((s, i) => `${input.engines[i].id}=${s.state}`).join(', ')}); check the weight update's activities`);
      heartbeat();
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  /** Load the run's current version into an engine that stopped answering and came back
   *  (a restarted vLLM or SGLang serves its launch weights). One worker claims it; the rest wait. */
  async function resync(runId: string, engine: EngineEndpoint): Promise<void> {
    const adapter = await adapterFor(engine);
    try {
      await adapter.health();
    } catch {
      return; // still down: it stays out of rotation until it answers
    }
    const claim = await weightsDb.claimResync(runId, engine.id);
    if (!claim) return;
    try {
      if (claim.path) {
        await adapter.pause();
        await adapter.loadWeights(claim.path, claim.version);
        await adapter.flushCache();
        await adapter.resume();
      } // version 0 with no folder: the launch weights, which a restarted engine serves again
      await weightsDb.serving(runId, engine, claim.version, claim.path);
      await pool.query(`insert into engine_events (run_id, engine_id, event, version, detail) values ($1, $2, 'resynced', $3, $4)`, [runId, engine.id, claim.version, JSON.stringify({ path: claim.path })]);
    } catch (err) {
      await pool.query(`update engine_weights set state = 'unknown' where run_id = $1 and engine_id = $2 and state = 'resyncing'`, [runId, engine.id]);
      await pool.query(`insert into engine_events (run_id, engine_id, event, version, detail) values ($1, $2, 'resync_failed', $3, $4)`, [runId, engine.id, claim.version, JSON.stringify({ error: (err as Error).message })]);
    }
  }

  async function record(input: GenerateTurnInput, engine: EngineEndpoint, r: Renderer, p: { inputIds: number[]; prompt: number[]; drift: RenderDrift | null }, turn: TurnSoFar, finish: FinishReason, genMs: number): Promise<GeneratedTurn> {
    const tokenIds = turn.ids;
    const info = r.info;
    const finishReason = finish;
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
    const logprobs = turn.logprobs;
    const tokenVersions = turn.versions;
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
      [input.rolloutId, input.turnIndex, engine.id, pgSafeText(text), promptTokens, completionTokens, finishReason, versions,
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
