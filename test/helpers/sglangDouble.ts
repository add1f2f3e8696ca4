import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';

/** TEST DOUBLE of an SGLang server, release v0.5.23 of sgl-project/sglang (the release floe's
 *  adapter, activities/engines/sglang.ts, is written against; read from the published
 *  sglang==0.5.23 distribution, whose sglang/_version.py records no commit id: the tag v0.5.23
 *  is the pin). It answers the native routes floe uses as that source defines them, and
 *  generates with a real backend: a floe reference engine (engine/floe_engine/inference_server.py)
 *  through its /v1/completions. Lives in test/ only. Sources, by the tag each comment cites:
 *    [http]     python/sglang/srt/entrypoints/http_server.py: routes, status codes, bodies
 *    [contract] python/sglang/srt/entrypoints/api_contract.py + python/sglang/api/v1/api_types.py:
 *               the /generate JSON contract (sampling_params: unknown keys refused)
 *    [io]       python/sglang/srt/managers/io_struct.py: request structs and their defaults
 *    [tm]       python/sglang/srt/managers/tokenizer_manager.py: normalisation, the pause gate,
 *               the model-update lock, input-length checks, abort, the response dict
 *    [sp]       python/sglang/srt/sampling/sampling_params.py: SamplingParams.verify
 *    [sched]    python/sglang/srt/managers/scheduler.py and schedule_batch.py: abort by rid
 *               prefix, finish reasons, output_ids_through_stop (the stop id is kept)
 *    [flush]    python/sglang/srt/managers/scheduler_components/flush_wrapper.py
 *    [wu]       python/sglang/srt/managers/scheduler_components/weight_updater.py
 *    [wv]       python/sglang/srt/utils/weight_versions.py: meta_info.weight_versions spans
 *    [transfer] python/sglang/srt/entrypoints/http_server.py + managers/io_struct.py: the distributed weight-update routes
 *    [metrics]  python/sglang/srt/observability/metrics_collector.py, utils/common.py; the refresh cadence:
 *               python/sglang/srt/managers/scheduler_components/metrics_reporter.py, arg_groups/fields/observability.py (decode_log_interval = 40)
 *               add_prometheus_middleware (/metrics is mounted only with --enable-metrics)
 *    [sampler]  python/sglang/srt/layers/sampler.py: the log-prob of a sampled id is
 *               log_softmax(logits / T) unless SGLANG_RETURN_ORIGINAL_LOGPROB=1 (or the batch is
 *               all greedy, T = 0); python/sglang/srt/environ.py: the variable defaults to off.
 *               input_token_logprobs (prefill, logprob_start_len >= 0) come from
 *               python/sglang/srt/layers/logits_processor.py, with no temperature
 *    [auth]     python/sglang/srt/utils/auth.py: with --api-key every route but /health*,
 *               /ready*, /metrics* needs `Authorization: Bearer <key>` (401 {"error": "Unauthorized"})
 *  Not reproduced (501 or 400 naming the double): streaming, batches (a list of prompts or
 *  of sampling_params), n > 1, the OpenAI-compatible routes (/v1/completions, /v1/chat/...:
 *  SGLang has them, floe does not use them), LoRA, multimodal input. `text` is the backend's
 *  decoding (its byte tokenizer), not SGLang's detokenizer. With `tokensPerSecond`, a request's
 *  ids are released at that rate (the backend generates them at once): an abort answers the ids
 *  released so far, as a server at that speed would. */

export const SGLANG_DOUBLE_VERSION = '0.5.23';

export interface SglangDoubleOptions {
  /** Base URL of a reference engine (engine/floe_engine/inference_server.py). */
  backend: string;
  /** The folder the server was "launched" with (--model-path): restart() loads it into the backend again. */
  launchCheckpoint?: string;
  /** --enable-metrics (default true): without it /metrics is not mounted and answers 404. */
  metrics?: boolean;
  port?: number;
  /** Release generated ids at this rate (ids per second per request); unset: as fast as the backend. */
  tokensPerSecond?: number;
  /** --weight-version (default "default"). */
  weightVersion?: string;
  /** --enable-deterministic-inference (default false): only then is sampling_seed used
   *  (sampling_batch_info.py); the double passes it to the backend as `seed`. */
  deterministicInference?: boolean;
  /** SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION (default true): /health runs a one-token generation. */
  healthGeneration?: boolean;
  /** SGLANG_HEALTH_CHECK_TIMEOUT in ms (default 20 s). */
  healthCheckTimeoutMs?: number;
  /** SGLANG_RETURN_ORIGINAL_LOGPROB=1 (default false, as the server's): the log-probs of sampled
   *  ids are the model's own; otherwise [sampler] they are log_softmax(logits / T). */
  returnOriginalLogprob?: boolean;
  /** --api-key [auth]. */
  apiKey?: string;
}

export interface RecordedRequest { method: string; route: string; body: unknown }

export interface SglangDouble {
  url: string;
  port: number;
  /** Every request the double received, in order (route: path and query). */
  requests: RecordedRequest[];
  /** A server restart: open connections are dropped, nothing listens for `downMs` (connections
   *  are refused), the backend is reset to the launch weights (a restarted SGLang serves its
   *  --model-path again, as --weight-version), then the same port listens again. */
  restart(o?: { downMs?: number }): Promise<void>;
  close(): Promise<void>;
}

