import { randomUUID } from 'node:crypto';
import { fitRequest } from '../../core/requestFit.js';
import {
  EngineHttpError, engineHttp, engineJson, promGauge, reportedContextLength,
  type EngineAdapter, type EngineEndpoint, type EngineKind, type EngineLoad, type FinishReason,
  type GenerateRequest, type GenerateResult, type HttpOptions, type LabelSpan, type ProbeVerdict, type TransferGroup, type TransferMetadata, type UpdateMode,
} from './adapter.js';

/** The adapter for a vLLM OpenAI-compatible server (`vllm serve`), pinned to vLLM 0.34.0.
 *
 *  Read from the release itself: the PyPI wheel vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl
 *  (its vllm/_version.py: commit g62d4bc3c7). Files, as paths inside that wheel:
 *  - vllm/entrypoints/launchers/api_server/routers.py: the dev routers (cache, rpc, sleep,
 *    server_info) and the RL router (pause, resume, is_paused, abort_requests) are registered
 *    only when VLLM_SERVER_DEV_MODE=1; without it those paths answer FastAPI's 404.
 *  - vllm/entrypoints/openai/completion/protocol.py, serving.py: POST /v1/completions;
 *    vllm/entrypoints/serve/utils/api_utils.py (get_max_tokens: the clamp to the context) and
 *    vllm/sampling_params.py ("max_tokens must be at least 1").
 *  - vllm/entrypoints/openai/models/serving.py: GET /v1/models → data[].max_model_len.
 *  - vllm/entrypoints/rl/online/api_router.py: /pause (mode, clear_cache), /resume, /is_paused,
 *    /abort_requests, /update_weight_version, /weight_info.
 *  - vllm/entrypoints/serve/dev/cache/api_router.py: /reset_prefix_cache (reset_running_requests, reset_external).
 *  - vllm/entrypoints/serve/dev/rpc/api_router.py: /collective_rpc.
 *  - vllm/entrypoints/serve/instrumentator/health.py, metrics.py: /health, /metrics.
 *  - vllm/entrypoints/serve/middleware/authenticate.py: --api-key guards /v1 routes only.
 *  - vllm/v1/worker/gpu_worker.py (reload_weights) → vllm/model_executor/model_loader/reload/:
 *    the worker extension loads through it.
 *  - vllm/v1/engine/output_processor.py, async_llm.py, core.py: request ids, abort, pause.
 *
 *  The server a user starts (floe_vllm is engine/'s worker extension, installed into vLLM's env):
 *
 *      VLLM_SERVER_DEV_MODE=1 vllm serve <model folder> \
 *          --worker-extension-cls floe_vllm.FloeWorkerExtension [--port 8000 ...]
 *
 *  and leaves --logprobs-mode at its default, raw_logprobs (vllm/config/model.py): the
 *  log-probs of the model's own distribution before temperature / top-p, which is what
 *  floe's trainer recomputes. */

export const VLLM_PINNED_VERSION = '0.34.0';

/** What to change on the server when a capability is missing. */
export const VLLM_FIX = {
  devMode: 'start vLLM with VLLM_SERVER_DEV_MODE=1 (its /pause, /resume, /abort_requests, /reset_prefix_cache and /collective_rpc exist only in dev mode)',
  extension: "--worker-extension-cls floe_vllm.FloeWorkerExtension (pip install the engine/ package into vLLM's env)",
  /** 0.34.0 is the release this adapter was written against; older releases were not checked. */
  version: `vLLM >= ${VLLM_PINNED_VERSION}`,
  generate: 'serve a generative model (vLLM registers /v1/completions only for models that generate)',
  weightTransfer: `launch vLLM with --weight-transfer-config '{"backend": "nccl"}' for engines.weightTransfer 'broadcast' (or set it to 'disk')`,
} as const;

/** A choice of vLLM's non-streaming completion (CompletionResponseChoice in
 *  vllm/entrypoints/openai/completion/protocol.py). `weight_versions` is vLLM's optional
 *  list of version spans (null unless return_weight_versions); the reference engine puts
 *  one version per token there. */
