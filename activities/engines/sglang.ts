import { randomUUID } from 'node:crypto';
import { fitRequest } from '../../core/requestFit.js';
import {
  EngineHttpError, engineHttp, engineJson, reportedContextLength,
  type EngineAdapter, type EngineEndpoint, type EngineKind, type EngineLoad, type FinishReason, type GenerateRequest, type GenerateResult, type LabelSpan, type ProbeVerdict, type TransferGroup, type TransferMetadata, type UpdateMode,
} from './adapter.js';

/** SGLang's native HTTP surface, as release v0.5.23 of sgl-project/sglang defines it (read
 *  from the published sglang==0.5.23 distribution, file by file; its sglang/_version.py
 *  records no commit id, so the release tag v0.5.23 is the pin). Files read:
 *    python/sglang/srt/entrypoints/http_server.py      the routes and what each answers
 *    python/sglang/srt/entrypoints/api_contract.py     + python/sglang/api/v1/api_types.py:
 *                                                      the /generate JSON contract (unknown
 *                                                      sampling_params keys are refused: 400)
 *    python/sglang/srt/managers/io_struct.py           GenerateReqInput, UpdateWeightFromDiskReqInput,
 *                                                      PauseGenerationReqInput, AbortReq
 *    python/sglang/srt/managers/tokenizer_manager.py   generate_request, the pause gate, abort,
 *                                                      the response dict and its meta_info
 *    python/sglang/srt/managers/schedule_batch.py      finish reasons; Req.output_ids_through_stop
 *    python/sglang/srt/managers/detokenizer_manager.py trim_matched_stop (text only)
 *    python/sglang/srt/managers/scheduler.py           abort_request, flush_cache, logprob_start_len
 *    python/sglang/srt/managers/scheduler_components/  weight_updater.py, flush_wrapper.py,
 *                                                      output_streamer.py, metrics_reporter.py
 *    python/sglang/srt/observability/metrics_collector.py  sglang:num_running_reqs / num_queue_reqs
 *
 *    python/sglang/srt/layers/sampler.py               log-probs of sampled ids: log_softmax(logits / T)
 *                                                      unless SGLANG_RETURN_ORIGINAL_LOGPROB=1
 *    python/sglang/srt/environ.py                      SGLANG_RETURN_ORIGINAL_LOGPROB (default off),
 *                                                      SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION (default on)
 *    python/sglang/srt/utils/auth.py                   --api-key: Bearer token on every route but /health*, /metrics
 *
 *  The server floe drives (docs/guides/engines.md):
 *    SGLANG_RETURN_ORIGINAL_LOGPROB=1 SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 \
 *    python -m sglang.launch_server --model-path <HF folder> --host 0.0.0.0 --port 30000 \
 *        --enable-metrics [--weight-version 0] [--enable-deterministic-inference] [--api-key <key>]
 *  SGLANG_RETURN_ORIGINAL_LOGPROB=1: the log-probs of the model's own distribution, which the
 *  trainer recomputes (without it, at any temperature but 0 and 1 they are temperature-scaled and
 *  every importance ratio is off; `floe engine probe` checks it). SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0:
 *  /health answers without a generation that waits behind a pause or a long prefill and turns
 *  the server UnHealthy after 20 s (http_server.py health_generate; sglang #22511). --enable-metrics
 *  mounts /metrics (floe's router reads load from it); without --enable-deterministic-inference
 *  SGLang ignores sampling_seed. floe owns the versions:
 *  SGLang has no in-place rebuild of running requests, so floe pauses (which aborts them),
 *  loads, flushes, resumes and resubmits each aborted request from its exact token prefix. */

export const SGLANG_VERSION = '0.5.23';
/** The name floe gives its weight-transfer group on an SGLang server. */
const TRANSFER_GROUP = 'floe_weight_transfer';
const NEEDS = `SGLang ${SGLANG_VERSION} (pip install "sglang==${SGLANG_VERSION}"; python -m sglang.launch_server ... --enable-metrics)`;
const METRICS_FIX = 'launch SGLang with --enable-metrics (python -m sglang.launch_server ... --enable-metrics): without it /metrics is not mounted';
/** The launch-line fix for temperature-scaled log-probs (sampler.py). */
export const ORIGINAL_LOGPROB_FIX = 'launch SGLang with SGLANG_RETURN_ORIGINAL_LOGPROB=1 in its environment (SGLANG_RETURN_ORIGINAL_LOGPROB=1 python -m sglang.launch_server ...): without it the log-probs of sampled ids are log_softmax(logits / temperature), not the policy\'s, and every importance ratio is off';
/** How far apart the two scores of one token may be and still be the same number (bf16 kernels
 *  of prefill and decode differ in the last bits); temperature 0.5 moves a log-prob of a
 *  non-argmax token by far more (it doubles it before renormalising). */