class Reply {
  constructor(readonly status: number, readonly body: string, readonly type?: string) {}
}
const json = (status: number, body: unknown) => new Reply(status, JSON.stringify(body), 'application/json');
/** Starlette's answer for a path no route matches, and for a method the route lacks. */
const notFound = () => json(404, { detail: 'Not Found' });
const methodNotAllowed = () => json(405, { detail: 'Method Not Allowed' });
/** [http] the RequestValidationError handler: FastAPI's 422 turned into 400, ErrorResponse shape. */
const validationError = (errors: { type: string; loc: (string | number)[]; msg: string; input?: unknown }[]) => {
  const py = (v: unknown): string => (typeof v === 'string' ? `'${v}'` : v === undefined || v === null ? 'None' : Array.isArray(v) ? `(${v.map(py).join(', ')}${v.length === 1 ? ',' : ''})` : JSON.stringify(v));
  const message = `[${errors.map((e) => `{'type': ${py(e.type)}, 'loc': ${py(e.loc)}, 'msg': ${py(e.msg)}, 'input': ${py(e.input)}}`).join(', ')}]`;
  return json(400, { object: 'error', message, type: 'Bad Request', param: null, code: 400 });
};
/** [http] _create_error_response: a ValueError from the tokenizer manager. */
const valueError = (message: string, status = 400) => json(status, { error: { message } });
/** [http] generate_request: a body the JSON contract refuses. */
const contractError = (message: string) => json(400, { error: message });
const missingBody = () => validationError([{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);

/** [contract] _FIELDS_SamplingParams, in the schema's order. */
const SAMPLING_FIELDS = ['max_new_tokens', 'stop', 'stop_token_ids', 'stop_regex', 'temperature', 'top_p', 'top_k', 'min_p', 'frequency_penalty', 'presence_penalty', 'repetition_penalty', 'min_new_tokens', 'n', 'json_schema', 'regex', 'ebnf', 'structural_tag', 'ignore_eos', 'skip_special_tokens', 'spaces_between_special_tokens', 'no_stop_trim', 'stream_interval', 'logit_bias', 'sampling_seed', 'custom_params', 'beam_width', 'watermark', 'choice'];
/** serde's "unknown field" text ([contract] _unknown_field). */
const unknownField = (key: string, fields: string[]) => `unknown field \`${key}\`, expected one of ${fields.map((f) => `\`${f}\``).join(', ')}`;
/** serde's Unexpected display ([contract] _unexpected). */
const unexpected = (v: unknown) => (v === null ? 'null' : typeof v === 'boolean' ? `boolean \`${v}\`` : typeof v === 'number' ? (Number.isInteger(v) ? `integer \`${v}\`` : `floating point \`${v}\``) : typeof v === 'string' ? `string "${v}"` : Array.isArray(v) ? 'sequence' : 'map');

interface Sampling { maxNewTokens: number | null; temperature: number; topP: number; stopTokenIds: number[]; stop: string[]; ignoreEos: boolean; seed: number | null }

/** [contract] decode_SamplingParams, for the keys floe can send; the rest are accepted and ignored. */
function decodeSampling(v: unknown): Sampling | string {
  if (v === undefined || v === null) v = {};
  if (typeof v !== 'object' || Array.isArray(v)) return Array.isArray(v) ? 'batch' : `invalid type: ${unexpected(v)}, expected struct SamplingParams`;
  const m = v as Record<string, unknown>;
  for (const k of Object.keys(m)) if (!SAMPLING_FIELDS.includes(k)) return unknownField(k, SAMPLING_FIELDS);
  const int = (x: unknown) => typeof x === 'number' && Number.isInteger(x);
  const num = (x: unknown) => typeof x === 'number' && Number.isFinite(x);
  if (m.max_new_tokens != null && !int(m.max_new_tokens)) return `invalid type: ${unexpected(m.max_new_tokens)}, expected i64`;
  for (const k of ['temperature', 'top_p'] as const) if (m[k] != null && !num(m[k])) return `invalid type: ${unexpected(m[k])}, expected f64`;
  if (m.stop_token_ids != null && (!Array.isArray(m.stop_token_ids) || !m.stop_token_ids.every(int))) return `invalid type: ${unexpected(m.stop_token_ids)}, expected a sequence of i64`;
  if (m.sampling_seed != null && !int(m.sampling_seed)) return `invalid type: ${unexpected(m.sampling_seed)}, expected i64`;
  for (const k of ['ignore_eos', 'skip_special_tokens', 'no_stop_trim'] as const) if (m[k] != null && typeof m[k] !== 'boolean') return `invalid type: ${unexpected(m[k])}, expected a boolean`;
  if (m.n != null && m.n !== 1) return 'n';
  const stop = m.stop == null ? [] : typeof m.stop === 'string' ? [m.stop] : m.stop;
  if (!Array.isArray(stop) || !stop.every((s) => typeof s === 'string')) return `invalid type: ${unexpected(m.stop)}, expected a value or an array of values for StringOrList`;
  return {
    // [sp] SamplingParams.__init__ default max_new_tokens=128; the tokenizer manager's total-length
    // check reads the request's own value only
    maxNewTokens: m.max_new_tokens == null ? null : (m.max_new_tokens as number),
    temperature: m.temperature == null ? 1 : (m.temperature as number),
    topP: m.top_p == null ? 1 : (m.top_p as number),
    stopTokenIds: (m.stop_token_ids as number[] | null) ?? [],
    stop: stop as string[],
    ignoreEos: m.ignore_eos === true,
    seed: m.sampling_seed == null ? null : (m.sampling_seed as number),
  };
}

/** [sp] SamplingParams.verify, the checks that apply to what the double accepts. */
function verifySampling(s: Sampling): string | null {
  if (!Number.isFinite(s.temperature) || s.temperature < 0) return `temperature must be a non-negative finite number, got ${s.temperature}.`;
  if (!(s.topP > 0 && s.topP <= 1)) return `top_p must be in (0, 1], got ${s.topP}.`;
  if (s.maxNewTokens !== null && s.maxNewTokens < 0) return `max_new_tokens must be at least 0, got ${s.maxNewTokens}.`;
  return null;
}

interface Flight {
  rid: string;
  /** backend: the backend is generating; release: paced release of ids the backend made. */
  phase: 'backend' | 'release';
  started: number;
  abortedAt: number | null;
  wake: (() => void) | null;
  /** When a pause in mode retract took it back to the waiting queue (null: running), and the loads counted then. */
  retractedAt: number | null;
  retractedLoads: number;
  /** [sched] Req.retraction_count: meta_info.num_retractions. */
  retractions: number;
}

interface BackendChoice { text: string; token_ids: number[]; finish_reason: 'stop' | 'length' | 'abort'; stop_reason: number | string | null; logprobs: { token_logprobs: number[] }; weight_versions?: number[] }

/** --decode-log-interval's default (sglang/srt/arg_groups/fields/observability.py): decode steps between gauge refreshes. */
const DECODE_LOG_INTERVAL = 40;

