import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import { randomUUID } from 'node:crypto';

/** A test double of a vLLM 0.34.0 OpenAI-compatible server (`vllm serve`), generating with a
 *  real backend: floe's reference engine at `backend`. It answers the routes floe's vLLM
 *  adapter uses with the requests and responses vLLM's source defines, read from the release
 *  (the PyPI wheel vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl; its vllm/_version.py names
 *  commit g62d4bc3c7). Files, as paths inside that wheel:
 *
 *  [routers]    vllm/entrypoints/launchers/api_server/routers.py: which routers exist; the dev
 *               and RL routers only with VLLM_SERVER_DEV_MODE=1.
 *  [completion] vllm/entrypoints/openai/completion/{api_router,protocol,serving}.py
 *  [params]     vllm/sampling_params.py (SamplingParams._verify_args, _validate_logprobs),
 *               vllm/renderers/params.py (TokenizeParams: max_tokens and prompt length checks),
 *               vllm/renderers/base.py (validate_token_ids), vllm/entrypoints/serve/utils/api_utils.py
 *               (get_max_tokens, validate_json_request)
 *  [errors]     vllm/entrypoints/serve/exception_handling/{error_response,handlers/*}.py,
 *               vllm/entrypoints/serve/engine/protocol.py (ErrorResponse, ErrorInfo, ModelCard)
 *  [rl]         vllm/entrypoints/rl/online/api_router.py: /pause, /resume, /is_paused, /abort_requests
 *  [cache]      vllm/entrypoints/serve/dev/cache/api_router.py: /reset_prefix_cache
 *  [rpc]        vllm/entrypoints/serve/dev/rpc/api_router.py: /collective_rpc; vllm/v1/serial_utils.py
 *  [transfer]   vllm/entrypoints/rl/online/api_router.py (init_weight_transfer_engine, start/finish_weight_update,
 *               update_weights, get_world_size); vllm/distributed/weight_transfer/nccl_engine.py, nccl_common.py
 *               (run_method), vllm/v1/executor/multiproc_executor.py, vllm/v1/engine/core.py and
 *               core_client.py (how a worker's failure reaches the client)
 *  [health]     vllm/entrypoints/serve/instrumentator/health.py; [metrics] .../metrics.py and
 *               vllm/v1/metrics/loggers.py; [basic] .../basic.py (/version);
 *               [models] vllm/entrypoints/openai/models/serving.py (/v1/models)
 *  [engine]     vllm/v1/engine/{async_llm,output_processor,core}.py: request ids, abort, pause
 *  [reload]     vllm/v1/worker/gpu_worker.py (Worker.reload_weights(weights_iterator=None,
 *               weights_path=None, is_checkpoint_format=True) → None), reachable over
 *               /collective_rpc as a built-in worker method; every tensor-parallel worker runs it
 *  [auth]       vllm/entrypoints/serve/middleware/authenticate.py: with --api-key, paths under
 *               /v1, /v2, /inference, /cohere need `Authorization: Bearer <key>` (401
 *               {"error": "Unauthorized"}); /health, /metrics and the dev routes do not
 *
 *  Unknown paths answer FastAPI/Starlette's default 404 {"detail": "Not Found"} (405
 *  {"detail": "Method Not Allowed"} for a known path with another method).
 *
 *  Known differences (the double is not vLLM): one backend sequence per choice, so
 *  logprobs.top_logprobs holds the sampled id only (vLLM adds the top `logprobs` ids); streaming,
 *  echo, beam search, prompt_embeds, suffix, logit_bias, top_k / min_p / penalties and stop
 *  strings with `n` > 1 answer 501 NotImplementedError; /collective_rpc knows floe's methods and
 *  vLLM's reload_weights (with weights_path; other vLLM worker methods are "not implemented"
 *  here); dev routes other than the
 *  ones above (sleep, server_info, weight transfer) are 404. With `tokensPerSecond`, a request's
 *  ids are released at that rate (the backend generates them at once): an abort answers the ids
 *  released so far, as a real server at that speed would. */

export interface VllmDoubleOptions {
  /** Base URL of a reference engine (engine/floe_engine/inference_server.py). */
  backend: string;
  /** The folder the server was "launched" with: restart() loads it into the backend as version 0. */
  launchCheckpoint?: string;
  /** --weight-transfer-config set (default true): the native weight-transfer routes work. */
  weightTransfer?: boolean;
  /** VLLM_SERVER_DEV_MODE=1 (default true): the dev and RL routes exist. */
  devMode?: boolean;
  /** --worker-extension-cls floe_vllm.FloeWorkerExtension (default true). */
  workerExtension?: boolean;
  port?: number;
  /** Release generated ids at this rate (ids per second per request); unset: as fast as the backend. */
  tokensPerSecond?: number;
  /** --served-model-name (default: the backend's model name). */
  servedModelName?: string;
  /** --tensor-parallel-size (default 1): /collective_rpc answers one result per worker. */
  tensorParallel?: number;
  /** --api-key [auth]. */
  apiKey?: string;
}

export interface RecordedRequest { method: string; route: string; body: unknown }

export interface VllmDouble {
  url: string;
  port: number;
  /** Every request the double received, in order (route: path and query). */
  requests: RecordedRequest[];
  /** Worker loads through reload_weights so far (floe_load_folder's and the built-in's), one per worker. */
  readonly reloads: number;
  /** A server restart: open connections are dropped, nothing listens for `downMs` (connections
   *  are refused), the backend is reset to the launch weights, then the same port listens again. */
  restart(o?: { downMs?: number }): Promise<void>;
  close(): Promise<void>;
}

export const VLLM_DOUBLE_VERSION = '0.34.0';
/** What floe_vllm.FloeWorkerExtension.floe_ping answers. */
export const FLOE_VLLM_VERSION = '0.1.0';
/** vLLM's --max-logprobs default (vllm/config/model.py). */
const MAX_LOGPROBS = 20;

type Json = Record<string, unknown>;
interface BackendInfo { maxModelLen: number; vocabSize: number; model: string }
interface BackendChoice { index: number; text: string; finish_reason: string; stop_reason: number | string | null; token_ids: number[]; logprobs: { token_logprobs: number[]; tokens: string[] }; weight_versions?: number[] }

class HttpReply { constructor(readonly status: number, readonly body: unknown, readonly empty = false) {} }
class TextBody { constructor(readonly text: string, readonly contentType: string) {} }

const STATUS_PHRASE: Record<number, string> = { 400: 'Bad Request', 404: 'Not Found', 405: 'Method Not Allowed', 500: 'Internal Server Error', 501: 'Not Implemented', 503: 'Service Unavailable' };

/** [errors] create_error_response: {error: {message, type, param, code}}. */
const vllmError = (status: number, type: string, message: string, param: string | null = null) =>
  new HttpReply(status, { error: { message, type, param, code: status } });