const LOGPROB_TOLERANCE = 0.05;
/** /flush_cache?timeout=S waits up to S seconds for the scheduler to go idle
 *  (scheduler_components/flush_wrapper.py); an older server ignores the query. */
const FLUSH_WAIT_S = 30;
/** GET /health runs a one-token generation (unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0)
 *  and waits up to SGLANG_HEALTH_CHECK_TIMEOUT (20 s) for the scheduler to answer
 *  (http_server.py health_generate); that generation waits behind a pause and a long prefill.
 *  floe gives it this long, then asks GET /model_info, which the HTTP server answers from the
 *  tokenizer manager's state without the scheduler: an answer there is a live server that is
 *  paused or busy, not a dead one (a hung scheduler is SGLang's own watchdog's to kill:
 *  --watchdog-timeout takes the whole server down). */
const HEALTH_TIMEOUT_MS = 5_000;
const PROBE_HEALTH_TIMEOUT_MS = 30_000;

/** meta_info.finish_reason: BaseFinishReason.to_json() (schedule_batch.py) or, for a request
 *  aborted while queued, the tokenizer manager's {type: 'abort', message}. */
interface SglangFinish {
  type: string;
  /** stop: the matched stop id (FINISH_MATCHED_TOKEN) or stop string (FINISH_MATCHED_STR). */
  matched?: number | string | number[] | null;
  length?: number;
  message?: string;
  status_code?: number | null;
}

/** One finished /generate answer (tokenizer_manager.py _handle_batch_output / _handle_abort_req). */
interface SglangGenerateResponse {
  text?: string;
  /** Every generated id, the matched stop id included (Req.output_ids_through_stop: "Stop
   *  position is included"); the detokenizer trims the stop only from `text`. */
  output_ids?: number[];
  meta_info?: {
    id?: string;
    finish_reason?: SglangFinish | null;
    prompt_tokens?: number;
    completion_tokens?: number;
    /** [logprob, token_id, text|null] per generated id (return_logprob with logprob_start_len -1). */
    output_token_logprobs?: [number | null, number, string | null][];
    /** The server's weight version when the request finished (--weight-version, then each
     *  update's weight_version); 0.5.23 also sends weight_versions spans [{version, start, end}]. */
    weight_version?: string;
    weight_versions?: { version: string; start: number; end: number }[];
  };
}

interface UpdateWeightsAnswer { success?: boolean; message?: string; num_paused_requests?: number }

/** One gauge's samples, summed over DP ranks: the first TP/PP rank only (the others repeat
 *  the same batch under --enable-metrics-for-all-schedulers) and, under priority scheduling,
 *  only the total (priority="", metrics_collector.py _log_gauge_queue_count). Null when the
 *  exposition has no sample of it. */
export function sglangGauge(metrics: string, name: string): number | null {
  let sum: number | null = null;
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([^\s{]+)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = new Map<string, string>();
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels.set(l[1], l[2]);
    if ((labels.get('tp_rank') ?? '0') !== '0' || (labels.get('pp_rank') ?? '0') !== '0' || (labels.get('priority') ?? '') !== '') continue;
    const v = Number(m[3]);
    sum = (sum ?? 0) + (Number.isFinite(v) ? v : 0);
  }
  return sum;
}

/** The weight_version labels that sampled an answer: the spans over its ids
 *  (meta_info.weight_versions, utils/weight_versions.py), else the one string
 *  (meta_info.weight_version); floe loads each version as weight_version String(version). */
function labelsOf(meta: { weight_version?: string; weight_versions?: { version: string }[] }): string[] | null {
  if (Array.isArray(meta.weight_versions) && meta.weight_versions.length) return [...new Set(meta.weight_versions.map((w) => w.version))];
  return typeof meta.weight_version === 'string' ? [meta.weight_version] : null;
}

/** The spans as floe's [{label, start, end}] (utils/weight_versions.py add_weight_versions_to_meta_info:
 *  objects, clipped to the ids returned); a server that sends only the one string covers every
 *  id with it; null when it sends neither or a malformed span. */