export async function startSglangDouble(opts: SglangDoubleOptions): Promise<SglangDouble> {
  const backend = opts.backend.replace(/\/$/, '');
  const rate = opts.tokensPerSecond;
  const metricsOn = opts.metrics ?? true;
  const launchVersion = opts.weightVersion ?? 'default';
  const healthTimeout = opts.healthCheckTimeoutMs ?? 20_000;
  const requests: RecordedRequest[] = [];

  async function bcall(route: string, body?: unknown): Promise<{ status: number; json: unknown; text: string }> {
    const res = await fetch(`${backend}${route}`, {
      method: body === undefined ? 'GET' : 'POST',
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: body === undefined ? undefined : { 'content-type': 'application/json' },
    });
    const text = await res.text();
    let j: unknown = null;
    try { j = text.trim() ? JSON.parse(text) : null; } catch { /* text */ }
    return { status: res.status, json: j, text };
  }
  const backendMessage = (b: { json: unknown; text: string }) => (b.json as { error?: { message?: string } } | null)?.error?.message ?? b.text.slice(0, 500);

  const info0 = (await bcall('/health')).json as { max_model_len: number; model: string; version: number };
  const info = { context: info0.max_model_len, model: info0.model };
  const vocab = (info0 as { vocab_size?: number }).vocab_size ?? 0;

  // ---- server state (what a restart resets)
  let paused = false;
  /** The mode of the pause in force: under retract nothing is running (scheduler.py pause_generation
   *  moves the running batch to the waiting queue), and a flush ignores the waiting queue while
   *  paused (flush_cache: is_fully_idle(ignore_waiting=_engine_paused)). */
  let pauseMode: 'abort' | 'retract' | 'in_place' = 'abort';
  /** Weight loads so far: a request retracted through one samples its remaining ids under the new weights. */
  let loads = 0;
  /** [metrics] the gauges as last published: at each prefill (a request admitted), on going idle,
   *  and by /metrics itself once DECODE_LOG_INTERVAL decode steps have passed at the paced rate. */
  let gauges = { running: 0, waiting: 0, at: 0 };
  const publish = () => { gauges = { running: flights.size, waiting: pendingRids.size, at: Date.now() }; };
  /** [transfer] the weight-update group's name once initialised, and an open begin … end session. */
  let transferGroup: string | null = null;
  let inWeightUpdate = false;
  let resumeWaiters: (() => void)[] = [];
  const flights = new Map<string, Flight>();
  /** rids of requests received and not yet scheduled (held by a pause, say): [tm] rid_to_state */
  const pendingRids = new Set<string>();
  let idleWaiters: (() => void)[] = [];
  /** [tm] model_update_lock: a load when not paused takes the writer side, after every request in flight. */
  let writer: Promise<void> | null = null;
  let weightVersion = launchVersion;
  /** backend version number -> the weight_version string it was loaded as */
  let versionNames = new Map<number, string>([[info0.version, launchVersion]]);
  let modelPath = opts.launchCheckpoint ?? info.model;
  let lastReceive = 0;
  let flushPending = false;
  /** Bumped when the "process" dies (restart, close): work of an earlier life stops at its next step. */
  let epoch = 0;

  const waitUnpaused = async () => { while (paused) await new Promise<void>((r) => resumeWaiters.push(r)); };
  const idle = async () => { while (flights.size > 0) await new Promise<void>((r) => idleWaiters.push(r)); };
  const settle = (f: Flight) => {
    flights.delete(f.rid);
    if (flights.size === 0) publish(); // going idle
    if (flights.size === 0) { const w = idleWaiters; idleWaiters = []; w.forEach((r) => r()); }
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
  /** Sleep until `t` or until the flight is aborted. */
  const flightSleep = (f: Flight, t: number) => new Promise<void>((r) => {
    if (f.abortedAt !== null || f.retractedAt !== null) return r();
    const timer = setTimeout(() => { f.wake = null; r(); }, Math.max(0, t - Date.now()));
    f.wake = () => { clearTimeout(timer); f.wake = null; r(); };
  });

  /** Abort flights (all, or those whose rid starts with `prefix`: [sched] abort_request). */
  function abortFlights(prefix?: string): void {
    const hit = [...flights.values()].filter((f) => prefix === undefined || f.rid.startsWith(prefix));
    for (const f of hit) {
      if (f.abortedAt === null) f.abortedAt = Date.now();
      f.wake?.();
    }
    const inBackend = hit.filter((f) => f.phase === 'backend').map((f) => f.rid);
    if (inBackend.length) void bcall('/abort_requests', { request_ids: inBackend }).catch(() => undefined);
  }

  /** Weight-version spans over the generated ids ([wv] compute_weight_version_spans). */
  function spans(versions: number[] | undefined, n: number) {
    const name = (v: number) => versionNames.get(v) ?? String(v);
    const out: { version: string; start: number; end: number }[] = [];
    if (!versions || versions.length !== n || n === 0) return [{ version: weightVersion, start: 0, end: n }];
    versions.forEach((v, i) => {
      const last = out[out.length - 1];
      if (last && last.version === name(v)) last.end = i + 1;
      else out.push({ version: name(v), start: i, end: i + 1 });
    });
    return out;
  }

  // ---------------------------------------------------------------- /generate

  /** [http] generate_request → [tm] generate_request → the scheduler (here: the backend). */
  async function generate(raw: unknown): Promise<Reply> {
    if (raw === undefined) return missingBody();
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return validationError([{ type: 'dataclass_type', loc: ['body'], msg: 'Input should be a dictionary or an instance of GenerateReqInput', input: raw }]);
    const b = raw as Record<string, unknown>;
    const idsOk = (x: unknown): x is number[] => Array.isArray(x) && x.every((t) => typeof t === 'number' && Number.isInteger(t));
    if (b.input_ids != null && !idsOk(b.input_ids) && !(Array.isArray(b.input_ids) && b.input_ids.every(idsOk))) {
      return validationError([{ type: 'value_error', loc: ['body', 'input_ids'], msg: 'Value error, input_ids must be a list of int64 or a list of lists of int64', input: b.input_ids }]);
    }
    // [contract] the schema's checks
    if (b.rid != null && typeof b.rid !== 'string' && !Array.isArray(b.rid)) return contractError(`invalid type: ${unexpected(b.rid)}, expected a value or an array of values for StringOrList`);
    for (const k of ['stream', 'return_text_in_logprobs'] as const) if (b[k] != null && typeof b[k] !== 'boolean') return contractError(`invalid type: ${unexpected(b[k])}, expected a boolean`);
    if (b.return_logprob != null && typeof b.return_logprob !== 'boolean') return Array.isArray(b.return_logprob) ? valueError('the SGLang double answers one prompt per request') : contractError(`invalid type: ${unexpected(b.return_logprob)}, expected a value or an array of values for BoolOrList`);
    if (b.logprob_start_len != null && !(typeof b.logprob_start_len === 'number' && Number.isInteger(b.logprob_start_len))) return Array.isArray(b.logprob_start_len) ? valueError('the SGLang double answers one prompt per request') : contractError(`invalid type: ${unexpected(b.logprob_start_len)}, expected a value or an array of values for Int64OrList`);
    const sp = decodeSampling(b.sampling_params);
    if (sp === 'batch' || Array.isArray(b.rid) || (Array.isArray(b.input_ids) && Array.isArray(b.input_ids[0])) || Array.isArray(b.text)) return json(501, { error: { message: 'the SGLang double answers one prompt per request (no batches)' } });
    if (sp === 'n') return json(501, { error: { message: 'the SGLang double does not reproduce parallel sampling (n > 1)' } });
    if (typeof sp === 'string') return contractError(sp);
    if (b.stream === true) return json(501, { error: { message: 'the SGLang double does not reproduce streaming; send stream: false' } });
    // [io] GenerateReqInput._validate_inputs / normalize
    if (b.text == null && b.input_ids == null && b.input_embeds == null) return valueError('Either text, input_ids or input_embeds should be provided.');
    if (b.input_ids != null && (b.input_ids as number[]).length === 0) return valueError('input_ids cannot be empty.');
    const rid = typeof b.rid === 'string' ? b.rid : randomUUID().replace(/-/g, '');
    const returnLogprob = b.return_logprob === true;
    // [tm] _init_req_state
    if (flights.has(rid) || pendingRids.has(rid)) return valueError(`Duplicate request ID detected: ${rid}`);
    pendingRids.add(rid);
    const life = epoch;
    const gone = () => new Reply(503, '');
    try {
      // [tm] generate_request: a paused server holds the request here until continue_generation
      await waitUnpaused();
      // ... then under the model-update lock's reader side
      while (writer) await writer;
      if (life !== epoch) return gone();
      let promptLen: number;
      let prompt: number[];
      if (b.input_ids != null) { prompt = b.input_ids as number[]; promptLen = prompt.length; }
      else if (typeof b.text === 'string') {
        const t = await bcall('/tokenize', { prompt: b.text });
        prompt = (t.json as { tokens: number[] }).tokens;
        promptLen = prompt.length;
        if (life !== epoch) return gone();
      } else return valueError('Either text, input_ids or input_embeds should be provided.');
      // [tm] _validate_one_request
      if (promptLen >= info.context) return valueError(`The input (${promptLen} tokens) is longer than the model's context length (${info.context} tokens).`);
      if (sp.maxNewTokens !== null && sp.maxNewTokens + promptLen > info.context) {
        return valueError(`Requested token count exceeds the model's maximum context length of ${info.context} tokens. You requested a total of ${sp.maxNewTokens + promptLen} tokens: ${promptLen} tokens from the input messages and ${sp.maxNewTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`);
      }
      const bad = verifySampling(sp);
      if (bad) return valueError(bad);
      const f: Flight = { rid, phase: 'backend', started: Date.now(), abortedAt: null, wake: null, retractedAt: null, retractedLoads: 0, retractions: 0 };
      pendingRids.delete(rid);
      flights.set(rid, f);
      publish(); // the prefill batch that admits it
      try {
        // [sched] logprob_start_len -1 (or absent): from the end of the prompt, no input log-probs
        const start = typeof b.logprob_start_len === 'number' && b.logprob_start_len >= 0 ? b.logprob_start_len : null;
        return await runFlight(f, prompt, promptLen, sp, returnLogprob, start);
      } finally {
        settle(f);
      }
    } finally {
      pendingRids.delete(rid);
    }
  }
  /** [sampler] log_softmax(logits / T) at each generated position, from the backend's raw
   *  log-probs of every id there (raw = logits − lse, so raw / T differs from logits / T by a
   *  constant that the renormalisation removes). One scoring call per position, vocab-wide. */
  async function scaledLogprobs(prompt: number[], ids: number[], t: number): Promise<number[]> {
    const out: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const prefix = [...prompt, ...ids.slice(0, i)];
      const samples = Array.from({ length: vocab }, (_, v) => ({ prompt_ids: prefix, completion_ids: [v] }));
      const r = await bcall('/logprobs', { samples });
      if (r.status !== 200) throw new Error(`backend /logprobs: ${backendMessage(r)}`);
      const raw = (r.json as { logprobs: number[][] }).logprobs.map((x) => x[0] / t);
      const m = Math.max(...raw);
      const lse = m + Math.log(raw.reduce((a, x) => a + Math.exp(x - m), 0));
      out.push(raw[ids[i]] - lse);
    }
    return out;
  }

  /** input_token_logprobs from `start` ([logits_processor], no temperature): [lp, id, null] per
   *  prompt position; position 0 has no log-prob (None). */
  async function inputLogprobs(prompt: number[], start: number): Promise<[number | null, number, null][]> {
    const from = Math.max(1, start);
    const out: [number | null, number, null][] = start === 0 ? [[null, prompt[0], null]] : [];
    if (from >= prompt.length) return out;
    const r = await bcall('/logprobs', { samples: [{ prompt_ids: prompt.slice(0, from), completion_ids: prompt.slice(from) }] });
    if (r.status !== 200) throw new Error(`backend /logprobs: ${backendMessage(r)}`);
    const lp = (r.json as { logprobs: number[][] }).logprobs[0];
    for (let j = from; j < prompt.length; j++) out.push([lp[j - from], prompt[j], null]);
    return out;
  }

  async function runFlight(f: Flight, prompt: number[], promptLen: number, sp: Sampling, returnLogprob: boolean, logprobStart: number | null): Promise<Reply> {
    const maxNew = sp.maxNewTokens ?? 128;
    let c: BackendChoice;
    if (maxNew === 0) {
      // prefill only: nothing generated, finished by length
      c = { text: '', token_ids: [], finish_reason: 'length', stop_reason: null, logprobs: { token_logprobs: [] }, weight_versions: [] };
    } else {
      let r: { status: number; json: unknown; text: string };
      try {
        r = await bcall('/v1/completions', {
          prompt, max_tokens: maxNew, temperature: sp.temperature, top_p: sp.topP,
          stop_token_ids: sp.stopTokenIds, stop: sp.stop, ignore_eos: sp.ignoreEos,
          ...(opts.deterministicInference && sp.seed !== null ? { seed: sp.seed } : {}),
          logprobs: 1, return_token_ids: true, request_id: f.rid,
        });
      } catch (e) {
        return valueError(`backend unreachable: ${(e as Error).message}`, 500);
      }
      lastReceive = Date.now();
      if (r.status !== 200) return valueError(backendMessage(r), r.status === 400 ? 400 : 500);
      c = (r.json as { choices: BackendChoice[] }).choices[0];
      while (rate) {
        f.phase = 'release';
        await flightSleep(f, f.started + (c.token_ids.length / rate) * 1000);
        if (f.abortedAt !== null || f.retractedAt === null) break;
        // [sched] retracted by a pause in mode retract: back in the waiting queue with its ids,
        // its K/V freed; after continue_generation it is prefilled again (prompt + ids so far) and
        // samples the rest under the weights loaded meanwhile
        const released = Math.floor(((f.retractedAt - f.started) / 1000) * rate);
        const at = f.retractedAt;
        await waitUnpaused();
        f.retractedAt = null;
        if (f.abortedAt !== null || loads === f.retractedLoads || released >= c.token_ids.length) { f.started += Date.now() - at; continue; }
        const more = await bcall('/v1/completions', {
          prompt: [...prompt, ...c.token_ids.slice(0, released)], max_tokens: maxNew - released, temperature: sp.temperature, top_p: sp.topP,
          stop_token_ids: sp.stopTokenIds, stop: sp.stop, ignore_eos: sp.ignoreEos,
          ...(opts.deterministicInference && sp.seed !== null ? { seed: sp.seed + released } : {}),
          logprobs: 1, return_token_ids: true, request_id: f.rid,
        }).catch((e: Error) => ({ status: 0, json: null, text: e.message }));
        if (more.status !== 200) return valueError(backendMessage(more), 500);
        const m = (more.json as { choices: BackendChoice[] }).choices[0];
        const keptVersions = (c.weight_versions ?? []).slice(0, released);
        c = {
          ...m, text: '', token_ids: [...c.token_ids.slice(0, released), ...m.token_ids],
          logprobs: { token_logprobs: [...c.logprobs.token_logprobs.slice(0, released), ...m.logprobs.token_logprobs] },
          weight_versions: keptVersions.length === released && m.weight_versions ? [...keptVersions, ...m.weight_versions] : undefined,
        };
        f.started = Date.now() - (released / rate) * 1000;
      }
      if (f.abortedAt !== null && rate) {
        const released = Math.floor(((f.abortedAt - f.started) / 1000) * rate);
        if (released < c.token_ids.length || c.finish_reason === 'abort') {
          const n = Math.min(released, c.token_ids.length);
          c = { ...c, token_ids: c.token_ids.slice(0, n), finish_reason: 'abort', stop_reason: null, logprobs: { token_logprobs: c.logprobs.token_logprobs.slice(0, n) }, weight_versions: c.weight_versions?.slice(0, n), text: '' };
        }
      }
    }
    lastReceive = Date.now();
    const n = c.token_ids.length;
    // [sampler] temperature-scaled unless SGLANG_RETURN_ORIGINAL_LOGPROB=1 (T 0 is greedy: original; T 1 changes nothing)
    const lps = opts.returnOriginalLogprob || sp.temperature === 0 || sp.temperature === 1 || n === 0
      ? c.logprobs.token_logprobs
      : await scaledLogprobs(prompt, c.token_ids, sp.temperature);
    const entries = c.token_ids.map((t, i) => [lps[i], t, null]);
    const inputEntries = returnLogprob && logprobStart !== null && logprobStart < promptLen ? await inputLogprobs(prompt, logprobStart) : [];
    const sp2 = spans(c.weight_versions, n);
    if (c.finish_reason === 'abort' && n === 0) {
      // [tm] _handle_abort_req: aborted before it was scheduled (no prompt_tokens in this meta_info)
      const meta: Record<string, unknown> = { id: f.rid, finish_reason: { type: 'abort', message: 'Abort in waiting queue' }, weight_version: weightVersion, e2e_latency: (Date.now() - f.started) / 1000 };
      Object.assign(meta, { weight_versions: sp2, weight_version: sp2[sp2.length - 1].version });
      if (returnLogprob) Object.assign(meta, { input_token_logprobs: [], output_token_logprobs: [], output_token_logprobs_length: 0 });
      meta.completion_tokens = 0;
      return json(200, { text: '', output_ids: [], meta_info: meta });
    }
    // [sched] BaseFinishReason.to_json(): stop on a stop id or EOS: FINISH_MATCHED_TOKEN (the
    // matched id is the last of output_ids: output_ids_through_stop keeps it); on a string:
    // FINISH_MATCHED_STR; length: FINISH_LENGTH; abort: FINISH_ABORT() with no status
    const finish = c.finish_reason === 'stop'
      ? { type: 'stop', matched: typeof c.stop_reason === 'string' ? c.stop_reason : c.token_ids[n - 1] }
      : c.finish_reason === 'length' ? { type: 'length', length: maxNew }
        : { type: 'abort', message: 'Aborted', status_code: null, err_type: null };
    // [tm] _handle_batch_output: meta_info of a finished, non-streamed request
    const meta: Record<string, unknown> = { id: f.rid, finish_reason: finish, prompt_tokens: promptLen, weight_version: weightVersion, num_retractions: f.retractions };
    if (returnLogprob) Object.assign(meta, { input_token_logprobs: inputEntries, output_token_logprobs: entries, output_token_logprobs_length: n });
    Object.assign(meta, { reasoning_tokens: 0, completion_tokens: n, cached_tokens: 0 });
    Object.assign(meta, { weight_versions: sp2, weight_version: sp2[sp2.length - 1].version });
    meta.e2e_latency = (Date.now() - f.started) / 1000;
    return json(200, { text: c.text, output_ids: c.token_ids, meta_info: meta });
  }

  // ---------------------------------------------------------------- control routes

  /** [http] health_generate: a one-token generation; 200 (empty) once the scheduler answered
   *  anything after it was sent, 503 (empty) after SGLANG_HEALTH_CHECK_TIMEOUT. */
  async function health(path: string): Promise<Reply> {
    if (opts.healthGeneration === false && path === '/health') return new Reply(200, '');
    const tic = Date.now();
    const life = epoch;
    const rid = `HEALTH_CHECK_${randomUUID().replace(/-/g, '')}`;
    let done = false;
    void (async () => {
      await waitUnpaused();
      if (done || life !== epoch) return;
      const r = await bcall('/v1/completions', { prompt: [0], max_tokens: 1, temperature: 0, request_id: rid });
      if (r.status === 200) lastReceive = Date.now();
    })().catch(() => undefined);
    try {
      while (Date.now() < tic + healthTimeout) {
        await sleep(1000);
        if (life !== epoch) return new Reply(503, '');
        const busy = !paused && [...flights.values()].some((f) => f.abortedAt === null);
        if (lastReceive > tic || busy) return new Reply(200, '');
      }
      return new Reply(503, '');
    } finally {
      done = true;
    }
  }

  /** [http] update_weights_from_disk → [tm] update_weights_from_disk → [wu]. */
  async function updateWeights(raw: unknown): Promise<Reply> {
    if (raw === undefined) return missingBody();
    const b = (raw ?? {}) as Record<string, unknown>;
    if (typeof b.model_path !== 'string') return validationError([{ type: b.model_path === undefined ? 'missing' : 'string_type', loc: ['body', 'model_path'], msg: b.model_path === undefined ? 'Field required' : 'Input should be a valid string', input: b.model_path ?? raw }]);
    if (b.weight_version != null && typeof b.weight_version !== 'string') return validationError([{ type: 'string_type', loc: ['body', 'weight_version'], msg: 'Input should be a valid string', input: b.weight_version }]);
    const wv = (b.weight_version as string | undefined) ?? null;
    if (b.abort_all_requests === true) abortFlights();
    const locked = !paused;
    let release = () => {};
    if (locked) {
      while (writer) await writer;
      writer = new Promise<void>((r) => { release = r; });
      await idle();
    }
    try {
      const asNumber = wv !== null && /^-?\d+$/.test(wv) ? Number(wv) : undefined;
      const r = await bcall('/update_weights', { path: b.model_path, ...(asNumber === undefined ? {} : { version: asNumber }) });
      if (r.status !== 200) return json(400, { success: false, message: `Failed to get weights iterator: ${backendMessage(r)}.`, num_paused_requests: 0 });
      const loaded = (r.json as { version: number }).version;
      let message = 'Succeeded to update model weights.';
      if (wv !== null) { versionNames.set(loaded, wv); weightVersion = wv; } else versionNames.set(loaded, weightVersion);
      loads += 1;
      modelPath = b.model_path;
      // [wu] flush_cache_after_weight_update (flush_cache defaults to true)
      if (b.flush_cache !== false) {
        if (flights.size > 0 && !(paused && pauseMode === 'retract')) return json(400, { success: false, message: 'Weights were updated, but the cache was not flushed because requests are still running or queued. Retract or finish them, then call /flush_cache.', num_paused_requests: 0 });
        await bcall('/reset_prefix_cache', {});
      }
      if (wv !== null) message += ` Weight version updated to ${wv}.`;
      return json(200, { success: true, message, num_paused_requests: 0 });
    } finally {
      if (locked) { writer = null; release(); }
    }
  }

  /** [http] pause_generation → [tm] pause_generation. mode abort: hold new requests, abort
   *  every request in flight, and answer once none is left (SGLang re-checks each second). */
  async function pauseGeneration(raw: unknown): Promise<Reply> {
    if (raw === undefined) return missingBody();
    const mode = (raw as { mode?: unknown } | null)?.mode ?? 'abort';
    if (mode !== 'abort' && mode !== 'retract' && mode !== 'in_place') {
      return validationError([{ type: 'literal_error', loc: ['body', 'mode'], msg: "Input should be 'abort', 'retract' or 'in_place'", input: mode }]);
    }
    paused = true;
    pauseMode = mode;
    await bcall('/pause', {});
    if (mode === 'retract') {
      for (const f of flights.values()) {
        if (f.abortedAt !== null || f.retractedAt !== null) continue;
        f.retractedAt = Date.now();
        f.retractedLoads = loads;
        f.retractions += 1;
        f.wake?.();
      }
    }
    if (mode === 'abort') {
      await bcall('/abort_requests', {});
      for (;;) {
        abortFlights();
        if (flights.size === 0) break;
        await sleep(1000);
      }
    }
    return json(200, { message: 'Generation paused successfully.', status: 'ok' });
  }

  async function continueGeneration(raw: unknown): Promise<Reply> {
    if (raw === undefined) return missingBody();
    const t = (raw as { torch_empty_cache?: unknown } | null)?.torch_empty_cache;
    if (t !== undefined && typeof t !== 'boolean') return validationError([{ type: 'bool_type', loc: ['body', 'torch_empty_cache'], msg: 'Input should be a valid boolean', input: t }]);
    paused = false;
    await bcall('/resume', {});
    const w = resumeWaiters; resumeWaiters = []; w.forEach((r) => r());
    return json(200, { message: 'Generation continued successfully.', status: 'ok' });
  }

  /** [http] abort_request → [tm] abort_request: an unknown rid does nothing (one tokenizer
   *  worker); a known one aborts every request whose rid starts with it ([sched]). */
  async function abortRequest(raw: unknown): Promise<Reply> {
    if (raw === undefined) return missingBody();
    const b = (raw ?? {}) as { rid?: unknown; abort_all?: unknown };
    if (b.rid != null && typeof b.rid !== 'string') return validationError([{ type: 'string_type', loc: ['body', 'rid'], msg: 'Input should be a valid string', input: b.rid }]);
    if (b.abort_all === true) abortFlights();
    else if (typeof b.rid === 'string' && b.rid !== '' && flights.has(b.rid)) abortFlights(b.rid);
    return new Reply(200, '');
  }

  /** [http] flush_cache → [flush]: only a fully idle scheduler flushes; ?timeout=S waits for idle. */
  async function flushCache(url: URL): Promise<Reply> {
    const q = url.searchParams.get('timeout');
    const timeout = q === null ? 0 : Number(q);
    if (!Number.isFinite(timeout) || timeout < 0) return validationError([{ type: Number.isFinite(timeout) ? 'greater_than_equal' : 'float_parsing', loc: ['query', 'timeout'], msg: Number.isFinite(timeout) ? 'Input should be greater than or equal to 0' : 'Input should be a valid number, unable to parse string as a number', input: q }]);
    const failed = (message?: string) => new Reply(400, message || 'Flush cache failed.\n');
    if (flushPending) return failed('Another flush_cache is already in progress.');
    if (flights.size > 0 && !(paused && pauseMode === 'retract')) {
      if (timeout <= 0) return failed();
      flushPending = true;
      try {
        const ok = await Promise.race([idle().then(() => true), sleep(timeout * 1000).then(() => false)]);
        if (!ok || flights.size > 0) return failed('Timed out waiting for idle state.');
      } finally {
        flushPending = false;
      }
    }
    await bcall('/reset_prefix_cache', {});
    return new Reply(200, 'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n');
  }

  /** [http] model_info (and its deprecated name get_model_info). */
  const modelInfo = () => json(200, {
    model_path: modelPath, served_model_name: modelPath, tokenizer_path: opts.launchCheckpoint ?? info.model, is_generation: true,
    preferred_sampling_params: null, weight_version: weightVersion, load_format: 'auto', reasoning_parser: null, tool_call_parser: null,
    disaggregation_mode: 'null', has_image_understanding: false, has_audio_understanding: false, model_type: null, architectures: null,
  });
  /** [http] server_info: a few of the resolved server args, the live state, the version. */
  const serverInfo = () => json(200, {
    model_path: opts.launchCheckpoint ?? info.model, enable_metrics: metricsOn, weight_version: launchVersion, context_length: info.context,
    enable_deterministic_inference: opts.deterministicInference ?? false, tokenizer_worker_num: 1, tp_size: 1, pp_size: 1, dp_size: 1,
    internal_states: [{}], version: SGLANG_DOUBLE_VERSION, frontend: 'python',
  });

  /** [metrics] the scheduler gauges, labelled as a single-GPU unified server labels them. */
  async function metrics(): Promise<Reply> {
    const b = await bcall('/metrics');
    const liveWaiting = Math.max(0, Number(/^vllm:num_requests_waiting(?:\{[^}]*\})?\s+(\S+)/m.exec(b.text)?.[1] ?? 0));
    const inBackend = [...flights.values()].filter((f) => f.phase === 'backend').length;
    const liveRunning = flights.size - Math.min(liveWaiting, inBackend);
    // [metrics] the scheduler publishes its gauges at each prefill batch, every
    // --decode-log-interval (40) decode steps, and when it goes idle
    // (scheduler_components/metrics_reporter.py): between those they hold the last values
    const now = Date.now();
    const decodeInterval = rate ? (DECODE_LOG_INTERVAL / rate) * 1000 : 0;
    if (now - gauges.at >= decodeInterval) gauges = { running: liveRunning, waiting: liveWaiting, at: now };
    const { running, waiting } = gauges;
    const lab = `{engine_type="unified",model_name="${opts.launchCheckpoint ?? info.model}",moe_ep_rank="0",pp_rank="0",tp_rank="0"}`;
    const g = (name: string, help: string, v: number) => `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name}${lab} ${v.toFixed(1)}\n`;
    return new Reply(200, g('sglang:num_running_reqs', 'The number of running requests.', running) + g('sglang:num_queue_reqs', 'The number of requests in the waiting queue.', waiting), 'text/plain; version=0.0.4; charset=utf-8');
  }

  type Handler = (body: unknown, url: URL) => Promise<Reply>;
  const routes = new Map<string, Map<string, Handler>>();
  const route = (methods: string[], path: string, h: Handler) => { const m = routes.get(path) ?? new Map<string, Handler>(); for (const x of methods) m.set(x, h); routes.set(path, m); };
  route(['GET'], '/health', () => health('/health'));
  route(['GET'], '/health_generate', () => health('/health_generate'));
  route(['GET'], '/ready', async () => new Reply(paused ? 503 : 200, ''));
  route(['POST', 'PUT'], '/generate', (b) => generate(b));
  route(['POST'], '/update_weights_from_disk', (b) => updateWeights(b));
  // [transfer] http_server.py init_weights_update_group / begin_weight_update /
  // update_weights_from_distributed / end_weight_update (io_struct.py): the backend is the one
  // scheduler worker that joins the trainer's group and receives the broadcast
  route(['POST'], '/init_weights_update_group', async (b) => {
    if (b === undefined) return missingBody();
    const x = (b ?? {}) as Record<string, unknown>;
    for (const k of ['master_address', 'master_port', 'rank_offset', 'world_size'] as const) {
      if (x[k] === undefined) return validationError([{ type: 'missing', loc: ['body', k], msg: 'Field required', input: b }]);
    }
    const r = await bcall('/weight_transfer/init', { master_address: x.master_address, master_port: x.master_port, rank: x.rank_offset, world_size: x.world_size, backend: x.backend === 'nccl' ? undefined : x.backend });
    if (r.status !== 200) return json(400, { success: false, message: `Failed to initialize the weight update group: ${backendMessage(r)}` });
    transferGroup = typeof x.group_name === 'string' ? x.group_name : 'weight_update_group';
    return json(200, { success: true, message: 'Succeeded to initialize custom process group.' });
  });
  route(['POST'], '/begin_weight_update', async () => { inWeightUpdate = true; return json(200, { success: true, message: 'Weight update session opened.' }); });
  route(['POST'], '/end_weight_update', async () => { inWeightUpdate = false; return json(200, { success: true, message: 'Weight update session closed.' }); });
  route(['POST'], '/update_weights_from_distributed', async (b) => {
    if (b === undefined) return missingBody();
    const x = (b ?? {}) as { names?: string[]; dtypes?: string[]; shapes?: number[][]; group_name?: string; weight_version?: string | null; abort_all_requests?: boolean };
    if ((x.group_name ?? 'weight_update_group') !== transferGroup) return json(400, { success: false, message: `Group ${x.group_name ?? 'weight_update_group'} not in ${JSON.stringify(transferGroup ? [transferGroup] : [])}` });
    if (!inWeightUpdate) return json(400, { success: false, message: 'update_weights_from_distributed requires an open weight-update session: call /begin_weight_update first.' });
    if (x.abort_all_requests === true) abortFlights();
    const wv = x.weight_version ?? null;
    const asNumber = wv !== null && /^-?\d+$/.test(wv) ? Number(wv) : Math.max(...versionNames.keys()) + 1;
    const r = await bcall('/weight_transfer/receive', { names: x.names ?? [], dtype_names: x.dtypes ?? [], shapes: x.shapes ?? [], src: 0, version: asNumber });
    if (r.status !== 200) return json(400, { success: false, message: `Failed to update parameter online: ${backendMessage(r)}` });
    versionNames.set(asNumber, wv ?? weightVersion);
    if (wv !== null) weightVersion = wv;
    loads += 1;
    return json(200, { success: true, message: 'Succeeded to update parameter online.' });
  });
  route(['POST'], '/pause_generation', (b) => pauseGeneration(b));
  route(['POST'], '/continue_generation', (b) => continueGeneration(b));
  route(['POST'], '/abort_request', (b) => abortRequest(b));
  route(['GET', 'POST'], '/flush_cache', (_b, u) => flushCache(u));
  route(['GET'], '/model_info', async () => modelInfo());
  route(['GET'], '/get_model_info', async () => modelInfo());
  route(['GET'], '/server_info', async () => serverInfo());
  route(['GET'], '/get_server_info', async () => serverInfo());
  route(['GET'], '/v1/models', async () => json(200, { object: 'list', data: [{ id: modelPath, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'sglang', root: modelPath, max_model_len: info.context }] }));
  // SGLang has the OpenAI-compatible routes; floe does not use them and the double does not reproduce them
  for (const p of ['/v1/completions', '/v1/chat/completions']) route(['POST'], p, async () => json(501, { error: { message: `${p} is not reproduced by the SGLang double` } }));
  if (metricsOn) route(['GET'], '/metrics', () => metrics());

  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://double');
      const text = Buffer.concat(chunks).toString();
      let body: unknown;
      let badJson = false;
      if (text.trim()) {
        try { body = JSON.parse(text); } catch { badJson = true; body = text; }
      }
      requests.push({ method: req.method ?? 'GET', route: `${url.pathname}${url.search}`, body: body ?? null });
      const send = (r: Reply) => {
        if (res.destroyed || res.headersSent) return;
        res.writeHead(r.status, { ...(r.type ? { 'content-type': r.type } : {}), 'content-length': Buffer.byteLength(r.body) });
        res.end(r.body);
      };
      // [auth] decide_request_auth: /health*, /ready*, /metrics* are always allowed
      const open = ['/health', '/ready', '/metrics'].some((p) => url.pathname.startsWith(p));
      if (opts.apiKey && !open && req.headers.authorization !== `Bearer ${opts.apiKey}`) return send(json(401, { error: 'Unauthorized' }));
      const byMethod = routes.get(url.pathname);
      const h = byMethod?.get(req.method ?? 'GET');
      if (!byMethod) return send(notFound());
      if (!h) return send(methodNotAllowed());
      if (badJson) return send(validationError([{ type: 'json_invalid', loc: ['body', 0], msg: 'JSON decode error', input: {} }]));
      h(body, url).then(send, (err: unknown) => send(json(500, { error: { message: `internal error in the SGLang double: ${(err as Error).message}` } })));
    });
  });
  server.on('connection', (s: Socket) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  const listen = (port: number) => new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => { server.removeListener('error', reject); resolve((server.address() as AddressInfo).port); });
  });
  const port = await listen(opts.port ?? 0);

  /** Stop listening and drop every connection (a process that died). */
  function drop(): Promise<void> {
    epoch++;
    const closed = new Promise<void>((r) => server.close(() => r()));
    for (const s of sockets) s.destroy();
    sockets.clear();
    for (const f of flights.values()) { f.abortedAt = Date.now(); f.wake?.(); }
    return closed;
  }

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    async restart(o = {}) {
      const t0 = Date.now();
      const closed = drop();
      // the process is gone: nothing it ran goes on, and it comes back unpaused, with its launch weights
      await bcall('/abort_requests', {}).catch(() => undefined);
      await bcall('/resume', {}).catch(() => undefined);
      let launch = info0.version;
      if (opts.launchCheckpoint) {
        const r = await bcall('/update_weights', { path: opts.launchCheckpoint });
        if (r.status !== 200) throw new Error(`SGLang double: resetting the backend to ${opts.launchCheckpoint} failed: ${r.text.slice(0, 300)}`);
        launch = (r.json as { version: number }).version;
      }
      await bcall('/reset_prefix_cache', {}).catch(() => undefined);
      await closed;
      paused = false;
      const w = resumeWaiters; resumeWaiters = []; w.forEach((r) => r());
      flights.clear();
      pendingRids.clear();
      const iw = idleWaiters; idleWaiters = []; iw.forEach((r) => r());
      writer = null;
      weightVersion = launchVersion;
      versionNames = new Map([[launch, launchVersion]]);
      modelPath = opts.launchCheckpoint ?? info.model;
      lastReceive = 0;
      flushPending = false;
      transferGroup = null; // a new process has no weight-update group
      inWeightUpdate = false;
      await sleep((o.downMs ?? 0) - (Date.now() - t0));
      await listen(port);
    },
    async close() {
      await drop();
    },
  };
}