export interface CompletionChoice {
  index?: number;
  text?: string;
  finish_reason?: string | null;
  stop_reason?: number | string | null;
  token_ids?: number[] | null;
  prompt_token_ids?: number[] | null;
  logprobs?: { token_logprobs?: (number | null)[]; tokens?: string[] } | null;
  weight_versions?: unknown;
}

export interface CompletionResponse { id?: string; object?: string; model?: string; choices?: CompletionChoice[] }

const isInt = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x);

/** The message of a server's error body (vLLM: {error: {message}}; FastAPI: {detail}), or the text. */
function errorDetail(err: EngineHttpError): string {
  const prefix = `engine ${err.engineId}: ${err.route}: HTTP ${err.status}: `;
  const raw = err.message.startsWith(prefix) ? err.message.slice(prefix.length).replace(/ \(fix: .*\)$/s, '') : err.message;
  return raw;
}

export class VllmAdapter implements EngineAdapter {
  readonly kind: EngineKind = 'vllm';
  readonly inPlaceUpdates: boolean = false;

  constructor(readonly endpoint: EngineEndpoint) {}

  // ------------------------------------------------------------------ the server's protocol

  /** The id the engine tracks a request by, which /abort_requests takes. vLLM's completion
   *  handler submits prompt i of a request as `cmpl-<request_id>-<i>` (serving.py,
   *  `_create_completion`: request_id = f"cmpl-{base}", request_id_item = f"{request_id}-{i}";
   *  base is the X-Request-Id header or the body's request_id), and /abort_requests aborts by
   *  that external id (output_processor.py, `abort_requests`). floe sends one prompt. */
  protected engineRequestId(requestId: string): string {
    return `cmpl-${requestId}-0`;
  }

  /** The body of POST /v1/completions: token ids in, token ids and raw log-probs out, with
   *  every sampling knob floe does not use set to "off" so the model's generation_config.json
   *  cannot change the distribution (vLLM fills unset top_k / min_p / penalties from it:
   *  CompletionRequest.to_sampling_params and get_diff_sampling_param). */
  protected completionBody(req: GenerateRequest): Record<string, unknown> {
    return {
      prompt: req.promptIds, // a list of ints is one pre-tokenized prompt: nothing is tokenized or added
      max_tokens: req.maxTokens,
      temperature: req.temperature,
      top_p: req.topP,
      top_k: 0, // 0 disables (sampling_params.py)
      min_p: 0,
      repetition_penalty: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      ...(req.seed === undefined ? {} : { seed: req.seed }),
      stop_token_ids: req.stopTokenIds,
      ignore_eos: false,
      min_tokens: 0,
      n: 1,
      stream: false,
      echo: false,
      logprobs: 1, // token_logprobs[i] is the sampled id's log-prob (plus the top 1 in top_logprobs)
      return_token_ids: true, // choices[].token_ids and prompt_token_ids
      return_weight_versions: true, // choices[].weight_versions: the label of the weights that sampled each span of ids
      return_tokens_as_token_ids: true, // logprobs.tokens as "token_id:<id>": no id is detokenized alone
      skip_special_tokens: false, // the text keeps special tokens (floe reads ids; this is for humans)
      add_special_tokens: false,
      request_id: req.requestId,
      ...(req.user === undefined ? {} : { user: req.user }),
    };
  }

  /** Per-token versions from a choice: vLLM reports none per token (floe stamps them). */
  protected versionsOf(_choice: CompletionChoice, _n: number): number[] | null {
    return null;
  }

  /** The labels of vLLM's weight-version spans [{version, start, end}] (completion/protocol.py,
   *  WeightVersionSpan in vllm/outputs.py), distinct, in order; null when absent. */
  protected labelsOf(choice: CompletionChoice): string[] | null {
    const spans = choice.weight_versions;
    if (!Array.isArray(spans)) return null;
    const labels = spans.map((x) => (x && typeof x === 'object' ? (x as { version?: unknown }).version : undefined)).filter((v): v is string => typeof v === 'string');
    return [...new Set(labels)];
  }