function spansOf(meta: { weight_version?: string; weight_versions?: unknown }, n: number): LabelSpan[] | null {
  if (Array.isArray(meta.weight_versions)) {
    const out: LabelSpan[] = [];
    for (const x of meta.weight_versions) {
      const o = (x && typeof x === 'object' ? x : {}) as { version?: unknown; start?: unknown; end?: unknown };
      if (typeof o.version !== 'string' || !Number.isInteger(o.start) || !Number.isInteger(o.end)) return null;
      out.push({ label: o.version, start: o.start as number, end: o.end as number });
    }
    return out;
  }
  return typeof meta.weight_version === 'string' ? [{ label: meta.weight_version, start: 0, end: n }] : null;
}

export class SglangAdapter implements EngineAdapter {
  readonly kind: EngineKind = 'sglang';
  readonly inPlaceUpdates = false;

  constructor(readonly endpoint: EngineEndpoint) {}

  async health(): Promise<void> {
    // 200 with an empty body is healthy; 503 while starting, shutting down, or when the
    // one-token health generation got no answer in time (it waits behind a pause)
    try {
      await engineHttp(this.endpoint, '/health', { timeoutMs: HEALTH_TIMEOUT_MS });
    } catch (err) {
      if (!(err instanceof EngineHttpError) || (err.status !== 503 && !err.timedOut)) throw err;
      // the health generation is waiting (a pause, a long prefill): is the server itself there?
      try {
        await engineHttp(this.endpoint, '/model_info', { timeoutMs: 10_000 });
      } catch {
        throw err;
      }
    }
  }

  async contextLength(): Promise<number | null> {
    return reportedContextLength(this.endpoint);
  }

  /** max_new_tokens capped at what the context leaves (core/requestFit.ts): SGLang refuses
   *  prompt + max_new_tokens over its context with a 400 instead of clamping. */
  async generate(req: GenerateRequest, opts: { timeoutMs?: number } = {}): Promise<GenerateResult> {
    const fit = fitRequest(await this.contextLength(), req.promptIds.length, req.maxTokens);
    if (!fit.fits) throw new EngineHttpError(this.endpoint.id, 400, '/generate', `prompt too long: ${fit.detail}`);
    const res = await engineJson<SglangGenerateResponse>(this.endpoint, '/generate', {
      body: this.generateBody({ ...req, maxTokens: fit.maxTokens }),
      timeoutMs: opts.timeoutMs ?? 300_000,
      fix: `/generate is SGLang's native route: ${NEEDS}`,
    });
    return this.toResult(res);
  }

  /** POST /generate (io_struct.py GenerateReqInput; sampling_params as api_types.py
   *  SamplingParams: any other key is refused with 400 "unknown field"). `req.user` has no
   *  place in SGLang's native request and is not sent. */
  generateBody(req: GenerateRequest): Record<string, unknown> {
    return {
      rid: req.requestId,
      input_ids: req.promptIds,
      sampling_params: {
        max_new_tokens: req.maxTokens,
        temperature: req.temperature,
        top_p: req.topP,
        stop_token_ids: req.stopTokenIds,
        // text only: output_ids keep every id whatever these say
        skip_special_tokens: false,
        no_stop_trim: true,
        // honoured only under --enable-deterministic-inference (sampling_batch_info.py)
        ...(req.seed === undefined ? {} : { sampling_seed: req.seed }),
      },
      return_logprob: true,
      // -1: logprobs of the generated ids only (scheduler.py sets logprob_start_len to the
      // prompt length; input_token_logprobs comes back empty)
      logprob_start_len: -1,
      stream: false,
    };
  }

