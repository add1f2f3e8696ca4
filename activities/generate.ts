import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { checkRawOutput, DEFAULT_SPECIAL_TOKEN_TEXTS, type FormatVerdict } from '../core/toolFormat.js';
import { SETTINGS_NOT_KEPT, SettingsKeeper, type GenerationSettings } from '../core/generationSettings.js';
import { conversation, toolSchemas, type TurnRecord } from '../core/harness.js';
import { endsTurn, nextPrompt, renderDrift, type RenderDrift, type TurnTokens } from '../core/tokenPath.js';
import { randomUUID } from 'node:crypto';
import { abortedByUpdate, attribute, emptyTurn, labelsAgree, extendTurn, MAX_REQUESTS_PER_TURN, resubmission, servable, spanVersions, switchPoints, type Attribution, type EngineWeights, type TurnSoFar } from '../core/weightVersions.js';
import { adapterFor, answersHealth, EngineHttpError, type EngineEndpoint, type FinishReason, type GenerateResult } from './engines/index.js';
import { answerEngineRequest, claimEngineResync, getEngineEpoch, getEngineWeights, insertEngineEvent, insertEngineRequest, markEngineUnknown, releaseEngineResync, setEngineServing, type RequestOutcome } from '../store/engines.js';
import { listTurnHistory, upsertTurnTokens } from '../store/rollouts.js';
import { getProblemStatement } from '../store/tasks.js';
import { LiveRouter } from './router.js';
import type { Renderer, Renderers } from './renderer.js';

/** Generation of one agent turn, token in / token out: the prompt is the rollout's ids so
 *  far (from turn_tokens) plus the renderer's ids for the last tool result and the next
 *  assistant header; the engine gets ids and returns ids; the raw ids are checked against
 *  the format before any parser; the turn's ids, logprobs and weight versions are recorded
 *  (turn_tokens). The workflow receives the verdict, the counts and the text (a view of the
 *  ids for people), and writes the turn's row once its tool has answered (recordTurn).
 *  The raw verdict is computed for every turn, whatever the recipe's layers: with
 *  recipe.rawFormatCheck off the workflow runs what the Hermes parser finds in the text
 *  (core/hermesParser.ts), and the turn's row still says whether the raw check accepted it
 *  (turns.format_ok / format_reason), so raw-format validity can be plotted for every layer. */

/** One turn: which rollout and turn (these vary), and the rollout's generation settings
 *  (core/generationSettings.ts: engines, router, render, system prompt, sampling, timeout;
 *  frozenVersion for a frozen-weight evaluation, whose ids of any other version are dropped,
 *  never scored, the engine loaded again with the weights floe recorded for it and the request
 *  sent again from the same prefix). */
export interface TurnIds {
  runId: string;
  rolloutId: string;
  turnIndex: number;
  taskId: string;
  /** The rollout's group: requests of one group share a prompt prefix (sticky placement). */
  groupId?: string;
  seed?: number;
}
type Turn = TurnIds & GenerationSettings;

/** The activity's input: the turn's ids and the settings by reference (`settingsRef`), with the
 *  settings themselves only when the workflow sends them (a rollout's first turn, or after this
 *  worker answered SettingsNotKept). A turn scheduled by a floe from before references carries
 *  the settings inline and no reference; it is served as it is. */
export type GenerateTurnInput = (TurnIds & { settingsRef: string; settings?: GenerationSettings }) | Turn;

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
      /** The generated text, decoded from the ids by the model's own tokenizer. */
      rawText: string;
    }
  | { kind: 'prompt_too_long'; engineId: string; detail: string };

const MAX_TEXT_IN_HISTORY = 8192;

function heartbeat(): void {
  try { Context.current().heartbeat(); } catch { /* called outside an activity (tests) */ }
}