  /** vLLM's spans as floe's: [{version, start, end}] → [{label, start, end}]; null when absent
   *  or malformed (floe then attributes the ids by its own epochs, core/weightVersions.ts). */
  protected spansOf(choice: CompletionChoice): LabelSpan[] | null {
    const spans = choice.weight_versions;
    if (!Array.isArray(spans)) return null;
    const out: LabelSpan[] = [];
    for (const x of spans) {
      const o = (x && typeof x === 'object' ? x : {}) as { version?: unknown; start?: unknown; end?: unknown };
      if (typeof o.version !== 'string' || !isInt(o.start) || !isInt(o.end)) return null;
      out.push({ label: o.version, start: o.start, end: o.end });
    }
    return out;
  }

  protected http(route: string, o: HttpOptions = {}): Promise<string> {
    return engineHttp(this.endpoint, route, o);
  }

  protected json<T>(route: string, o: HttpOptions = {}): Promise<T> {
    return engineJson<T>(this.endpoint, route, o);
  }

  /** A 500 from /collective_rpc whose method the workers lack: vLLM's run_method raises
   *  NotImplementedError("Method 'x' is not implemented.") in the worker
   *  (vllm/v1/serial_utils.py), the executor re-raises it as "Worker failed with error ..."
   *  (vllm/v1/executor/multiproc_executor.py), the engine core answers "Call to collective_rpc
   *  method failed: ..." (vllm/v1/engine/core.py) and the API server's exception handler
   *  turns that into a 500 {error: {type: InternalServerError}} (serve/exception_handling). */
  protected withExtensionFix(err: unknown): unknown {
    if (err instanceof EngineHttpError && err.status === 500 && /is not implemented/i.test(err.message)) {
      return new EngineHttpError(err.engineId, err.status, err.route, errorDetail(err), VLLM_FIX.extension);
    }
    return err;
  }

  // ------------------------------------------------------------------ EngineAdapter

  /** vLLM's GET /health answers 200 with an empty body, 503 when the engine died (health.py). */
  async health(): Promise<void> {
    await this.http('/health', { timeoutMs: 10_000 });
  }

  async contextLength(): Promise<number | null> {
    return reportedContextLength(this.endpoint);
  }

  /** max_tokens capped at what the context leaves (core/requestFit.ts): vLLM clamps it too,
   *  but a prompt exactly max_model_len long is its 400 "max_tokens must be at least 1, got 0",
   *  and SGLang does not clamp at all; one rule ends such a turn the same way on every server. */
  async generate(req: GenerateRequest, opts: { timeoutMs?: number } = {}): Promise<GenerateResult> {
    const fit = fitRequest(await this.contextLength(), req.promptIds.length, req.maxTokens);
    if (!fit.fits) throw new EngineHttpError(this.endpoint.id, 400, '/v1/completions', `prompt too long: ${fit.detail}`);
    let res: CompletionResponse;
    try {
      res = await this.complete({ ...req, maxTokens: fit.maxTokens }, opts.timeoutMs);
    } catch (err) {
      if (this.isPausedRejection(err)) return { tokenIds: [], logprobs: [], finishReason: 'abort', versions: null };
      throw err;
    }
    return this.parse(res, '/v1/completions');
  }

  /** While paused in mode abort (or wait), vLLM refuses new requests: the engine core finishes
   *  them with a retryable RequestError "Generation is paused. Please retry after it resumes."
   *  (core.py, `_reject_add_while_paused`), which the API server answers as HTTP 503
   *  ServiceUnavailableError (error_response.py). For floe that request was aborted before its
   *  first token: it is resubmitted from the same prefix like any request a pause aborted. */
  protected isPausedRejection(err: unknown): boolean {
    return err instanceof EngineHttpError && err.status === 503 && /paused/i.test(err.message);
  }

  protected complete(req: GenerateRequest, timeoutMs?: number): Promise<CompletionResponse> {
    return this.json<CompletionResponse>('/v1/completions', { body: this.completionBody(req), timeoutMs, fix: VLLM_FIX.generate });
  }