  private toResult(res: SglangGenerateResponse): GenerateResult {
    const bad = (detail: string) => new EngineHttpError(this.endpoint.id, 200, '/generate', detail, NEEDS);
    const meta = res?.meta_info;
    const finish = meta?.finish_reason;
    if (!meta || !finish || typeof finish.type !== 'string') throw bad(`the answer has no meta_info.finish_reason: ${JSON.stringify(res).slice(0, 300)}`);
    const entries = meta.output_token_logprobs;
    if (!Array.isArray(entries)) throw bad('meta_info has no output_token_logprobs (return_logprob was not honoured)');
    const lpIds = entries.map((e) => e[1]);
    let ids = Array.isArray(res.output_ids) ? res.output_ids : lpIds;
    if (ids.length !== lpIds.length) {
      // SGLang 0.5.23 keeps the matched stop id in output_ids (schedule_batch.py
      // output_ids_through_stop); a server that trims it there still has it in the
      // logprob entries: take the ids from those when that is the only difference.
      const trimmedStop = finish.type === 'stop' && typeof finish.matched === 'number' && ids.length + 1 === lpIds.length
        && lpIds[lpIds.length - 1] === finish.matched && ids.every((t, i) => t === lpIds[i]);
      if (!trimmedStop) throw bad(`output_ids has ${ids.length} ids but output_token_logprobs ${lpIds.length} entries`);
      ids = lpIds;
    } else if (ids.some((t, i) => t !== lpIds[i])) {
      throw bad('output_ids and the token ids of output_token_logprobs disagree');
    }
    const logprobs = entries.map((e, i) => {
      if (typeof e[0] !== 'number' || !Number.isFinite(e[0])) throw bad(`output_token_logprobs[${i}] has no logprob (${JSON.stringify(e)})`);
      return e[0];
    });
    let finishReason: FinishReason;
    if (finish.type === 'stop' || finish.type === 'length' || finish.type === 'abort') finishReason = finish.type;
    else throw bad(`unknown finish_reason type ${JSON.stringify(finish.type)}`);
    // An abort with a status_code >= 400 (a refused prompt, a timeout) never arrives here:
    // the tokenizer manager turns it into an HTTP error (_handle_abort_finish_reason). What
    // does arrive is a plain abort (abort_request, pause_generation): the ids made so far.
    return { tokenIds: ids, logprobs, finishReason, versions: null, servedLabels: labelsOf(meta), servedSpans: spansOf(meta, ids.length) };
  }

  async loadWeights(folder: string, version: number, opts: { keepRequests?: boolean } = {}): Promise<{ loadMs: number }> {
    const started = Date.now();
    const res = await engineJson<UpdateWeightsAnswer>(this.endpoint, '/update_weights_from_disk', {
      body: {
        model_path: folder,
        // while paused the load runs at once, without the model-update lock
        // (tokenizer_manager.py update_weights_from_disk); the scheduler records the label change
        // for every request it holds (scheduler.py record_weight_version_change), so a request
        // retracted by a pause in mode retract reports a span per version
        weight_version: String(version),
        // floe pauses first (mode abort: nothing is in flight; should a load come without a pause,
        // aborting beats waiting on the model-update lock behind every running request). After a
        // pause in mode retract (engines.updateMode 'keep') the retracted requests are kept.
        abort_all_requests: opts.keepRequests !== true,
        // floe flushes itself (flushCache). SGLang's own flush after a load fails the whole
        // call ("Weights were updated, but the cache was not flushed ...") when anything is
        // queued, with the new weights already in place (weight_updater.py); without it,
        // success false always means the old weights are still served.
        flush_cache: false,
      },
      timeoutMs: 30 * 60_000,
      fix: `/update_weights_from_disk: ${NEEDS}`,
    });
    if (!res?.success) throw new EngineHttpError(this.endpoint.id, 200, '/update_weights_from_disk', `not loaded: ${res?.message ?? JSON.stringify(res)}`);
    return { loadMs: Date.now() - started };
  }

  // ------------------------------------------------------------ native weight transfer
  // http_server.py /init_weights_update_group, /begin_weight_update, /update_weights_from_distributed,
  // /end_weight_update (io_struct.py InitWeightsUpdateGroupReqInput, UpdateWeightsFromDistributedReqInput):
  // one broadcast per tensor from rank 0, in the order of names.

  /** /server_info's tp_size × pp_size: the scheduler workers that join (one DP rank). */
  async transferWorkers(): Promise<number> {
    const r = await engineJson<{ tp_size?: unknown; pp_size?: unknown } | null>(this.endpoint, '/server_info', { timeoutMs: 10_000, fix: `/server_info: ${NEEDS}` });
    const tp = typeof r?.tp_size === 'number' ? r.tp_size : 1;
    const pp = typeof r?.pp_size === 'number' ? r.pp_size : 1;
    return tp * pp;
  }

  async joinTransferGroup(g: TransferGroup): Promise<void> {
    const r = await engineJson<UpdateWeightsAnswer | null>(this.endpoint, '/init_weights_update_group', {
      body: { master_address: g.masterAddress, master_port: g.masterPort, rank_offset: g.rankOffset, world_size: g.worldSize, group_name: TRANSFER_GROUP, backend: g.backend },
      timeoutMs: 10 * 60_000, fix: `/init_weights_update_group: ${NEEDS}`,
    });
    if (r?.success === false) throw new EngineHttpError(this.endpoint.id, 200, '/init_weights_update_group', `not joined: ${r.message ?? ''}`);
  }