/** [errors] http_exception_handler: an HTTPException raised by a route; type is the status phrase. */
const httpException = (status: number, detail: string) => vllmError(status, STATUS_PHRASE[status] ?? String(status), detail);
/** [errors] VLLMValidationError → 400 BadRequestError, param = its parameter. */
const badRequest = (message: string, param: string | null = null) => vllmError(400, 'BadRequestError', message, param);
const notImplemented = (what: string) => vllmError(501, 'NotImplementedError', `vLLM test double: ${what} is not implemented`);
const NOT_FOUND = new HttpReply(404, { detail: 'Not Found' });
const METHOD_NOT_ALLOWED = new HttpReply(405, { detail: 'Method Not Allowed' });

/** Python's repr of a value, as pydantic's error dicts print in vLLM's validation messages. */
function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'string') return `'${v.replace(/'/g, "\\'")}'`;
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (Array.isArray(v)) return `<list of ${v.length} items>`;
  if (typeof v === 'object') return `<dict of ${Object.keys(v).length} items>`;
  return String(v);
}

/** [errors] validation_exception_handler: a RequestValidationError (pydantic) → 400 "Bad Request",
 *  message "N validation error(s):\n  {...}" and param the first error's cleaned loc (or the
 *  VLLMValidationError's parameter for an error raised by a model validator). */
interface FieldError { type: string; loc: string; msg: string; input?: unknown; parameter?: string }
function validationError(errors: FieldError[]): HttpReply {
  const n = errors.length;
  const lines = errors.slice(0, 10).map((e) => `  {'type': '${e.type}', 'loc': '${e.loc}', 'msg': ${pyRepr(e.msg)}, 'input': ${pyRepr(e.input)}}`);
  const param = errors.find((e) => e.parameter)?.parameter ?? errors[0]?.loc ?? null;
  return vllmError(400, 'Bad Request', `${n} validation ${n === 1 ? 'error' : 'errors'}:\n${lines.join('\n')}`, param);
}
const modelValidatorError = (msg: string, parameter: string, input?: unknown) =>
  validationError([{ type: 'value_error', loc: 'body', msg: `Value error, ${msg}`, input, parameter }]);

const isInt = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x);

/** Pydantic's lax coercions for the CompletionRequest fields the double reads. */
function coerce(kind: 'int' | 'float' | 'bool' | 'str', v: unknown): { ok: boolean; v?: unknown } {
  if (kind === 'int') {
    if (isInt(v)) return { ok: true, v };
    if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) return { ok: true, v: Number(v) };
    return { ok: false };
  }
  if (kind === 'float') {
    if (typeof v === 'number' && !Number.isNaN(v)) return { ok: true, v };
    if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return { ok: true, v: Number(v) };
    return { ok: false };
  }
  if (kind === 'bool') {
    if (typeof v === 'boolean') return { ok: true, v };
    if (v === 0 || v === 1) return { ok: true, v: v === 1 };
    if (typeof v === 'string' && /^(true|false|yes|no|on|off|1|0|t|f|y|n)$/i.test(v)) return { ok: true, v: /^(true|yes|on|1|t|y)$/i.test(v) };
    return { ok: false };
  }
  return typeof v === 'string' ? { ok: true, v } : { ok: false };
}

const FIELD_MSG = { int: ['int_type', 'Input should be a valid integer'], float: ['float_type', 'Input should be a valid number'], bool: ['bool_type', 'Input should be a valid boolean'], str: ['string_type', 'Input should be a valid string'] } as const;

/** The CompletionRequest fields the double understands: [completion] protocol.py. */
const SCALAR_FIELDS: [string, 'int' | 'float' | 'bool' | 'str', boolean][] = [
  // name, kind, nullable
  ['model', 'str', true], ['echo', 'bool', true], ['frequency_penalty', 'float', true], ['logprobs', 'int', true],
  ['max_tokens', 'int', true], ['n', 'int', false], ['presence_penalty', 'float', true], ['seed', 'int', true],
  ['stream', 'bool', true], ['suffix', 'str', true], ['temperature', 'float', true], ['top_p', 'float', true],
  ['user', 'str', true], ['use_beam_search', 'bool', false], ['top_k', 'int', true], ['min_p', 'float', true],
  ['repetition_penalty', 'float', true], ['include_stop_str_in_output', 'bool', false], ['ignore_eos', 'bool', false],
  ['min_tokens', 'int', false], ['skip_special_tokens', 'bool', true], ['spaces_between_special_tokens', 'bool', false],
  ['prompt_logprobs', 'int', true], ['add_special_tokens', 'bool', false], ['request_id', 'str', false],
  ['return_tokens_as_token_ids', 'bool', true], ['return_token_ids', 'bool', true], ['return_weight_versions', 'bool', false],
];

/** A parsed, validated CompletionRequest: the fields floe and the double use. */
interface CompletionReq {
  model: string | null; prompts: (number[] | string)[]; maxTokens: number; n: number; logprobs: number | null;
  seed: number | null; temperature: number | null; topP: number | null; stop: string[]; stopTokenIds: number[];
  ignoreEos: boolean; includeStop: boolean; minTokens: number; returnTokenIds: boolean; asTokenIds: boolean;
  requestId: string; topK: number | null; minP: number | null; repetitionPenalty: number | null;
  presencePenalty: number | null; frequencyPenalty: number | null; returnWeightVersions: boolean;
}