  /** The one choice of a completion, as floe's result. A request aborted by /pause?mode=abort or
   *  /abort_requests comes back as an ordinary 200 completion, finish_reason "abort", holding
   *  every id generated until then with its log-prob: the output processor emits a final output
   *  for the aborted request (output_processor.py, `abort_requests`: make_request_output with
   *  FinishReason.ABORT), and a non-streaming request's final output carries the cumulative ids
   *  (`_new_completion_output`: FINAL_ONLY takes detokenizer.output_token_ids). A matched stop
   *  id or EOS is the last of token_ids (detokenizer.py, `update`: the stop id is skipped for the
   *  text only and appended back to token_ids). */
  protected parse(res: CompletionResponse | null, route: string): GenerateResult {
    const id = this.endpoint.id;
    const choice = res?.choices?.[0];
    if (!choice) throw new EngineHttpError(id, 200, route, `the completion has no choices: ${JSON.stringify(res).slice(0, 200)}`);
    const ids = choice.token_ids;
    if (!Array.isArray(ids) || !ids.every(isInt)) {
      throw new EngineHttpError(id, 200, route, 'the choice has no token_ids (sent return_token_ids: true)', VLLM_FIX.version);
    }
    const lps = choice.logprobs?.token_logprobs;
    if (!Array.isArray(lps) || lps.length !== ids.length || !lps.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      throw new EngineHttpError(id, 200, route, `the choice has ${Array.isArray(lps) ? lps.length : 'no'} numeric logprobs.token_logprobs for ${ids.length} token_ids (sent logprobs: 1)`);
    }
    const finishReason = this.finishReason(choice.finish_reason, route);
    return { tokenIds: ids, logprobs: lps as number[], finishReason, versions: this.versionsOf(choice, ids.length), servedLabels: this.labelsOf(choice), servedSpans: this.spansOf(choice) };
  }

  /** vLLM's finish reasons (vllm/v1/engine/__init__.py, FINISH_REASON_STRINGS): stop, length,
   *  abort, error, repetition. "error" never reaches a 200 (serving.py raises GenerationError);
   *  "repetition" needs repetition_detection, which floe does not send. */
  protected finishReason(r: string | null | undefined, route: string): FinishReason {
    if (r === 'stop' || r === 'length' || r === 'abort') return r;
    throw new EngineHttpError(this.endpoint.id, 200, route, `unexpected finish_reason ${JSON.stringify(r)}`);
  }

  /** floe_load_folder (engine/floe_vllm, the worker extension) checks the folder against its
   *  checkpoint.json and loads its safetensors into every worker, through POST /collective_rpc
   *  {method, args, kwargs, timeout} (serve/dev/rpc/api_router.py: args and kwargs reach the
   *  method as given; the answer is {results: [one per worker]}). `version` makes the extension
   *  refuse a folder that holds another version; vLLM itself keeps no version of floe's. */
  async loadWeights(folder: string, version: number, opts: { keepCache?: boolean; verified?: boolean; keepRequests?: boolean } = {}): Promise<{ loadMs: number }> {
    const started = Date.now();
    let r: { results?: unknown[] } | null;
    // every tensor-parallel worker runs floe_load_folder and would hash the whole folder again;
    // a folder the caller verified on this node is loaded with verify=False (a resync from a
    // control worker elsewhere has not verified it: the workers do)
    const kwargs = opts.verified === true ? { version, verify: false } : { version };
    try {
      r = await this.json('/collective_rpc', { body: { method: 'floe_load_folder', args: [folder], kwargs }, timeoutMs: 30 * 60_000, fix: VLLM_FIX.devMode });
    } catch (err) {
      throw this.withExtensionFix(err);
    }
    // label the weights: every output from now on carries it in weight_versions, and a restarted
    // server answers with its launch label ("default", v1/engine/core.py) instead
    // (rl/online/api_router.py: POST /update_weight_version {new_version})
    await this.http('/update_weight_version', { body: { new_version: String(version) }, timeoutMs: 60_000, fix: VLLM_FIX.devMode });
    // each worker answers {version, files, bytes, tensors, load_ms, verify_ms}: the slowest one's load_ms
    const ms = (r?.results ?? []).map((x) => (x && typeof x === 'object' ? (x as { load_ms?: unknown }).load_ms : undefined)).filter((x): x is number => typeof x === 'number');
    return { loadMs: ms.length ? Math.max(...ms) : Date.now() - started };
  }