export function createGenerateActivities(pool: pg.Pool, router: LiveRouter, renderers: Renderers, keeper = new SettingsKeeper()) {
  router.onUnreachable = async (e) => { await markEngineUnknown(pool, e); };
  async function history(input: Turn): Promise<{ messages: ReturnType<typeof conversation>; earlier: TurnTokens[] }> {
    const problem = await getProblemStatement(pool, input.taskId);
    if (problem === null) throw ApplicationFailure.nonRetryable(`task ${input.taskId} is not in the tasks table; load the pool first`, 'UnknownTask');
    const turns = await listTurnHistory(pool, input.rolloutId, input.turnIndex);
    if (turns.length !== input.turnIndex) throw new Error(`rollout ${input.rolloutId}: expected ${input.turnIndex} earlier turns in Postgres, found ${turns.length}`);
    if (turns.some((t) => t.inputIds === null)) throw ApplicationFailure.nonRetryable(`rollout ${input.rolloutId} has turns without their ids (rows from before migration 003); it cannot be continued`, 'RolloutWithoutIds');
    const records: TurnRecord[] = turns.map((t) => ({ rawText: t.rawText, observation: t.observation }));
    return {
      messages: conversation(input.systemPrompt, problem, records),
      earlier: turns.map((t) => ({ inputIds: t.inputIds!, completionIds: t.completionIds, logprobs: t.logprobs, versions: t.tokenVersions })),
    };
  }

  /** The ids this turn adds, the whole prompt, and any drift of the template from it. */
  async function prompt(r: Renderer, input: Turn): Promise<{ inputIds: number[]; prompt: number[]; drift: RenderDrift | null }> {
    const { messages, earlier } = await history(input);
    const tools = toolSchemas();
    if (earlier.length === 0) {
      const ids = (await r.start(messages, tools)).ids;
      return { inputIds: ids, prompt: ids, drift: null };
    }
    const last = earlier[earlier.length - 1];
    const continuation = (await r.continuation(messages, tools)).ids;
    // A turn that did not end with an end-of-turn token (cut off at the token limit) goes on only
    // when a recipe layer is off (the raw check rejects it, and the gate ends the rollout): the
    // chat template closes an assistant message with EOS, so the next turn's input starts with
    // it, as prompt (unmasked) ids the model did not write.
    const inputIds = endsTurn(last.completionIds, r.info.stop_token_ids) ? continuation : [r.info.eos_token_id, ...continuation];
    const ids = nextPrompt(earlier, inputIds);
    return { inputIds, prompt: ids, drift: renderDrift(ids, (await r.full(messages, tools)).ids) };
  }

  return {
    async generateTurn(input: GenerateTurnInput): Promise<GeneratedTurn> {
      const turn = resolve(input);
      const beat = setInterval(heartbeat, 5000);
      try {
        return await generate(turn);
      } finally {
        clearInterval(beat);
      }
    },
  };

  /** The turn with its settings: as sent (kept for the next turns), or kept from an earlier turn. */
  function resolve(input: GenerateTurnInput): Turn {
    if (!('settingsRef' in input)) return input;
    const { settingsRef, settings, ...ids } = input;
    let g: GenerationSettings | null;
    try {
      g = settings ? keeper.keep(settingsRef, settings) : keeper.get(settingsRef);
    } catch (err) {
      throw ApplicationFailure.nonRetryable((err as Error).message, 'SettingsRefMismatch');
    }
    if (!g) throw ApplicationFailure.nonRetryable(`this worker holds no generation settings ${settingsRef} (it started after the rollout sent them, or another worker took that turn): the workflow sends them again`, SETTINGS_NOT_KEPT);
    return { ...ids, ...g };
  }

  async function generate(input: Turn): Promise<GeneratedTurn> {
    const r = await renderers.get(input.render);
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
      await insertEngineRequest(pool, {
        requestId, runId: input.runId, rolloutId: input.rolloutId, turnIndex: input.turnIndex, seq, engineId: engine.id, kind: adapter.kind,
        version: weights.version, epochSent: weights.epoch, prefixTokens: next.promptIds.length, keptBefore: soFar.ids.length,
      });
      const started = Date.now();
      let res: GenerateResult;
      try {
        res = await adapter.generate({
          requestId, promptIds: next.promptIds, maxTokens: next.maxTokens, temperature: input.sampling.temperature, topP: input.sampling.topP,
          seed: input.seed === undefined ? undefined : input.seed + 1000 * seq, stopTokenIds: r.info.stop_token_ids, user: input.rolloutId,
        }, { timeoutMs: input.generateTimeoutSeconds * 1000 });
      } catch (err) {
        const slow = err instanceof EngineHttpError && err.timedOut && await answersHealth(adapter);
        placed.done(!(err instanceof EngineHttpError) || err.status === 400 || slow);
        await answered(requestId, null, null, 'failed', { error: (err as Error).message, ...(slow ? { slow: true } : {}) });
        if (err instanceof EngineHttpError && err.promptTooLong) {
          // floe's cap (core/requestFit.ts) or the server's own 400: the same ending on every engine
          return { kind: 'prompt_too_long', engineId: engine.id, detail: err.message };
        }
        if (err instanceof EngineHttpError && err.unreachable) {
          // a timed-out request may still be generating there: abort it either way
          await adapter.abort([requestId]).catch(() => undefined);
          // A timeout on a server that answers its health route is a slow request, not a dead
          // engine: resyncing it would pause it, abort every request in flight and reload the
          // weights it already serves. Only a server that does not answer (it went away and may
          // come back with its launch weights) is marked for a resync.
          if (!slow) await markEngineUnknown(pool, engine);
        }
        await insertEngineEvent(pool, { runId: input.runId, engineId: engine.id, event: 'failed', detail: { error: (err as Error).message, requestId } });
        tried.push(engine.id);
        if (tried.length >= input.engines.length) throw err; // Temporal retries the activity
        continue;
      }
      placed.done(true);
      genMs += Date.now() - started;
      // An engine sends at most the max_tokens it was asked for. The ids a server that ignores
      // the limit sends past it belong to no request: the turn keeps what was asked for and ends
      // there, at its length limit (the raw check says 'truncated'), so no turn larger than the
      // run's limit reaches Postgres or a workflow history (payloads fail at 2 MB).
      const over = res.tokenIds.length > next.maxTokens ? { overLimit: { generated: res.tokenIds.length, maxTokens: next.maxTokens } } : null;
      if (over) res = withinLimit(res, next.maxTokens);
      // An id outside the tokenizer's vocabulary is no output of the policy: the engine serves
      // another model (or tokenizer). Kept, it would be the next prompt's and the trainer's.
      const foreign = res.tokenIds.find((t) => !Number.isInteger(t) || t < 0 || t >= r.info.vocab_size);
      if (foreign !== undefined) {
        const why = `engine ${engine.id} returned token id ${foreign}, outside the vocabulary of the policy's tokenizer ${r.info.name} [0, ${r.info.vocab_size})`;
        await answered(requestId, res, null, 'failed', { error: why });
        throw ApplicationFailure.nonRetryable(`${why}: it serves a model with another tokenizer; point engines.endpoints at servers of the run's policy, or set policy.tokenizer to theirs`, 'EngineError');
      }
      if (adapter.inPlaceUpdates) {
        // the engine rebuilt its caches under new weights itself and says which version made each id
        if (!res.versions) throw ApplicationFailure.nonRetryable(`engine ${engine.id} (${adapter.kind}) returned no per-token weight_versions; set engines.endpoints[].kind to the server it is (vllm | sglang) so floe stamps versions itself`, 'EngineError');
        if (!frozen(res.versions)) {
          // weights other than the evaluation's landed on this engine: not this policy's ids
          await answered(requestId, res, null, 'dropped', { reason: 'not_frozen', frozenVersion: input.frozenVersion, versions: [...new Set(res.versions)] });
          await markEngineUnknown(pool, engine); // the next placement loads the recorded weights again
          continue;
        }
        // floe never pauses such an engine, so an abort is not an update's: the turn ends with it
        soFar = extendTurn(soFar, res.tokenIds, res.logprobs, res.versions);
        if (input.frozenVersion !== undefined && res.finishReason === 'abort' && (await getEngineEpoch(pool, input.runId, engine.id)) > weights.epoch) {
          // except the pause of a resync loading the frozen weights back: its ids are the frozen
          // version's, and the turn goes on from that exact prefix
          await answered(requestId, res, input.frozenVersion, 'aborted', { reason: 'resync' });
          continue;
        }
        await answered(requestId, res, res.versions[res.versions.length - 1] ?? weights.version, 'answered', over);
        return record(input, engine, r, p, soFar, res.finishReason, genMs);
      }
      const epoch = await getEngineEpoch(pool, input.runId, engine.id);
      // Which weights made each id. A server that reports weight-version spans says so exactly,
      // whatever happened meanwhile (with engines.updateMode 'keep' a request runs through an
      // update and its ids hold two versions); without them floe attributes the ids by its own
      // update epochs (core/weightVersions.ts attribute).
      let a: Attribution;
      let stamps: number[] | null = null;
      if (res.servedSpans) {
        stamps = spanVersions(res.servedSpans, res.tokenIds.length, weights.version);
        // spans naming weights floe did not load (a restarted server's launch label) are no version of the run's
        a = stamps ? { keep: true, version: stamps[stamps.length - 1] ?? weights.version } : { keep: false, reason: 'label_mismatch' };
      } else {
        a = attribute(weights, epoch, res.finishReason);
        if (a.keep && !labelsAgree(a.version, res.servedLabels)) a = { keep: false, reason: 'label_mismatch' };
      }
      // the server says other weights made these ids: it restarted with its launch weights
      if (!a.keep && a.reason === 'label_mismatch') await markEngineUnknown(pool, engine);
      if (a.keep && !frozen(stamps ?? [a.version])) {
        // an update landed on this engine during a frozen-weight evaluation
        a = { keep: false, reason: 'not_frozen' };
        await markEngineUnknown(pool, engine);
      }
      if (a.keep) soFar = extendTurn(soFar, res.tokenIds, res.logprobs, stamps ?? a.version);
      const outcome: RequestOutcome = !a.keep ? 'dropped' : abortedByUpdate(weights.epoch, epoch, res.finishReason) ? 'aborted' : 'answered';
      // a request kept through an update records where its ids switch version
      const switched = stamps && switchPoints(stamps).length ? { switchAt: switchPoints(stamps), versions: [...new Set(stamps)] } : null;
      await answered(requestId, res, a.keep ? a.version : null, outcome, a.keep ? (over || switched ? { ...over, ...switched } : null) : { reason: a.reason, labels: res.servedLabels ?? null }, epoch);
      if (outcome === 'answered') return record(input, engine, r, p, soFar, res.finishReason, genMs);
      // aborted by a weight update's pause (or its ids cannot be attributed): send again from the exact prefix
    }

    function frozen(versions: readonly number[]): boolean {
      return input.frozenVersion === undefined || versions.every((v) => v === input.frozenVersion);
    }

    async function answered(requestId: string, res: GenerateResult | null, version: number | null, outcome: RequestOutcome, detail: unknown, epoch?: number): Promise<void> {
      await answerEngineRequest(pool, requestId, { generated: res?.tokenIds.length ?? null, finishReason: res?.finishReason ?? null, outcome, version, detail, epochAnswered: epoch ?? null });
    }
  }

  /** Place a request on a healthy engine that serves a known version: engines being updated
   *  are passed over while another serves (and waited for when none does); an engine that
   *  stopped answering is loaded with the run's current weights again first. */
  async function placeServing(input: Turn, tried: string[]): Promise<{ engine: EngineEndpoint; weights: EngineWeights; load: { running: number; waiting: number; inflight: number }; done(ok: boolean): void } | null> {
    const deadline = Date.now() + 8 * 60_000;
    for (;;) {
      const states = await Promise.all(input.engines.map((e) => getEngineWeights(pool, input.runId, e)));
      for (const [i, w] of states.entries()) if (w.state === 'unknown') await resync(input.runId, input.engines[i]);
      const notServing = input.engines.filter((_, i) => !servable(states[i].state)).map((e) => e.id);
      if (notServing.length < input.engines.length) {
        const placed = await router.place(input.router, input.engines, input.rolloutId, [...tried, ...notServing], input.groupId);
        if (!placed) return null;
        const weights = await getEngineWeights(pool, input.runId, placed.engine);
        if (servable(weights.state)) {
          await insertEngineEvent(pool, {
            runId: input.runId, engineId: placed.engine.id, event: 'placed', version: weights.version, running: placed.load.running, waiting: placed.load.waiting,
            inflight: placed.load.inflight, detail: { rolloutId: input.rolloutId, turn: input.turnIndex, policy: input.router },
          });
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
    const claim = await claimEngineResync(pool, runId, engine.id);
    if (!claim) return;
    try {
      if (claim.path) {
        await adapter.pause();
        await adapter.loadWeights(claim.path, claim.version);
        await adapter.flushCache();
        await adapter.resume();
      } // version 0 with no folder: the launch weights, which a restarted engine serves again
      await setEngineServing(pool, runId, engine, claim.version, claim.path);
      await insertEngineEvent(pool, { runId, engineId: engine.id, event: 'resynced', version: claim.version, detail: { path: claim.path } });
    } catch (err) {
      await releaseEngineResync(pool, runId, engine.id);
      await insertEngineEvent(pool, { runId, engineId: engine.id, event: 'resync_failed', version: claim.version, detail: { error: (err as Error).message } });
    }
  }

  async function record(input: Turn, engine: EngineEndpoint, r: Renderer, p: { inputIds: number[]; prompt: number[]; drift: RenderDrift | null }, turn: TurnSoFar, finish: FinishReason, genMs: number): Promise<GeneratedTurn> {
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
    // The ids now (the next turn is built from them, and they stay out of workflow histories);
    // the turns row once the tool has answered (the workflow's recordTurn, from what this returns).
    await upsertTurnTokens(pool, {
      rolloutId: input.rolloutId, turnIndex: input.turnIndex, inputIds: p.inputIds, promptLen: promptTokens, completionIds: tokenIds,
      logprobs, tokenVersions, renderDrift: p.drift,
    });
    const verdictForHistory: FormatVerdict = verdict.ok ? verdict : { ...verdict, detail: verdict.detail.slice(0, MAX_TEXT_IN_HISTORY) };
    return { kind: 'generated', engineId: engine.id, verdict: verdictForHistory, finishReason, promptTokens, completionTokens, versions, genMs, drift: p.drift, rawText: text };
  }
}

/** An answer cut to the `max` ids its request asked for: the turn ends at its length limit. */
function withinLimit(res: GenerateResult, max: number): GenerateResult {
  return { ...res, tokenIds: res.tokenIds.slice(0, max), logprobs: res.logprobs.slice(0, max), versions: res.versions?.slice(0, max) ?? null, finishReason: 'length' };
}

export type GenerateActivities = ReturnType<typeof createGenerateActivities>;