  /** The bracket 0.5.23 requires around a distributed update (begin … end), the update carrying
   *  the version label; nothing aborted (a pause in either mode came first). */
  async receiveWeights(meta: TransferMetadata, version: number, opts: { keepRequests?: boolean } = {}): Promise<{ loadMs: number }> {
    const started = Date.now();
    const fix = `/update_weights_from_distributed: ${NEEDS}`;
    const ok = async (route: string, body: unknown, timeoutMs: number) => {
      const r = await engineJson<UpdateWeightsAnswer | null>(this.endpoint, route, { body, timeoutMs, fix });
      if (r?.success === false) throw new EngineHttpError(this.endpoint.id, 200, route, `refused: ${r.message ?? ''}`);
    };
    await ok('/begin_weight_update', {}, 60_000);
    await ok('/update_weights_from_distributed', {
      names: meta.names, dtypes: meta.dtype_names, shapes: meta.shapes, group_name: TRANSFER_GROUP,
      flush_cache: false, abort_all_requests: opts.keepRequests !== true, weight_version: String(version),
    }, 30 * 60_000);
    await ok('/end_weight_update', {}, 10 * 60_000);
    return { loadMs: Date.now() - started };
  }

  async pause(mode: UpdateMode = 'abort'): Promise<void> {
    // mode abort: the tokenizer manager holds new requests back (they wait, and run after
    // continue_generation) and aborts every request in flight, returning once none is left
    // (tokenizer_manager.py pause_generation); each answers finish_reason abort with its ids.
    // floe's 'keep' is SGLang's mode retract (io_struct.py PauseGenerationReqInput; scheduler.py
    // pause_generation): running requests go back to the waiting queue with their ids, their K/V
    // freed, and are prefilled again under the new weights after continue_generation. (Mode
    // in_place would keep the old weights' K/V and make /flush_cache fail while they run.)
    await engineJson(this.endpoint, '/pause_generation', { body: { mode: mode === 'keep' ? 'retract' : 'abort' }, timeoutMs: 300_000, fix: `/pause_generation: ${NEEDS}` });
  }

  async resume(): Promise<void> {
    // the body is required (an empty one is a 400 "Field required"), its fields are not
    await engineJson(this.endpoint, '/continue_generation', { body: {}, timeoutMs: 120_000, fix: `/continue_generation: ${NEEDS}` });
  }

  async abort(requestIds?: string[]): Promise<void> {
    const fix = `/abort_request: ${NEEDS}`;
    if (!requestIds) {
      await engineHttp(this.endpoint, '/abort_request', { body: { abort_all: true }, fix });
      return;
    }
    // One rid a call. The scheduler aborts every request whose rid starts with it
    // (scheduler.py abort_request: req.rid.startswith(recv_req.rid)); floe's ids end in a
    // random suffix, so none is another's prefix. An unknown rid is a 200 that does nothing.
    for (const rid of requestIds) await engineHttp(this.endpoint, '/abort_request', { body: { rid }, fix });
  }

  /** While paused (either mode) SGLang's scheduler counts only running requests as busy
   *  (scheduler.py flush_cache: is_fully_idle(ignore_waiting=_engine_paused)), and a retract left
   *  none running: the flush frees every retracted request's K/V too, so `running` asks nothing more. */
  async flushCache(_opts: { running?: boolean } = {}): Promise<void> {
    try {
      await engineHttp(this.endpoint, '/flush_cache', { method: 'POST', query: { timeout: String(FLUSH_WAIT_S) }, timeoutMs: (FLUSH_WAIT_S + 30) * 1000, fix: `/flush_cache: ${NEEDS}` });
    } catch (err) {
      // SGLang flushes only a fully idle scheduler: with a request running or queued it answers
      // 400 "Flush cache failed." (or "Timed out waiting for idle state." after ?timeout=)
      if (err instanceof EngineHttpError && err.status === 400) {
        throw new EngineHttpError(this.endpoint.id, 400, '/flush_cache',
          `SGLang flushes the prefix cache only when no request is running or queued (${err.message})`,
          'pause generation first (POST /pause_generation {"mode":"abort"}), then flush');
      }
      throw err;
    }
  }

  async load(): Promise<EngineLoad> {
    const text = await engineHttp(this.endpoint, '/metrics', { fix: METRICS_FIX, timeoutMs: 10_000 });
    // the gauges are refreshed at each prefill batch, every --decode-log-interval (40)
    // decode steps and on going idle (metrics_reporter.py): a router's estimate, not a count
    const running = sglangGauge(text, 'sglang:num_running_reqs');
    const waiting = sglangGauge(text, 'sglang:num_queue_reqs');
    if (running === null || waiting === null) {
      const missing = [running === null ? 'sglang:num_running_reqs' : null, waiting === null ? 'sglang:num_queue_reqs' : null].filter(Boolean).join(', ');
      throw new EngineHttpError(this.endpoint.id, 200, '/metrics', `the exposition has no ${missing}`,
        `${METRICS_FIX} (a server just started publishes the gauges once its scheduler has run a batch)`);
    }
    return { running, waiting };
  }