  // ------------------------------------------------------------ native weight transfer
  // vllm/entrypoints/rl/online/api_router.py (dev mode, and a server launched with
  // --weight-transfer-config '{"backend": "nccl"}': vllm/config/weight_transfer.py) →
  // vllm/distributed/weight_transfer/nccl_engine.py, whose receive_weights (unpacked) takes one
  // broadcast per tensor from rank `src`, in the order of update_info.names.

  /** GET /get_world_size?include_dp=false → {world_size}: the workers (TP × PP) that join. */
  async transferWorkers(): Promise<number> {
    const r = await this.json<{ world_size?: unknown } | null>('/get_world_size', { query: { include_dp: 'false' }, timeoutMs: 10_000, fix: VLLM_FIX.devMode });
    if (!isInt(r?.world_size) || r.world_size < 1) throw new EngineHttpError(this.endpoint.id, 200, '/get_world_size', `answered ${JSON.stringify(r)}, not {"world_size": <n>}`, VLLM_FIX.version);
    return r.world_size;
  }

  /** POST /init_weight_transfer_engine {init_info: {master_address, master_port, rank_offset, world_size}}
   *  (NCCLWeightTransferInitInfo, vllm/distributed/weight_transfer/nccl_common.py); answers once every
   *  worker joined the group. */
  async joinTransferGroup(g: TransferGroup): Promise<void> {
    try {
      await this.http('/init_weight_transfer_engine', {
        body: { init_info: { master_address: g.masterAddress, master_port: g.masterPort, rank_offset: g.rankOffset, world_size: g.worldSize } },
        timeoutMs: 10 * 60_000, fix: VLLM_FIX.devMode,
      });
    } catch (err) {
      // gpu_worker.py _check_weight_transfer_engine, through collective_rpc: a 500
      if (err instanceof EngineHttpError && /Weight transfer not configured/.test(err.message)) {
        throw new EngineHttpError(err.engineId, err.status, err.route, errorDetail(err), VLLM_FIX.weightTransfer);
      }
      throw err;
    }
  }

  /** /start_weight_update, /update_weights {update_info: {names, dtype_names, shapes, src: 0}}
   *  (NCCLWeightTransferUpdateInfo) while the trainer broadcasts, then /finish_weight_update
   *  {weight_version}: the label every output carries from now on, as after a disk load. */
  async receiveWeights(meta: TransferMetadata, version: number): Promise<{ loadMs: number }> {
    const started = Date.now();
    const fix = VLLM_FIX.devMode;
    await this.http('/start_weight_update', { method: 'POST', timeoutMs: 60_000, fix });
    await this.http('/update_weights', { body: { update_info: { names: meta.names, dtype_names: meta.dtype_names, shapes: meta.shapes, src: 0 } }, timeoutMs: 30 * 60_000, fix });
    await this.http('/finish_weight_update', { body: { weight_version: String(version) }, timeoutMs: 10 * 60_000, fix });
    return { loadMs: Date.now() - started };
  }