/** [completion] CompletionRequest's model validators and field types. */
function parseCompletionRequest(b: Json): CompletionReq | HttpReply {
  // model validators (mode="before"), on the raw body
  for (const f of ['prompt_logprobs', 'logprobs']) {
    const v = b[f];
    if (v !== undefined && v !== null && typeof v !== 'number') return modelValidatorError(`\`${f}\` must be an integer.`, f, v);
  }
  if (typeof b.prompt_logprobs === 'number' && b.prompt_logprobs < 0 && b.prompt_logprobs !== -1) return modelValidatorError('`prompt_logprobs` must be a positive value or -1.', 'prompt_logprobs', b.prompt_logprobs);
  if (typeof b.logprobs === 'number' && b.logprobs < 0 && b.logprobs !== -1) return modelValidatorError('`logprobs` must be a positive value or -1.', 'logprobs', b.logprobs);
  if (b.stream_options && !b.stream) return modelValidatorError('Stream options can only be defined when `stream=True`.', 'stream_options');
  const prompt = b.prompt;
  const embeds = b.prompt_embeds;
  const promptEmpty = prompt === undefined || prompt === null || prompt === '';
  const embedsEmpty = embeds === undefined || embeds === null || (Array.isArray(embeds) && embeds.length === 0);
  if (promptEmpty && embedsEmpty) return modelValidatorError('Either prompt or prompt_embeds must be provided and non-empty.', 'prompt');

  // field types
  const errors: FieldError[] = [];
  const out: Record<string, unknown> = {};
  for (const [name, kind, nullable] of SCALAR_FIELDS) {
    const v = b[name];
    if (v === undefined || (v === null && nullable)) continue;
    const c = coerce(kind, v);
    if (!c.ok) errors.push({ type: FIELD_MSG[kind][0], loc: `body.${name}`, msg: FIELD_MSG[kind][1], input: v });
    else out[name] = c.v;
  }
  let prompts: (number[] | string)[] = [];
  if (!promptEmpty) {
    const intList = (x: unknown): x is number[] => Array.isArray(x) && x.every(isInt);
    if (typeof prompt === 'string') prompts = [prompt];
    else if (intList(prompt)) prompts = [prompt];
    else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every(intList)) prompts = prompt;
    else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((p) => typeof p === 'string')) prompts = prompt as string[];
    else errors.push({ type: 'union_type', loc: 'body.prompt', msg: 'Input should be a valid list of token ids, list of lists of token ids, string or list of strings', input: prompt });
    for (const p of prompts) {
      if (Array.isArray(p)) {
        const neg = p.findIndex((t) => t < 0);
        if (neg >= 0) errors.push({ type: 'greater_than_equal', loc: `body.prompt.${neg}`, msg: 'Input should be greater than or equal to 0', input: p[neg] });
      }
    }
  }
  let stop: string[] = [];
  if (typeof b.stop === 'string') stop = [b.stop];
  else if (Array.isArray(b.stop) && b.stop.every((s) => typeof s === 'string')) stop = b.stop as string[];
  else if (b.stop !== undefined && b.stop !== null) errors.push({ type: 'union_type', loc: 'body.stop', msg: 'Input should be a valid string or list of strings', input: b.stop });
  let stopTokenIds: number[] = [];
  if (Array.isArray(b.stop_token_ids) && b.stop_token_ids.every(isInt)) stopTokenIds = b.stop_token_ids as number[];
  else if (b.stop_token_ids !== undefined && b.stop_token_ids !== null) errors.push({ type: 'list_type', loc: 'body.stop_token_ids', msg: 'Input should be a valid list of integers', input: b.stop_token_ids });
  if (errors.length) return validationError(errors);

  // what the double does not do (it is not vLLM): refused as 501, never answered wrongly
  if (out.stream === true) return notImplemented('stream=true');
  if (out.echo === true) return notImplemented('echo=true');
  if (out.use_beam_search === true) return notImplemented('use_beam_search');
  if (!embedsEmpty) return notImplemented('prompt_embeds');
  if (out.suffix) return notImplemented('suffix');
  if (b.logit_bias) return notImplemented('logit_bias');
  if (typeof out.prompt_logprobs === 'number') return notImplemented('prompt_logprobs');
  if (typeof out.top_k === 'number' && out.top_k > 0) return notImplemented('top_k > 0 (the backend samples with temperature and top_p only)');
  if (typeof out.min_p === 'number' && out.min_p > 0) return notImplemented('min_p > 0');
  for (const [k, neutral] of [['repetition_penalty', 1], ['presence_penalty', 0], ['frequency_penalty', 0]] as const) {
    if (typeof out[k] === 'number' && out[k] !== neutral) return notImplemented(`${k} ${String(out[k])}`);
  }
  const n = (out.n as number | undefined) ?? 1;
  if (stop.length && n > 1) return notImplemented('stop strings with n > 1');

  return {
    model: (out.model as string | undefined) ?? null,
    prompts,
    // normalize_null_max_tokens: null → the field default, 16
    maxTokens: (out.max_tokens as number | undefined) ?? 16,
    n,
    logprobs: (out.logprobs as number | undefined) ?? null,
    seed: (out.seed as number | undefined) ?? null,
    temperature: (out.temperature as number | undefined) ?? null,
    topP: (out.top_p as number | undefined) ?? null,
    stop,
    stopTokenIds,
    ignoreEos: (out.ignore_eos as boolean | undefined) ?? false,
    includeStop: (out.include_stop_str_in_output as boolean | undefined) ?? false,
    minTokens: (out.min_tokens as number | undefined) ?? 0,
    returnTokenIds: out.return_token_ids === true,
    returnWeightVersions: out.return_weight_versions === true,
    asTokenIds: out.return_tokens_as_token_ids === true,
    requestId: (out.request_id as string | undefined) ?? randomUUID(),
    topK: (out.top_k as number | undefined) ?? null,
    minP: (out.min_p as number | undefined) ?? null,
    repetitionPenalty: (out.repetition_penalty as number | undefined) ?? null,
    presencePenalty: (out.presence_penalty as number | undefined) ?? null,
    frequencyPenalty: (out.frequency_penalty as number | undefined) ?? null,
  };
}