  async probe(): Promise<ProbeVerdict[]> {
    const out: ProbeVerdict[] = [];
    const fail = (err: unknown) => ({ detail: (err as Error).message, fix: err instanceof EngineHttpError ? err.fix ?? (err.unreachable ? 'check the server is running and reachable' : undefined) : undefined });

    // GET /ready (0.5.23) is 503 while generation is paused (tokenizer_manager.py is_ready):
    // there /health and /generate would wait for a resume (20 s, then 503), and a server that
    // floe or anyone paused (mid-update, say) must not be resumed by a probe
    const ready = await engineHttp(this.endpoint, '/ready', { timeoutMs: 10_000 }).then(() => 200, (err: unknown) => (err instanceof EngineHttpError ? err.status : 0));
    const paused = ready === 503;

    // health (and the server's version where it tells it)
    if (paused) {
      out.push({ capability: 'health', ok: false, detail: 'GET /ready: 503: generation is paused (or the server is not up yet); /health and /generate wait for POST /continue_generation', fix: 'resume it (POST /continue_generation {}) once no weight update is under way' });
    } else {
      try {
        const t0 = Date.now();
        // the probe reads /health itself, as long as SGLang may take over it (SGLANG_HEALTH_CHECK_TIMEOUT, 20 s)
        const body = await engineHttp(this.endpoint, '/health', { timeoutMs: PROBE_HEALTH_TIMEOUT_MS });
        const version = await this.serverVersion();
        const vnote = version === null ? '' : version === SGLANG_VERSION ? `; SGLang ${version}` : `; SGLang ${version} (floe's adapter is written against ${SGLANG_VERSION})`;
        out.push({ capability: 'health', ok: true, detail: `GET /health: 200 with ${body.length ? `a ${body.length}-byte body` : 'an empty body'} in ${Date.now() - t0} ms${vnote}` });
      } catch (err) {
        out.push({ capability: 'health', ok: false, ...fail(err) });
      }
    }

    // generate and logprobs: one greedy token from input_ids [0], as SGLang's own health check asks
    let raw: SglangGenerateResponse | null = null;
    if (paused) {
      out.push({ capability: 'generate', ok: false, detail: 'not checked: generation is paused (GET /ready 503)' });
      out.push({ capability: 'logprobs', ok: false, detail: 'not checked: generation is paused (GET /ready 503)' });
    } else {
      try {
        raw = await engineJson<SglangGenerateResponse>(this.endpoint, '/generate', {
          body: this.generateBody({ requestId: `floe-probe-${randomUUID()}`, promptIds: [0], maxTokens: 1, temperature: 0, topP: 1, stopTokenIds: [] }),
          timeoutMs: 60_000, fix: `/generate is SGLang's native route: ${NEEDS}`,
        });
      } catch (err) {
        out.push({ capability: 'generate', ok: false, ...fail(err) });
        out.push({ capability: 'logprobs', ok: false, detail: 'not checked: /generate failed' });
      }
    }
    if (raw !== null) {
      const shape = `output_ids ${JSON.stringify(raw.output_ids ?? null)}, finish_reason ${JSON.stringify(raw.meta_info?.finish_reason ?? null)}`;
      try {
        const r = this.toResult(raw);
        out.push({ capability: 'generate', ok: r.tokenIds.length === 1, detail: `POST /generate (1 token from input_ids [0]): ${shape}` });
        out.push({ capability: 'logprobs', ok: r.logprobs.length === 1, detail: `meta_info.output_token_logprobs ${JSON.stringify(raw.meta_info?.output_token_logprobs)}` });
      } catch (err) {
        out.push({ capability: 'generate', ok: false, detail: `POST /generate answered ${shape}: ${(err as Error).message}`, fix: NEEDS });
        out.push({ capability: 'logprobs', ok: false, detail: `meta_info.output_token_logprobs ${JSON.stringify(raw.meta_info?.output_token_logprobs ?? null)}`, fix: NEEDS });
      }
    }

    if (raw !== null && !paused) out.push(await this.originalLogprobsVerdict());

    // metrics
    let load: EngineLoad | null = null;
    try {
      load = await this.load();
      out.push({ capability: 'metrics', ok: true, detail: `GET /metrics: sglang:num_running_reqs ${load.running}, sglang:num_queue_reqs ${load.waiting}` });
    } catch (err) {
      out.push({ capability: 'metrics', ok: false, ...fail(err) });
    }

    // pause and resume: for real only when the metrics say nothing is running or queued (a
    // pause aborts whatever is); otherwise only that both routes exist, from requests that
    // SGLang's body validation refuses (400) before anything is paused
    if (load && load.running === 0 && load.waiting === 0 && !paused) {
      let didPause = false;
      try {
        await this.pause();
        didPause = true;
        out.push({ capability: 'pause', ok: true, detail: 'POST /pause_generation {"mode":"abort"}: paused (nothing was running)' });
      } catch (err) {
        out.push({ capability: 'pause', ok: false, ...fail(err) });
      }
      try {
        await this.resume();
        out.push({ capability: 'resume', ok: true, detail: `POST /continue_generation: ${didPause ? 'resumed' : 'answered'}` });
      } catch (err) {
        out.push({ capability: 'resume', ok: false, ...fail(err) });
      }
    } else {
      const why = paused ? 'GET /ready is 503 (paused already, or not up), so not paused or resumed'
        : load ? `${load.running} running and ${load.waiting} queued, so not paused` : 'the metrics are unreadable, so not paused';
      out.push(await this.routeRefuses('pause', '/pause_generation', { mode: 'floe-probe-not-a-mode' }, why));
      out.push(await this.routeRefuses('resume', '/continue_generation', { torch_empty_cache: ['floe-probe-not-a-bool'] }, why));
    }

    // abort: an unknown rid is a 200 that aborts nothing (tokenizer_manager.py abort_request)
    try {
      await this.abort([`floe-probe-unknown-${randomUUID()}`]);
      out.push({ capability: 'abort', ok: true, detail: 'POST /abort_request {rid: <unknown>}: 200' });
    } catch (err) {
      out.push({ capability: 'abort', ok: false, ...fail(err) });
    }

    // flush_cache, without waiting: a busy scheduler refuses (400), which shows the route too
    try {
      await engineHttp(this.endpoint, '/flush_cache', { method: 'POST', timeoutMs: 30_000, fix: `/flush_cache: ${NEEDS}` });
      out.push({ capability: 'flush_cache', ok: true, detail: 'POST /flush_cache: flushed' });
    } catch (err) {
      if (err instanceof EngineHttpError && err.status === 400) out.push({ capability: 'flush_cache', ok: true, detail: `POST /flush_cache: refused while requests are pending (SGLang flushes only when idle; floe flushes while paused): ${err.message}` });
      else out.push({ capability: 'flush_cache', ok: false, ...fail(err) });
    }

    // load_weights without loading: a body without model_path fails validation (400) before
    // anything is read; a server without the route answers 404
    const served = await this.modelInfo();
    const servedNote = served ? `; serving ${JSON.stringify(served.model_path)} as weight_version ${JSON.stringify(served.weight_version)}` : '';
    const lw = await this.routeRefuses('load_weights', '/update_weights_from_disk', {}, 'nothing was loaded');
    out.push({ ...lw, detail: lw.detail + (lw.ok ? servedNote : '') });

    // weight_versions: floe stamps them itself (a pause aborts every request before each load,
    // so one request's ids all come from one version). 0.5.23 reports the server's version
    // strings per response (meta_info.weight_version) and as spans over the ids
    // (meta_info.weight_versions, utils/weight_versions.py); the adapter does not read them.
    const mv = raw?.meta_info;
    out.push({
      capability: 'weight_versions', ok: false, optional: true,
      detail: mv?.weight_version !== undefined
        ? `not used: the server's version strings, meta_info.weight_version ${JSON.stringify(mv.weight_version)}${mv.weight_versions ? ` and spans weight_versions ${JSON.stringify(mv.weight_versions)}` : ''}; floe stamps each id's version itself`
        : 'no per-token versions; floe stamps each id\'s version itself',
    });
    return out;
  }