  /** POST /pause?mode=abort&clear_cache=false: every request in flight is aborted (each answers
   *  finish_reason "abort" with its ids so far) and new ones are refused with 503 until /resume
   *  (rl/online/api_router.py; async_llm.py, `pause_generation`; core.py, `pause_scheduler`).
   *  clear_cache is sent, false: its default (true, marked deprecated, vLLM RFC #32103) would
   *  flush the caches at every pause, so recipe.cacheRebuild off would not keep them on vLLM as it
   *  does on the other engines; floe flushes in its own step (flushCache) when the recipe says
   *  so. Answers {status: "paused"}.
   *  Mode keep (engines.updateMode 'keep'): the scheduler stops stepping with every request kept
   *  and queues new ones (core.py pause_scheduler: PAUSED_ALL; clear_cache is ignored); after the
   *  load, flushCache({running: true}) preempts the running requests so their K/V is recomputed
   *  under the new weights, and the output processor starts a new weight-version span at the
   *  first id generated after resume (output_processor.py track_weight_version). */
  async pause(mode: UpdateMode = 'abort'): Promise<void> {
    await this.http('/pause', { method: 'POST', query: { mode, clear_cache: 'false' }, timeoutMs: 120_000, fix: VLLM_FIX.devMode });
  }

  /** POST /resume → {status: "resumed"}. */
  async resume(): Promise<void> {
    await this.http('/resume', { method: 'POST', timeoutMs: 60_000, fix: VLLM_FIX.devMode });
  }

  /** POST /abort_requests {request_ids} (all when absent). The route reads a JSON body, so one
   *  is always sent (an empty body is a 400 "Invalid JSON format"); an empty or missing
   *  request_ids aborts everything, so an empty list here sends nothing. Answers
   *  {status: "aborted", aborted: <ids asked for>}; unknown ids are not an error. */
  async abort(requestIds?: string[]): Promise<void> {
    if (requestIds && requestIds.length === 0) return;
    const body = requestIds ? { request_ids: requestIds.map((r) => this.engineRequestId(r)) } : {};
    await this.http('/abort_requests', { body, timeoutMs: 60_000, fix: VLLM_FIX.devMode });
  }