/** [params] SamplingParams._verify_args (the checks that can fail for the fields above). */
function verifySampling(r: CompletionReq, maxTokens: number): HttpReply | null {
  if (r.n < 1) return badRequest(`n must be at least 1, got ${r.n}.`);
  const pp = r.presencePenalty ?? 0;
  if (pp < -2 || pp > 2) return badRequest(`presence_penalty must be in [-2, 2], got ${pp}.`);
  const fp = r.frequencyPenalty ?? 0;
  if (fp < -2 || fp > 2) return badRequest(`frequency_penalty must be in [-2, 2], got ${fp}.`);
  const rp = r.repetitionPenalty ?? 1;
  if (!Number.isFinite(rp)) return badRequest(`repetition_penalty must be a finite number, got ${rp}.`);
  if (rp <= 0) return badRequest(`repetition_penalty must be greater than zero, got ${rp}.`);
  const t = r.temperature ?? 1;
  if (!Number.isFinite(t)) return badRequest(`temperature must be a finite number, got ${t}.`, 'temperature');
  if (t < 0) return badRequest(`temperature must be non-negative, got ${t}.`, 'temperature');
  if (t > 2) return badRequest(`temperature must be in [0, 2], got ${t}.`, 'temperature');
  const p = r.topP ?? 1;
  if (!(p > 0 && p <= 1)) return badRequest(`top_p must be in (0, 1], got ${p}.`, 'top_p');
  if ((r.topK ?? 0) < -1) return badRequest(`top_k must be 0 (disable), or at least 1, got ${r.topK}.`);
  const mp = r.minP ?? 0;
  if (mp < 0 || mp > 1) return badRequest(`min_p must be in [0, 1], got ${mp}.`);
  if (maxTokens < 1) return badRequest(`max_tokens must be at least 1, got ${maxTokens}.`, 'max_tokens');
  if (r.minTokens < 0) return badRequest(`min_tokens must be greater than or equal to 0, got ${r.minTokens}.`);
  if (r.minTokens > maxTokens) return badRequest(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${r.minTokens}.`);
  if (r.stop.some((s) => !s)) return badRequest('stop cannot contain an empty string.');
  return null;
}

/** One request the engine is running (vLLM: one per prompt, `cmpl-<base>-<i>`). */
class Flight {
  aborted = false;
  backendSettled = false;
  /** When a pause in mode keep froze it (null: running), and the loads counted then. */
  heldAt: number | null = null;
  heldLoads = 0;
  private wake: (() => void) | null = null;
  constructor(readonly id: string, public started: number, private readonly abortInBackend: (id: string) => Promise<void>) {}

  /** Abort: a paced request stops releasing ids; one still generating in the backend is
   *  aborted there (again every 50 ms until it answers: the abort may reach the backend
   *  before the request does). */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.wake?.();
    void (async () => {
      while (!this.backendSettled) {
        await this.abortInBackend(this.id).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
  }

  /** [engine] pause mode keep (core.py pause_scheduler: PAUSED_ALL): the scheduler stops
   *  stepping; the request keeps what it has and waits for resume. */
  hold(loads: number): void {
    if (this.aborted || this.heldAt !== null) return;
    this.heldAt = Date.now();
    this.heldLoads = loads;
    this.wake?.();
  }

  /** Sleep `ms`, or less when aborted or held. */
  sleep(ms: number): Promise<void> {
    if (this.aborted || this.heldAt !== null || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.wake = null; resolve(); }, ms);
      this.wake = () => { clearTimeout(t); this.wake = null; resolve(); };
    });
  }
}

export async function startVllmDouble(opts: VllmDoubleOptions): Promise<VllmDouble> {
  const backend = opts.backend.replace(/\/$/, '');
  const devMode = opts.devMode ?? true;
  const workerExtension = opts.workerExtension ?? true;
  const rate = opts.tokensPerSecond;
  const requests: RecordedRequest[] = [];
  const flights = new Map<string, Flight>();
  const sockets = new Set<Socket>();
  /** [engine] reject_new_requests: set by a pause in mode abort or wait, cleared by resume. */
  let rejectNew = false;
  let paused = false;
  let reloads = 0;
  let builtinReloads = 0;
  let down = false;
  /** [version] the engine core's weight-version label: "default" at launch (vllm/v1/engine/core.py,
   *  EngineCore.__init__), set by POST /update_weight_version, attached to every output. */
  let weightVersion = 'default';
  /** [version] backend version number → the label its ids carry: the label in force when the
   *  weights were loaded, replaced by /update_weight_version (vLLM labels outputs by the engine
   *  core's current label, core.py _attach_weight_version, and it changes only while paused). */
  let labels = new Map<number, string>();
  let backendVersion = 0;
  /** Weight loads so far: a request held through a pause in mode keep goes on under new weights. */
  let loads = 0;
  let transferReady = false;
  let transferStarted = false;
  let resumeWaiters: (() => void)[] = [];
  const untilResumed = async () => { while (paused) await new Promise<void>((r) => resumeWaiters.push(r)); };
  const loaded = (v: number) => { backendVersion = v; labels.set(v, weightVersion); loads += 1; };

  async function bcall(route: string, body?: unknown, method = body === undefined ? 'GET' : 'POST'): Promise<{ status: number; json: unknown; text: string }> {
    const res = await fetch(`${backend}${route}`, { method, body: body === undefined ? undefined : JSON.stringify(body), headers: body === undefined ? undefined : { 'content-type': 'application/json' } });
    const text = await res.text();
    let json: unknown = null;
    try { json = text.trim() ? JSON.parse(text) : null; } catch { /* Prometheus text */ }
    return { status: res.status, json, text };
  }
  const backendMessage = (r: { json: unknown; text: string }) => ((r.json as { error?: { message?: string } } | null)?.error?.message ?? r.text).slice(0, 500);
  const abortInBackend = async (id: string) => { await bcall('/abort_requests', { request_ids: [id] }); };

  const h = (await bcall('/health')).json as { max_model_len?: number; vocab_size?: number; model?: string; tokenizer?: { vocab_size?: number } } | null;
  if (!h?.max_model_len || !h.vocab_size) throw new Error(`vLLM double: ${backend}/health is not a reference engine's (${JSON.stringify(h)})`);
  const info: BackendInfo = { maxModelLen: h.max_model_len, vocabSize: Math.max(h.vocab_size, h.tokenizer?.vocab_size ?? 0), model: opts.servedModelName ?? h.model ?? 'model' };
  backendVersion = (h as { version?: number }).version ?? 0;
  labels = new Map([[backendVersion, weightVersion]]);

  /** [completion] WeightVersionSpan {version, start, end} (vllm/outputs.py) over the ids, one per
   *  run of ids the same weights made (output_processor.py track_weight_version); the backend
   *  reports the version of each id. */
  function spansOf(c: BackendChoice): { version: string; start: number; end: number }[] {
    const n = c.token_ids.length;
    const per = c.weight_versions && c.weight_versions.length === n ? c.weight_versions : new Array<number>(n).fill(backendVersion);
    const out: { version: string; start: number; end: number }[] = [];
    per.forEach((v, i) => {
      const label = labels.get(v) ?? weightVersion;
      const last = out[out.length - 1];
      if (last && last.version === label) last.end = i + 1;
      else out.push({ version: label, start: i, end: i + 1 });
    });
    return out;
  }

  // ---------------------------------------------------------------- /v1/completions [completion]

  async function completions(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<HttpReply> {
    // validate_json_request: only application/json
    const media = (req.headers['content-type'] ?? '').toLowerCase().split(';')[0].trim();
    if (media !== 'application/json') return vllmError(400, 'Bad Request', "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed", null);
    let body: unknown;
    try { body = JSON.parse(raw); } catch (e) {
      return validationError([{ type: 'json_invalid', loc: 'body', msg: `JSON decode error: ${(e as Error).message}`, input: {} }]);
    }
    if (!body || typeof body !== 'object' || Array.isArray(body)) return validationError([{ type: 'model_attributes_type', loc: 'body', msg: 'Input should be a valid dictionary or object to extract fields from', input: body }]);
    const r = parseCompletionRequest(body as Json);
    if (r instanceof HttpReply) return r;

    // _check_model: an unknown model name is a 404
    if (r.model && r.model !== info.model) return vllmError(404, 'NotFoundError', `The model \`${r.model}\` does not exist. Valid aliases: ${info.model}.`, 'model');
    // TokenizeParams.__post_init__: max_tokens above the context is refused before anything runs
    if (r.maxTokens > info.maxModelLen) return badRequest(`max_tokens=${r.maxTokens} cannot be greater than max_model_len=${info.maxModelLen}. Please request fewer output tokens.`, 'max_tokens');

    // the prompts as ids (a string is tokenized by the server: here, by the backend)
    const promptIds: number[][] = [];
    for (const p of r.prompts) {
      if (Array.isArray(p)) { promptIds.push(p); continue; }
      const t = await bcall('/tokenize', { prompt: p });
      if (t.status !== 200) return badRequest(backendMessage(t));
      promptIds.push((t.json as { tokens: number[] }).tokens);
    }
    const base = (req.headers['x-request-id'] as string | undefined) ?? r.requestId;
    const requestId = `cmpl-${base}`;
    const plans: { ids: number[]; maxTokens: number; id: string }[] = [];
    for (const [i, ids] of promptIds.entries()) {
      // TokenizeParams._token_len_check
      if (ids.length > info.maxModelLen) {
        return badRequest(`This model's maximum context length is ${info.maxModelLen} tokens. However, your prompt contains ${ids.length} input tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt.`, 'input_tokens');
      }
      // get_max_tokens: clamped to what the context leaves
      const maxTokens = Math.min(r.maxTokens, info.maxModelLen - ids.length);
      const bad = verifySampling(r, maxTokens);
      if (bad) return bad;
      if (r.logprobs !== null) {
        const want = r.logprobs === -1 ? info.vocabSize : r.logprobs;
        if (want > MAX_LOGPROBS) return badRequest(`Requested sample logprobs of ${want}, which is greater than max allowed: ${MAX_LOGPROBS}`, 'logprobs');
      }
      // input_processor.py _validate_prompt_len, then validate_token_ids
      if (ids.length === 0) return badRequest('The decoder prompt cannot be empty');
      const lo = Math.min(...ids);
      const hi = Math.max(...ids);
      if (lo < 0) return badRequest(`Token id ${lo} is out of vocabulary`);
      if (hi > info.vocabSize - 1) return badRequest(`Token id ${hi} is out of vocabulary`);
      plans.push({ ids, maxTokens, id: `${requestId}-${i}` });
    }
    // [engine] core.py _reject_add_while_paused → RetryableRequestError → 503 ServiceUnavailableError
    if (rejectNew) return vllmError(503, 'ServiceUnavailableError', 'Generation is paused. Please retry after it resumes.');

    const mine = plans.map((p) => new Flight(p.id, Date.now(), abortInBackend));
    for (const f of mine) flights.set(f.id, f);
    // with_cancellation: a client that disconnects aborts its request
    res.on('close', () => { if (!res.writableEnded) for (const f of mine) f.abort(); });
    try {
      const outs = await Promise.all(plans.map((p, i) => runOne(mine[i], p.ids, p.maxTokens, r)));
      for (const o of outs) if (o instanceof HttpReply) return o;
      const done = outs as { choices: BackendChoice[]; promptIds: number[] }[];
      const choices: unknown[] = [];
      let promptTokens = 0;
      let completionTokens = 0;
      for (const d of done) {
        promptTokens += d.promptIds.length;
        for (const c of d.choices) {
          completionTokens += c.token_ids.length;
          choices.push({
            index: choices.length,
            text: c.text,
            logprobs: r.logprobs === null ? null : completionLogprobs(c, r.asTokenIds),
            finish_reason: c.finish_reason,
            stop_reason: c.stop_reason,
            token_ids: r.returnTokenIds ? c.token_ids : null,
            prompt_logprobs: null,
            prompt_token_ids: r.returnTokenIds ? d.promptIds : null,
            routed_experts: null,
            // [completion] spans only with return_weight_versions (serving.py); WeightVersionSpan {version, start, end} (vllm/outputs.py)
            weight_versions: r.returnWeightVersions ? spansOf(c) : null,
          });
        }
      }
      return new HttpReply(200, {
        id: requestId, object: 'text_completion', created: Math.floor(Date.now() / 1000), model: info.model, choices,
        service_tier: null, system_fingerprint: null,
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens + completionTokens, completion_tokens: completionTokens, prompt_tokens_details: null, completion_tokens_details: null },
        kv_transfer_params: null, ec_transfer_params: null, metrics: null,
      });
    } finally {
      for (const f of mine) flights.delete(f.id);
    }
  }

  /** One prompt through the backend; paced when `tokensPerSecond` is set. */
  async function runOne(f: Flight, ids: number[], maxTokens: number, r: CompletionReq): Promise<{ choices: BackendChoice[]; promptIds: number[] } | HttpReply> {
    let b: { status: number; json: unknown; text: string };
    try {
      b = await bcall('/v1/completions', {
        prompt: ids, max_tokens: maxTokens, n: r.n,
        temperature: r.temperature ?? 1, top_p: r.topP ?? 1, // CompletionRequest._DEFAULT_SAMPLING_PARAMS
        ...(r.seed === null ? {} : { seed: r.seed }),
        stop: r.stop, stop_token_ids: r.stopTokenIds, ignore_eos: r.ignoreEos, include_stop_str_in_output: r.includeStop,
        logprobs: 1, return_token_ids: true, request_id: f.id,
      });
    } catch (e) {
      return vllmError(500, 'InternalServerError', `backend unreachable: ${(e as Error).message}`);
    } finally {
      f.backendSettled = true;
    }
    if (b.status !== 200) return b.status === 400 ? badRequest(backendMessage(b)) : vllmError(500, 'InternalServerError', backendMessage(b));
    let choices = (b.json as { choices: BackendChoice[] }).choices;
    while (rate) {
      const longest = Math.max(0, ...choices.map((c) => c.token_ids.length));
      await f.sleep(f.started + (longest / rate) * 1000 - Date.now());
      if (f.aborted) {
        const released = Math.floor(((Date.now() - f.started) / 1000) * rate);
        choices = await Promise.all(choices.map((c) => truncate(c, released)));
        break;
      }
      if (f.heldAt === null) break;
      // [engine] held by a pause in mode keep: the ids released before it are kept; after resume
      // a request whose weights changed meanwhile is recomputed (its K/V, after
      // /reset_prefix_cache?reset_running_requests=true preempted it: sched/scheduler.py
      // _preempt_request) and samples its remaining ids under the new weights
      const released = Math.floor(((f.heldAt - f.started) / 1000) * rate);
      const heldAt = f.heldAt;
      await untilResumed();
      f.heldAt = null;
      const c = choices[0];
      if (f.aborted || choices.length !== 1 || loads === f.heldLoads || released >= c.token_ids.length) {
        f.started += Date.now() - heldAt; // nothing changed for it: the release goes on where it stopped
        continue;
      }
      const more = await continueUnderNewWeights(f, ids, c, released, maxTokens, r);
      if (more instanceof HttpReply) return more;
      choices = [more];
      f.started = Date.now() - (released / rate) * 1000;
    }
    return { choices, promptIds: ids };
  }

  /** The first `released` ids of `c`, then what the backend samples from the prompt plus those
   *  ids under the weights it holds now (their per-token versions say which made each). */
  async function continueUnderNewWeights(f: Flight, ids: number[], c: BackendChoice, released: number, maxTokens: number, r: CompletionReq): Promise<BackendChoice | HttpReply> {
    const kept = c.token_ids.slice(0, released);
    f.backendSettled = false;
    let b: { status: number; json: unknown; text: string };
    try {
      b = await bcall('/v1/completions', {
        prompt: [...ids, ...kept], max_tokens: maxTokens - released, n: 1,
        temperature: r.temperature ?? 1, top_p: r.topP ?? 1,
        ...(r.seed === null ? {} : { seed: r.seed + released }),
        stop: r.stop, stop_token_ids: r.stopTokenIds, ignore_eos: r.ignoreEos, include_stop_str_in_output: r.includeStop,
        logprobs: 1, return_token_ids: true, request_id: f.id,
      });
    } finally {
      f.backendSettled = true;
    }
    if (b.status !== 200) return vllmError(500, 'InternalServerError', backendMessage(b));
    const m = (b.json as { choices: BackendChoice[] }).choices[0];
    const all = [...kept, ...m.token_ids];
    const d = await bcall('/detokenize', { tokens: all });
    return {
      ...m, index: c.index, token_ids: all,
      text: (d.json as { prompt?: string } | null)?.prompt ?? '',
      logprobs: { token_logprobs: [...c.logprobs.token_logprobs.slice(0, released), ...m.logprobs.token_logprobs], tokens: [...c.logprobs.tokens.slice(0, released), ...m.logprobs.tokens] },
      weight_versions: [...(c.weight_versions ?? new Array<number>(c.token_ids.length).fill(backendVersion)).slice(0, released), ...(m.weight_versions ?? new Array<number>(m.token_ids.length).fill(backendVersion))],
    };
  }

  /** An aborted paced choice: the ids released so far, finish_reason "abort" (a choice that had
   *  finished by then keeps its own). */
  async function truncate(c: BackendChoice, released: number): Promise<BackendChoice> {
    if (c.token_ids.length <= released && c.finish_reason !== 'abort') return c;
    const n = Math.min(released, c.token_ids.length);
    const ids = c.token_ids.slice(0, n);
    const d = await bcall('/detokenize', { tokens: ids });
    return {
      ...c, token_ids: ids, finish_reason: 'abort', stop_reason: null, weight_versions: c.weight_versions?.slice(0, n),
      text: (d.json as { prompt?: string } | null)?.prompt ?? '',
      logprobs: { token_logprobs: c.logprobs.token_logprobs.slice(0, n), tokens: c.logprobs.tokens.slice(0, n) },
    };
  }

  /** [completion] serving.py _create_completion_logprobs: text_offset, token_logprobs (floored at
   *  -9999), tokens ("token_id:<id>" with return_tokens_as_token_ids) and top_logprobs. */
  function completionLogprobs(c: BackendChoice, asIds: boolean) {
    const tokens = c.token_ids.map((t, i) => (asIds ? `token_id:${t}` : c.logprobs.tokens[i] ?? ''));
    const lps = c.logprobs.token_logprobs.map((x) => Math.max(x, -9999));
    const offsets: number[] = [];
    for (let i = 0; i < tokens.length; i++) offsets.push(i === 0 ? 0 : offsets[i - 1] + tokens[i - 1].length);
    return { text_offset: offsets, token_logprobs: lps, tokens, top_logprobs: tokens.map((t, i) => ({ [t]: lps[i] })) };
  }

  // ---------------------------------------------------------------- routes

  /** [metrics] vLLM's families only (vllm:*), one sample per engine core: labels model_name, engine.
   *  A request the double is still releasing counts as running. */
  async function metrics(): Promise<HttpReply> {
    const b = await bcall('/metrics');
    const waiting = Math.max(0, Number(/^vllm:num_requests_waiting(?:\{[^}]*\})?\s+(\S+)/m.exec(b.text)?.[1] ?? 0));
    const running = Math.max(Number(/^vllm:num_requests_running(?:\{[^}]*\})?\s+(\S+)/m.exec(b.text)?.[1] ?? 0), flights.size - waiting);
    const lab = `{engine="0",model_name="${info.model}"}`;
    const lines: string[] = [];
    for (const line of b.text.split('\n')) {
      if (/^# (HELP|TYPE) vllm:/.test(line)) { lines.push(line); continue; }
      const m = /^(vllm:[a-zA-Z0-9_:]+)(?:\{[^}]*\})?\s+(\S+)$/.exec(line);
      if (!m) continue;
      const v = m[1] === 'vllm:num_requests_running' ? running : m[1] === 'vllm:num_requests_waiting' ? waiting : m[2];
      lines.push(`${m[1]}${lab} ${v}`);
    }
    return new HttpReply(200, new TextBody(`${lines.join('\n')}\n`, 'text/plain; version=0.0.4; charset=utf-8'));
  }

  /** [rl] POST /pause?mode=abort|wait|keep&clear_cache=true → {status: "paused"}. */
  async function pause(url: URL): Promise<HttpReply> {
    const mode = url.searchParams.get('mode') ?? 'abort';
    if (!['abort', 'wait', 'keep'].includes(mode)) {
      return validationError([{ type: 'literal_error', loc: 'query.mode', msg: "Input should be 'abort', 'wait' or 'keep'", input: mode }]);
    }
    const cc = url.searchParams.get('clear_cache');
    let clear = true;
    if (cc !== null) {
      const c = coerce('bool', cc);
      if (!c.ok) return validationError([{ type: 'bool_parsing', loc: 'query.clear_cache', msg: 'Input should be a valid boolean, unable to interpret input', input: cc }]);
      clear = c.v === true;
    }
    // core.py pause_generation: abort and wait refuse new requests until resume; keep queues them
    if (mode !== 'keep') rejectNew = true;
    if (mode === 'wait') {
      const deadline = Date.now() + 600_000;
      while (flights.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    }
    await bcall('/pause', {});
    paused = true;
    if (mode === 'keep') for (const f of flights.values()) f.hold(loads);
    if (mode === 'abort') {
      // scheduler.finish_requests(None, FINISHED_ABORTED): every request ends, answering what it has
      const aborting = [...flights.values()];
      for (const f of aborting) f.abort();
      await bcall('/abort_requests', {});
      const deadline = Date.now() + 30_000;
      while (aborting.some((f) => flights.has(f.id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    }
    if (clear && mode !== 'keep') await bcall('/reset_prefix_cache', {});
    return new HttpReply(200, { status: 'paused' });
  }

  async function resume(): Promise<HttpReply> {
    await bcall('/resume', {});
    rejectNew = false;
    paused = false;
    const w = resumeWaiters; resumeWaiters = []; w.forEach((r) => r());
    return new HttpReply(200, { status: 'resumed' });
  }

  /** [rl] POST /abort_requests {request_ids?} → {status: "aborted", aborted: n}. */
  async function abortRequests(raw: string): Promise<HttpReply> {
    let body: unknown;
    try { body = JSON.parse(raw); } catch { return httpException(400, 'Invalid JSON format'); }
    if (!body || typeof body !== 'object' || Array.isArray(body)) return httpException(400, 'Request body must be a JSON object');
    const ids = (body as Json).request_ids;
    if (Array.isArray(ids) && ids.length) {
      // external ids (`cmpl-<request_id>-<i>`)
      for (const id of ids) flights.get(String(id))?.abort();
      return new HttpReply(200, { status: 'aborted', aborted: ids.length });
    }
    const all = [...flights.values()];
    for (const f of all) f.abort();
    return new HttpReply(200, { status: 'aborted', aborted: all.length });
  }

  /** [cache] POST /reset_prefix_cache → {success}: false while running requests hold blocks
   *  (unless reset_running_requests=true). */
  async function resetPrefixCache(url: URL): Promise<HttpReply> {
    const force = url.searchParams.get('reset_running_requests');
    const resetRunning = force !== null && coerce('bool', force).v === true;
    if (flights.size && !resetRunning) return new HttpReply(200, { success: false });
    const b = await bcall('/reset_prefix_cache', {});
    return new HttpReply(200, { success: b.status === 200 });
  }

  /** [rpc] POST /collective_rpc {method, args?, kwargs?, timeout?} → {results: [per worker]}.
   *  One worker here. floe_vllm.FloeWorkerExtension's methods (engine/floe_vllm/worker.py):
   *  floe_ping, floe_load_folder (its load goes to the backend's /update_weights). */
  async function collectiveRpc(raw: string): Promise<HttpReply> {
    let body: unknown;
    try { body = JSON.parse(raw); } catch (e) { return httpException(400, `JSON decode error: ${(e as Error).message}`); }
    if (!body || typeof body !== 'object' || Array.isArray(body)) return httpException(400, 'Request body must be a JSON object');
    const { method, args, kwargs } = body as { method?: unknown; args?: unknown; kwargs?: unknown };
    if (method === undefined || method === null) return httpException(400, "Missing 'method' in request body");
    const argv = Array.isArray(args) ? args : [];
    // a worker's exception, as the client sees it: run_method's NotImplementedError, re-raised by
    // the executor, reported by the engine core's utility call, answered by the exception handler
    const workerFailed = (err: string) => vllmError(500, 'InternalServerError', `Call to collective_rpc method failed: Worker failed with error '${err}', please check the stack trace above for the root cause`);
    const workers = opts.tensorParallel ?? 1;
    const each = <T>(r: T): T[] => Array.from({ length: workers }, () => r);
    if (method === 'reload_weights') {
      // [reload] vLLM's own worker method: weights_path (a folder in checkpoint format) or the
      // model's own path; returns None from every worker. The double's backend needs a version:
      // the folder's checkpoint.json holds floe's, else the version goes up by one.
      const kw = (kwargs && typeof kwargs === 'object' ? kwargs : {}) as { weights_path?: unknown; is_checkpoint_format?: unknown };
      const wp = kw.weights_path ?? argv[1];
      if (typeof wp !== 'string') return workerFailed('the vLLM double reloads from weights_path only (a weights_iterator cannot cross HTTP)');
      let v: number | undefined;
      try { v = (JSON.parse(fs.readFileSync(path.join(wp, 'checkpoint.json'), 'utf8')) as { version?: number }).version; } catch { v = undefined; }
      const b = await bcall('/update_weights', { path: wp, version: v ?? ++builtinReloads });
      if (b.status !== 200) return workerFailed(backendMessage(b));
      loaded(v ?? builtinReloads);
      reloads += workers;
      return new HttpReply(200, { results: each(null) });
    }
    const floe = workerExtension && (method === 'floe_ping' || method === 'floe_load_folder');
    if (!floe) return workerFailed(`Method '${String(method)}' is not implemented.`);
    if (method === 'floe_ping') return new HttpReply(200, { results: each({ floe_vllm: FLOE_VLLM_VERSION }) });
    // floe_load_folder(folder, version=None, verify=True), as engine/floe_vllm/worker.py defines it
    const folder = argv[0];
    if (typeof folder !== 'string') return workerFailed("FloeWorkerExtension.floe_load_folder() missing 1 required positional argument: 'folder'");
    const started = Date.now();
    // the folder's sidecar holds its version; a version asked for must be that one
    let meta: { version?: number; files?: Record<string, { bytes?: number }> };
    try { meta = JSON.parse(fs.readFileSync(path.join(folder, 'checkpoint.json'), 'utf8')) as typeof meta; } catch (e) { return workerFailed(`${(e as Error).message}`); }
    const asked = kwargs && typeof kwargs === 'object' ? (kwargs as { version?: unknown }).version : undefined;
    if (asked !== undefined && asked !== null && asked !== '' && meta.version !== undefined && Number(asked) !== meta.version) {
      return workerFailed(`asked for version ${String(asked)} but ${folder} holds version ${meta.version}`);
    }
    const version = asked === undefined || asked === null || asked === '' ? meta.version : Number(asked);
    if (version === undefined) return workerFailed(`no version given and ${path.join(folder, 'checkpoint.json')} has none`);
    const b = await bcall('/update_weights', { path: folder, version });
    if (b.status !== 200) return workerFailed(backendMessage(b));
    loaded(version);
    // engine/floe_vllm/worker.py loads through the worker's reload_weights, on every worker
    reloads += workers;
    const files = Object.values(meta.files ?? {});
    const ms = Date.now() - started;
    return new HttpReply(200, { results: each({ version, files: files.length, bytes: files.reduce((n, f) => n + (f.bytes ?? 0), 0), tensors: null, load_ms: ms, verify_ms: 0 }) });
  }

  // [routers] the routes that exist; dev ones only in dev mode
  type Handler = (req: http.IncomingMessage, res: http.ServerResponse, raw: string, url: URL) => Promise<HttpReply> | HttpReply;
  const routes = new Map<string, Map<string, Handler>>();
  const route = (method: string, p: string, fn: Handler) => { if (!routes.has(p)) routes.set(p, new Map()); routes.get(p)!.set(method, fn); };
  route('GET', '/health', () => new HttpReply(200, null, true)); // [health]: Response(status_code=200), no body
  route('GET', '/metrics', () => metrics());
  route('GET', '/version', () => new HttpReply(200, { version: VLLM_DOUBLE_VERSION })); // [basic]
  route('GET', '/v1/models', () => new HttpReply(200, { // [models]
    object: 'list',
    data: [{ id: info.model, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'vllm', root: info.model, parent: null, max_model_len: info.maxModelLen,
      permission: [{ id: `modelperm-${randomUUID().replace(/-/g, '')}`, object: 'model_permission', created: Math.floor(Date.now() / 1000), allow_create_engine: false, allow_sampling: true, allow_logprobs: true, allow_search_indices: false, allow_view: true, allow_fine_tuning: false, organization: '*', group: null, is_blocking: false }] }],
  }));
  route('POST', '/v1/completions', (req, res, raw) => completions(req, res, raw));
  if (devMode) {
    route('POST', '/pause', (_q, _s, _r, url) => pause(url));
    route('POST', '/resume', () => resume());
    route('GET', '/is_paused', () => new HttpReply(200, { is_paused: paused }));
    route('POST', '/abort_requests', (_q, _s, raw) => abortRequests(raw));
    route('POST', '/reset_prefix_cache', (_q, _s, _r, url) => resetPrefixCache(url));
    route('POST', '/collective_rpc', (_q, _s, raw) => collectiveRpc(raw));
    // [rl] POST /update_weight_version {new_version} → {success, new_version}; GET /weight_info → {weight_version}
    route('POST', '/update_weight_version', (_q, _s, raw) => {
      let b: unknown = null;
      try { b = JSON.parse(raw); } catch { /* validated below */ }
      const nv = (b as { new_version?: unknown } | null)?.new_version;
      if (typeof nv !== 'string') return validationError([{ type: 'missing', loc: "('body', 'new_version')", msg: 'Field required', input: null }]);
      weightVersion = nv;
      labels.set(backendVersion, nv);
      return new HttpReply(200, { success: true, new_version: weightVersion });
    });
    route('GET', '/weight_info', () => new HttpReply(200, { weight_version: weightVersion }));
    // a worker's exception through collective_rpc, as the API server answers it (a 500)
    const transferFailed = (err: string) => vllmError(500, 'InternalServerError', `Call to collective_rpc method failed: Worker failed with error '${err}', please check the stack trace above for the root cause`);
    // [transfer] rl/online/api_router.py: the native weight-transfer routes of a server launched
    // with --weight-transfer-config; the double's one worker is the backend, which joins the
    // trainer's group and receives the broadcast (engine/floe_engine/native_transfer.py)
    route('GET', '/get_world_size', () => new HttpReply(200, { world_size: opts.tensorParallel ?? 1 }));
    route('POST', '/init_weight_transfer_engine', async (_q, _s, raw) => {
      const info = ((JSON.parse(raw || '{}') as { init_info?: Record<string, unknown> }).init_info ?? {});
      // NCCLWeightTransferInitInfo (nccl_common.py): rank_offset and world_size are required
      for (const k of ['rank_offset', 'world_size'] as const) if (info[k] === undefined) return transferFailed(`Invalid init_info for NCCLWeightTransferEngine: __init__() missing 1 required keyword-only argument: '${k}'`);
      // gpu_worker.py _check_weight_transfer_engine: a server launched without --weight-transfer-config
      if (opts.weightTransfer === false) return transferFailed('Weight transfer not configured. Please set weight_transfer_config to enable weight transfer.');
      if ((opts.tensorParallel ?? 1) !== 1) return transferFailed('the vLLM double joins one worker (its backend) to a weight-transfer group');
      const b = await bcall('/weight_transfer/init', { master_address: info.master_address, master_port: info.master_port, rank: info.rank_offset, world_size: info.world_size });
      if (b.status !== 200) return transferFailed(backendMessage(b));
      transferReady = true;
      return new HttpReply(200, { message: 'Weight transfer initialized' });
    });
    route('POST', '/start_weight_update', () => { transferStarted = true; return new HttpReply(200, { message: 'Weight update started' }); });
    route('POST', '/update_weights', async (_q, _s, raw) => {
      const u = ((JSON.parse(raw || '{}') as { update_info?: { names?: string[]; dtype_names?: string[]; shapes?: number[][]; src?: number } }).update_info ?? {});
      if (!transferReady) return transferFailed('NCCL weight transfer not initialized. Call init_transfer_engine() first.');
      if (!transferStarted) return transferFailed('start_weight_update() must be called before update_weights()');
      const next = Math.max(backendVersion, ...labels.keys()) + 1;
      const b = await bcall('/weight_transfer/receive', { names: u.names ?? [], dtype_names: u.dtype_names ?? [], shapes: u.shapes ?? [], src: u.src ?? 0, version: next });
      if (b.status !== 200) return transferFailed(backendMessage(b));
      loaded(next);
      reloads += 1;
      return new HttpReply(200, { message: 'Weights updated' });
    });
    route('POST', '/finish_weight_update', (_q, _s, raw) => {
      transferStarted = false;
      const wv = (JSON.parse(raw || '{}') as { weight_version?: unknown }).weight_version;
      if (typeof wv === 'string') { weightVersion = wv; labels.set(backendVersion, wv); }
      return new HttpReply(200, { message: 'Weight update finished' });
    });
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://double');
    let parsed: unknown = raw;
    try { parsed = raw.trim() ? JSON.parse(raw) : null; } catch { /* kept as text */ }
    requests.push({ method: req.method ?? 'GET', route: `${url.pathname}${url.search}`, body: parsed });
    const byMethod = routes.get(url.pathname);
    const fn = byMethod?.get(req.method ?? 'GET');
    let reply: HttpReply;
    // [auth] AuthenticationMiddleware: GUARDED_PREFIX only, OPTIONS passes
    const guarded = ['/v1', '/v2', '/inference', '/cohere'].some((g) => url.pathname.startsWith(g)) && req.method !== 'OPTIONS';
    if (opts.apiKey && guarded && req.headers.authorization !== `Bearer ${opts.apiKey}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'Unauthorized' }));
      return;
    }
    try {
      reply = !byMethod ? NOT_FOUND : !fn ? METHOD_NOT_ALLOWED : await fn(req, res, raw, url);
    } catch (e) {
      reply = vllmError(500, 'InternalServerError', (e as Error).message);
    }
    if (res.destroyed || res.writableEnded) return;
    if (reply.empty) {
      res.writeHead(reply.status, { 'content-length': '0' }).end();
    } else if (reply.body instanceof TextBody) {
      res.writeHead(reply.status, { 'content-type': reply.body.contentType }).end(reply.body.text);
    } else {
      res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body));
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => { if (!res.destroyed) res.destroy(); });
  });
  server.on('connection', (s) => { sockets.add(s); s.once('close', () => sockets.delete(s)); });
  const listen = (port: number) => new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => { server.off('error', reject); resolve((server.address() as AddressInfo).port); });
  });
  const stop = () => new Promise<void>((resolve) => {
    for (const f of flights.values()) f.abort();
    server.close(() => resolve());
    for (const s of sockets) s.destroy();
    server.closeAllConnections();
  });
  const port = await listen(opts.port ?? 0);

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    get reloads() { return reloads; },
    async restart(o = {}) {
      if (down) throw new Error('vLLM double: restart while already down');
      down = true;
      const t0 = Date.now();
      try {
        await stop();
        flights.clear();
        // a restarted vLLM has no requests, is not paused, and serves its launch weights
        await bcall('/abort_requests', {});
        await bcall('/resume', {});
        rejectNew = false;
        paused = false;
        { const w = resumeWaiters; resumeWaiters = []; w.forEach((r) => r()); }
        weightVersion = 'default';
        backendVersion = 0;
        labels = new Map([[0, weightVersion]]);
        transferReady = false; // a new process has no weight-transfer group
        transferStarted = false;
        if (opts.launchCheckpoint) {
          const b = await bcall('/update_weights', { path: opts.launchCheckpoint, version: 0 });
          if (b.status !== 200) throw new Error(`vLLM double: resetting the backend to ${opts.launchCheckpoint}: HTTP ${b.status}: ${backendMessage(b)}`);
        }
        await new Promise((r) => setTimeout(r, Math.max(0, (o.downMs ?? 0) - (Date.now() - t0))));
        await listen(port);
      } finally {
        down = false;
      }
    },
    async close() {
      if (!down) await stop();
      if (paused) await bcall('/resume', {}).catch(() => undefined);
    },
  };
}