  /** Whether the log-probs of sampled ids are the policy's own (SGLANG_RETURN_ORIGINAL_LOGPROB=1)
   *  or temperature-scaled (sampler.py: log_softmax(logits / T) otherwise). One fixed
   *  continuation is scored twice: as sampled at temperature 0.5 (output_token_logprobs) and by
   *  prefill (input_token_logprobs, from the logits processor, where no temperature applies).
   *  The two agree on a server launched right and differ by log(p / Σp²) per id on one that
   *  scales; ids where that is small (a near-uniform distribution) are ids where scaling does
   *  little harm either. */
  private async originalLogprobsVerdict(): Promise<ProbeVerdict> {
    const prompt = [0];
    try {
      const sampled = await engineJson<SglangGenerateResponse>(this.endpoint, '/generate', {
        body: this.generateBody({ requestId: `floe-probe-${randomUUID()}`, promptIds: prompt, maxTokens: 4, temperature: 0.5, topP: 1, stopTokenIds: [] }),
        timeoutMs: 60_000,
      });
      const gen = this.toResult(sampled);
      if (gen.tokenIds.length === 0) return { capability: 'original_logprobs', ok: false, detail: 'the temperature-0.5 sample came back empty: nothing to score' };
      const scored = await engineJson<SglangGenerateResponse & { meta_info?: { input_token_logprobs?: [number | null, number, string | null][] } }>(this.endpoint, '/generate', {
        body: { rid: `floe-probe-${randomUUID()}`, input_ids: [...prompt, ...gen.tokenIds], sampling_params: { max_new_tokens: 0, temperature: 0.5 }, return_logprob: true, logprob_start_len: prompt.length, stream: false },
        timeoutMs: 60_000,
      });
      const entries = scored?.meta_info?.input_token_logprobs ?? [];
      const tail = entries.slice(-gen.tokenIds.length);
      if (tail.length !== gen.tokenIds.length || tail.some((e, i) => e[1] !== gen.tokenIds[i] || typeof e[0] !== 'number')) {
        return { capability: 'original_logprobs', ok: false, detail: `prefill scoring (logprob_start_len ${prompt.length}) answered input_token_logprobs ${JSON.stringify(entries).slice(0, 200)} for ids ${JSON.stringify(gen.tokenIds)}`, fix: NEEDS };
      }
      const diffs = tail.map((e, i) => Math.abs((e[0] as number) - gen.logprobs[i]));
      const worst = Math.max(...diffs);
      const shown = `sampled at T=0.5 [${gen.logprobs.map((x) => x.toFixed(3)).join(', ')}], prefill [${tail.map((e) => (e[0] as number).toFixed(3)).join(', ')}]`;
      if (worst > LOGPROB_TOLERANCE) return { capability: 'original_logprobs', ok: false, detail: `the log-probs of sampled ids are temperature-scaled: ${shown} (differ by up to ${worst.toFixed(3)})`, fix: ORIGINAL_LOGPROB_FIX };
      return { capability: 'original_logprobs', ok: true, detail: `the log-probs of sampled ids are the policy's own: ${shown}` };
    } catch (err) {
      return { capability: 'original_logprobs', ok: false, detail: (err as Error).message, fix: err instanceof EngineHttpError ? err.fix : undefined };
    }
  }