  /** POST /reset_prefix_cache → {success}: false while blocks are still held (by running
   *  requests or KV offload transfers; the route's docstring says to retry). After a pause in
   *  mode abort nothing holds them, so a refusal is retried for a few seconds. `running` (after a
   *  pause in mode keep): reset_running_requests=true preempts every running request back to the
   *  waiting queue (sched/scheduler.py reset_prefix_cache: _preempt_request), so none holds a
   *  block and its K/V is recomputed, ids kept, when the scheduler runs it again. */
  async flushCache(opts: { running?: boolean } = {}): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (await this.resetPrefixCacheOnce(opts.running === true)) return;
      if (Date.now() > deadline) {
        throw new EngineHttpError(this.endpoint.id, 200, '/reset_prefix_cache', 'the server refused to reset its prefix cache for 10 s ({"success": false}: blocks are still held by running requests)');
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** reset_external=true: the connector-managed prefix cache (LMCache, offloaded KV) holds K/V
   *  the old weights computed too, and its default is false (dev/cache/api_router.py). */
  protected async resetPrefixCacheOnce(running = false): Promise<boolean> {
    const query: Record<string, string> = running ? { reset_running_requests: 'true', reset_external: 'true' } : { reset_external: 'true' };
    const r = await this.json<{ success?: boolean } | null>('/reset_prefix_cache', { method: 'POST', query, timeoutMs: 60_000, fix: VLLM_FIX.devMode });
    return r?.success === true;
  }

  /** vLLM's scheduler gauges, one sample per engine core, labelled model_name and engine
   *  (vllm/v1/metrics/loggers.py); summed over the samples. */
  async load(): Promise<EngineLoad> {
    const text = await this.http('/metrics', { timeoutMs: 10_000 });
    const running = promGauge(text, 'vllm:num_requests_running');
    const waiting = promGauge(text, 'vllm:num_requests_waiting');
    for (const [name, v] of [['vllm:num_requests_running', running], ['vllm:num_requests_waiting', waiting]] as const) {
      if (v === null) throw new EngineHttpError(this.endpoint.id, 200, '/metrics', `the Prometheus exposition has no sample of ${name}`, 'point the endpoint at the vLLM server itself (its /metrics, not a proxy that filters it)');
    }
    return { running: running!, waiting: waiting! };
  }

  /** Whether the server is paused; null when it cannot say. vLLM: GET /is_paused → {is_paused}. */
  protected async isPaused(): Promise<boolean | null> {
    const r = await this.json<{ is_paused?: boolean } | null>('/is_paused', { timeoutMs: 10_000, fix: VLLM_FIX.devMode });
    return typeof r?.is_paused === 'boolean' ? r.is_paused : null;
  }

  /** The load_weights check, without loading anything: the worker extension's floe_ping answers
   *  {"floe_vllm": "<version>"} from each worker. */
  protected async probeLoadWeights(): Promise<ProbeVerdict> {
    try {
      const r = await this.json<{ results?: unknown[] } | null>('/collective_rpc', { body: { method: 'floe_ping', args: [], kwargs: {} }, timeoutMs: 30_000, fix: VLLM_FIX.devMode });
      const results = r?.results ?? [];
      const versions = results.map((x) => (x && typeof x === 'object' ? (x as { floe_vllm?: unknown }).floe_vllm : undefined));
      if (results.length === 0 || !versions.every((v) => typeof v === 'string')) {
        return { capability: 'load_weights', ok: false, detail: `collective_rpc floe_ping answered ${JSON.stringify(r).slice(0, 200)}, not {"results": [{"floe_vllm": "<version>"}, ...]}`, fix: VLLM_FIX.extension };
      }
      // floe labels each version it loads (POST /update_weight_version); GET /weight_info is its pair
      const label = await this.json<{ weight_version?: unknown } | null>('/weight_info', { timeoutMs: 10_000, fix: VLLM_FIX.version });
      return { capability: 'load_weights', ok: true, detail: `collective_rpc floe_ping: floe_vllm ${[...new Set(versions)].join(', ')} on ${results.length} worker(s); weight_info ${JSON.stringify(label?.weight_version ?? null)}` };
    } catch (err) {
      return verdictOf('load_weights', this.withExtensionFix(err));
    }
  }

  /** vLLM reports no per-token versions: optional, floe stamps them. */
  protected weightVersionsVerdict(choice: CompletionChoice | undefined, n: number): ProbeVerdict {
    const v = choice ? this.versionsOf(choice, n) : null;
    if (v) return { capability: 'weight_versions', ok: true, detail: `one version per token (${v.join(', ')})`, optional: true };
    return { capability: 'weight_versions', ok: false, optional: true, detail: 'no per-token weight versions (floe stamps each id with the version it recorded for the engine)' };
  }

  async probe(): Promise<ProbeVerdict[]> {
    const out: ProbeVerdict[] = [];
    try {
      await this.health();
      out.push({ capability: 'health', ok: true, detail: 'GET /health answered 2xx' });
    } catch (err) {
      out.push(verdictOf('health', err));
      if (err instanceof EngineHttpError && err.unreachable) {
        for (const c of ['generate', 'logprobs', 'metrics', 'pause', 'resume', 'abort', 'flush_cache', 'load_weights'] as const) out.push({ capability: c, ok: false, detail: 'not checked: nothing answers', fix: err.fix });
        out.push({ capability: 'weight_versions', ok: false, optional: true, detail: 'not checked: nothing answers' });
        return out;
      }
    }

    // generate + logprobs: one id for a one-id prompt (id 0 exists in every vocabulary)
    let choice: CompletionChoice | undefined;
    let n = 0;
    const probeReq: GenerateRequest = { requestId: `floe-probe-${randomUUID()}`, promptIds: [0], maxTokens: 1, temperature: 1, topP: 1, seed: 0, stopTokenIds: [] };
    try {
      const res = await this.complete(probeReq, 60_000);
      choice = res?.choices?.[0];
      const ids = choice?.token_ids;
      if (!Array.isArray(ids) || !ids.every(isInt)) {
        out.push({ capability: 'generate', ok: false, detail: `no token_ids in the choice (${JSON.stringify(choice ?? res).slice(0, 160)})`, fix: VLLM_FIX.version });
      } else if (ids.length !== 1) {
        out.push({ capability: 'generate', ok: false, detail: `asked for 1 id, got ${ids.length} (finish_reason ${choice?.finish_reason})` });
      } else {
        n = 1;
        out.push({ capability: 'generate', ok: true, detail: `1 id back for a 1-id prompt (id ${ids[0]}, finish_reason ${choice?.finish_reason})` });
      }
      const lps = choice?.logprobs?.token_logprobs;
      if (n === 1 && Array.isArray(lps) && lps.length === 1 && typeof lps[0] === 'number' && Number.isFinite(lps[0])) {
        out.push({ capability: 'logprobs', ok: true, detail: `logprobs.token_logprobs [${lps[0].toFixed(4)}]` });
      } else {
        out.push({ capability: 'logprobs', ok: false, detail: `logprobs.token_logprobs is ${JSON.stringify(lps ?? null).slice(0, 80)} for ${n} id(s)`, fix: VLLM_FIX.version });
      }
    } catch (err) {
      out.push(verdictOf('generate', err));
      out.push({ capability: 'logprobs', ok: false, detail: 'not checked: generate failed' });
    }

    let busy: number | null = null;
    try {
      const l = await this.load();
      busy = l.running + l.waiting;
      out.push({ capability: 'metrics', ok: true, detail: `vllm:num_requests_running ${l.running}, vllm:num_requests_waiting ${l.waiting}` });
    } catch (err) {
      out.push(verdictOf('metrics', err));
    }

    // pause + resume, only on an idle server: pausing in mode abort aborts what is in flight
    if (busy === 0) {
      let paused = false;
      try {
        await this.pause();
        paused = true;
        const p = await this.isPaused().catch(() => null);
        out.push({ capability: 'pause', ok: p !== false, detail: `POST pause answered 2xx${p === null ? '' : `; paused: ${p}`}` });
      } catch (err) {
        out.push(verdictOf('pause', err));
      }
      try {
        await this.resume();
        const p = await this.isPaused().catch(() => null);
        out.push({ capability: 'resume', ok: p !== true, detail: `POST resume answered 2xx${p === null ? '' : `; paused: ${p}`}` });
      } catch (err) {
        out.push(verdictOf('resume', err, paused ? 'the server was paused by this probe and may still be' : undefined));
      }
    } else {
      // busy (or no metrics): the pause routes are checked without pausing
      const why = busy === null ? 'the load is unknown' : `${busy} request(s) in flight`;
      try {
        const p = await this.isPaused();
        for (const c of ['pause', 'resume'] as const) out.push({ capability: c, ok: true, detail: `not exercised (${why}; pausing would abort them); GET is_paused answers (paused: ${p}), so the pause routes are registered` });
      } catch (err) {
        for (const c of ['pause', 'resume'] as const) out.push(verdictOf(c, err, `not exercised (${why})`));
      }
    }

    try {
      await this.abort([`floe-probe-none-${randomUUID()}`]);
      out.push({ capability: 'abort', ok: true, detail: 'POST /abort_requests answered 2xx for an id that does not exist' });
    } catch (err) {
      out.push(verdictOf('abort', err));
    }

    try {
      const ok = await this.resetPrefixCacheOnce();
      out.push({ capability: 'flush_cache', ok: true, detail: ok ? 'POST /reset_prefix_cache: success' : 'POST /reset_prefix_cache answered, success false (blocks held by running requests; floe flushes after a pause, when none are)' });
    } catch (err) {
      out.push(verdictOf('flush_cache', err));
    }

    out.push(await this.probeLoadWeights());
    out.push(this.weightVersionsVerdict(choice, n));
    return out;
  }
}

/** A failed check as a verdict: the error's text, and its fix where it has one. */
export function verdictOf(capability: ProbeVerdict['capability'], err: unknown, note?: string): ProbeVerdict {
  const msg = err instanceof Error ? err.message : String(err);
  const fix = err instanceof EngineHttpError ? err.fix : undefined;
  return { capability, ok: false, detail: note ? `${note}: ${msg}` : msg, ...(fix ? { fix } : {}) };
}