  /** A request the route's body validation refuses: 400 means the route is there (and did nothing). */
  private async routeRefuses(capability: ProbeVerdict['capability'], route: string, body: unknown, note: string): Promise<ProbeVerdict> {
    try {
      await engineHttp(this.endpoint, route, { body, timeoutMs: 30_000, fix: `${route}: ${NEEDS}` });
      return { capability, ok: false, detail: `POST ${route} ${JSON.stringify(body)} was accepted, where SGLang refuses it: not the SGLang surface floe knows`, fix: NEEDS };
    } catch (err) {
      if (err instanceof EngineHttpError && err.status === 400) return { capability, ok: true, detail: `POST ${route}: the route answers (400 to an invalid body); ${note}` };
      return { capability, ok: false, detail: (err as Error).message, fix: err instanceof EngineHttpError ? err.fix : undefined };
    }
  }

  /** GET /model_info (0.5.23; /get_model_info is its deprecated older name). */
  private async modelInfo(): Promise<{ model_path?: string; weight_version?: string } | null> {
    for (const route of ['/model_info', '/get_model_info']) {
      try {
        return await engineJson<{ model_path?: string; weight_version?: string }>(this.endpoint, route, { timeoutMs: 10_000 });
      } catch (err) {
        if (!(err instanceof EngineHttpError && err.missingRoute)) return null;
      }
    }
    return null;
  }

  /** GET /server_info's `version` (/get_server_info on older servers); null when not told. */
  private async serverVersion(): Promise<string | null> {
    for (const route of ['/server_info', '/get_server_info']) {
      try {
        const info = await engineJson<{ version?: unknown }>(this.endpoint, route, { timeoutMs: 10_000 });
        return typeof info?.version === 'string' ? info.version : null;
      } catch (err) {
        if (!(err instanceof EngineHttpError && err.missingRoute)) return null;
      }
    }
    return null;
  }
}
