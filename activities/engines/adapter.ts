import type { EngineEndpoint, EngineKind, UpdateMode } from '../../core/contracts.js';
import { saysPromptTooLong } from '../../core/requestFit.js';
import type { LabelSpan } from '../../core/weightVersions.js';

/** One interface over the inference servers floe drives: floe's reference engine, vLLM and
 *  SGLang, each with its own HTTP surface. An adapter speaks one server's protocol and
 *  nothing else; the rules of weight versions and abort-and-resubmit live in
 *  core/weightVersions.ts and activities/engines/versions.ts, above every adapter. */

export type { EngineEndpoint, EngineKind, UpdateMode } from '../../core/contracts.js';
export type { LabelSpan } from '../../core/weightVersions.js';

export interface GenerateRequest {
  /** floe's id for this request (the engine's request id; abort targets it). */
  requestId: string;
  /** The whole prompt as token ids (token in / token out: the engine never tokenizes). */
  promptIds: number[];
  maxTokens: number;
  temperature: number;
  topP: number;
  seed?: number;
  /** End-of-turn ids: generation stops on them and they are returned as the last id. */
  stopTokenIds: number[];
  /** The rollout id (OpenAI's end-user field where the server has one). */
  user?: string;
}

export type FinishReason = 'stop' | 'length' | 'abort';

export interface GenerateResult {
  /** Generated ids, the stop id included when finishReason is 'stop'. */
  tokenIds: number[];
  /** One log-prob per generated id, under the weights that sampled it. */
  logprobs: number[];
  finishReason: FinishReason;
  /** Per-token weight versions, only from an engine that reports them (the reference engine);
   *  null: floe stamps the version itself (core/weightVersions.ts). */
  versions: number[] | null;
  /** The weight-version labels the server says sampled these ids (vLLM's and SGLang's
   *  weight_versions spans; floe sets the label to String(version) when it loads weights),
   *  distinct, in order; null when the server reports none. floe compares them with the
   *  version it recorded: a restarted server answers with its launch label. */
  servedLabels?: string[] | null;
  /** The server's spans over the generated ids, [start, end) sampled by the weights labelled
   *  `label` (vLLM's and SGLang's weight_versions); null when it reports none. A request that ran
   *  through an update in engines.updateMode 'keep' has two: floe stamps each id from them. */
  servedSpans?: LabelSpan[] | null;
}

export interface EngineLoad { running: number; waiting: number }

/** Where a server's workers join the trainer's weight-transfer group (the trainer is rank 0). */
export interface TransferGroup { masterAddress: string; masterPort: number; rankOffset: number; worldSize: number; backend: string }

/** One update's tensors, as the trainer will broadcast them, in order (engine/floe_engine/native_transfer.py metadata). */
export interface TransferMetadata { names: string[]; dtype_names: string[]; shapes: number[][] }

/** A failed HTTP exchange with an engine. `status` 0: no answer (refused, reset, timed out). */
export class EngineHttpError extends Error {
  constructor(
    public readonly engineId: string,
    public readonly status: number,
    public readonly route: string,
    detail: string,
    /** What to change so this works (a server flag, a version), when known. */
    public readonly fix?: string,
    /** Status 0 because floe's own timeout ran out: the server may be alive and still working. */
    public readonly timedOut: boolean = false,
  ) {
    super(`engine ${engineId}: ${route}: ${status === 0 ? 'no answer' : `HTTP ${status}`}: ${detail}${fix ? ` (fix: ${fix})` : ''}`);
    this.name = 'EngineHttpError';
  }
  /** The server has no such route (vLLM and SGLang answer 404 {"detail":"Not Found"}). */
  get missingRoute(): boolean { return this.status === 404 || this.status === 405; }
  /** Nothing answered: the server is down or restarting (or, when `timedOut`, slow). */
  get unreachable(): boolean { return this.status === 0; }
  /** The server (or floe's cap, core/requestFit.ts) says the prompt does not fit its context. */
  get promptTooLong(): boolean { return this.status === 400 && saysPromptTooLong(this.message); }
}

/** The environment variable an engine's API key is read from, on the machine of the worker
 *  that talks to it: FLOE_ENGINE_KEY_<ID>, the endpoint id upper-cased with every other
 *  character an underscore (engine "gpu-a" → FLOE_ENGINE_KEY_GPU_A; `floe engine probe`'s
 *  endpoint is "probe"). Never in the run config or a workflow history: core/exposure.ts refuses
 *  credentials in endpoint URLs. Sent as `Authorization: Bearer <key>`, which both servers check
 *  (vLLM 0.34.0 --api-key / VLLM_API_KEY: vllm/entrypoints/serve/middleware/authenticate.py,
 *  routes under /v1 only; SGLang 0.5.23 --api-key: python/sglang/srt/utils/auth.py, every route
 *  but /health*, /ready* and /metrics*). */
export function engineKeyEnv(engineId: string): string {
  return `FLOE_ENGINE_KEY_${engineId.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/** The fix for a 401: the key the server wants, from the environment. */
export function apiKeyFix(engineId: string): string {
  const env = engineKeyEnv(engineId);
  return process.env[env]
    ? `the server refused the API key in ${env}: set it to the server's --api-key`
    : `the server wants an API key (it runs with --api-key): export ${env}=<key> in the environment of floe's workers (for \`floe engine probe\`: FLOE_ENGINE_KEY_PROBE)`;
}

/** One capability of a running server, as `floe engine probe` prints it. */
export interface ProbeVerdict {
  capability: 'health' | 'generate' | 'logprobs' | 'original_logprobs' | 'metrics' | 'pause' | 'resume' | 'abort' | 'flush_cache' | 'load_weights' | 'weight_versions';
  ok: boolean;
  /** What was observed (a status, a field that was missing, the metric names found). */
  detail: string;
  /** When not ok: the server flag or version that fixes it. */
  fix?: string;
  /** Optional capabilities floe works without (per-token versions: floe stamps them). */
  optional?: boolean;
}

export interface EngineAdapter {
  readonly kind: EngineKind;
  readonly endpoint: EngineEndpoint;
  /** True when the engine swaps weights under running requests and rebuilds their caches
   *  itself, reporting a version per token (the reference engine). Otherwise floe pauses,
   *  aborts what is in flight, loads, flushes, resumes, and resubmits the aborted requests. */
  readonly inPlaceUpdates: boolean;

  /** Resolves when the server answers its health route (an empty 200 body is healthy). */
  health(): Promise<void>;
  generate(req: GenerateRequest, opts?: { timeoutMs?: number }): Promise<GenerateResult>;
  /** Load the published model folder as `version` (the folder's checksums were verified by the caller).
   *  `keepCache` (recipe.cacheRebuild off): an engine that rebuilds in place keeps its caches
   *  (paused engines keep theirs by floe not flushing them). */
  loadWeights(folder: string, version: number, opts?: {
    keepCache?: boolean;
    /** The caller checked the folder's checksums on the engine's node just now
     *  (activities/gpu.ts: verifiedOnce): an engine that would hash it again in every
     *  tensor-parallel worker (floe_vllm's floe_load_folder) skips that. */
    verified?: boolean;
    /** The server was paused in mode 'keep': the load must not abort what it holds. */
    keepRequests?: boolean;
  }): Promise<{ loadMs: number }>;
  /** Stop generating. 'abort' (the default): abort every request in flight (they answer
   *  finishReason 'abort' with the ids generated so far where the server returns them). 'keep':
   *  keep them on the server, to go on after resume (vLLM mode keep, SGLang mode retract). */
  pause(mode?: UpdateMode): Promise<void>;
  resume(): Promise<void>;
  /** Abort these requests (all when absent). */
  abort(requestIds?: string[]): Promise<void>;
  /** Drop the prefix cache. `running`: also the K/V of requests kept through a pause in mode
   *  'keep', which the server then recomputes under the weights it serves now. */
  flushCache(opts?: { running?: boolean }): Promise<void>;
  /** Native weight transfer (engines.weightTransfer 'broadcast'), on servers that have it: how
   *  many workers join the group; join it; receive one update's tensors and label them `version`
   *  (the trainer broadcasts at the same time). */
  transferWorkers?(): Promise<number>;
  joinTransferGroup?(g: TransferGroup): Promise<void>;
  receiveWeights?(meta: TransferMetadata, version: number, opts?: { keepRequests?: boolean }): Promise<{ loadMs: number }>;
  /** Running and waiting requests, from the server's Prometheus metrics. */
  load(): Promise<EngineLoad>;
  /** Check each capability without changing the weights it serves. */
  probe(): Promise<ProbeVerdict[]>;
  /** The server's context length (prompt + generated ids), as it reports it; null when it does not. */
  contextLength(): Promise<number | null>;
}

/** Whether an engine answers its health route now: asked before floe treats a request that
 *  timed out as a dead engine (a loaded server can take that long for a long turn). */
export async function answersHealth(adapter: { health(): Promise<void> }): Promise<boolean> {
  try {
    await adapter.health();
    return true;
  } catch {
    return false;
  }
}

/** Context lengths by server url: a server's max_model_len is fixed for its life (a restart
 *  with another --max-model-len is a new server, and floe refuses one that answers with
 *  unexpected weights anyway), so it is asked once per worker process. */
const contextLengths = new Map<string, number>();

/** GET /v1/models → data[0].max_model_len: both vLLM 0.34.0 (vllm/entrypoints/openai/models/serving.py,
 *  show_available_models) and SGLang 0.5.23 (python/sglang/srt/entrypoints/http_server.py,
 *  available_models: context_len) report it there. Null when neither answers it. */
export async function reportedContextLength(e: EngineEndpoint, ask: () => Promise<number | null> = () => modelsContextLength(e)): Promise<number | null> {
  const known = contextLengths.get(e.url);
  if (known !== undefined) return known;
  const n = await ask().catch(() => null);
  if (n !== null) contextLengths.set(e.url, n);
  return n;
}

async function modelsContextLength(e: EngineEndpoint): Promise<number | null> {
  const r = await engineJson<{ data?: { max_model_len?: unknown }[] } | null>(e, '/v1/models', { timeoutMs: 10_000 });
  const n = r?.data?.[0]?.max_model_len;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : null;
}

/** Sum of a Prometheus gauge over its label sets ('vllm:num_requests_running'); null when
 *  the exposition has no sample of it. */
export function promGauge(metrics: string, name: string): number | null {
  const re = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:\\{[^}]*\\})?\\s+([0-9.eE+-]+|NaN)`);
  let sum: number | null = null;
  for (const line of metrics.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = re.exec(line);
    if (m) sum = (sum ?? 0) + (Number.isFinite(Number(m[1])) ? Number(m[1]) : 0);
  }
  return sum;
}

export interface HttpOptions { method?: 'GET' | 'POST'; body?: unknown; query?: Record<string, string>; timeoutMs?: number; fix?: string }

/** One HTTP exchange with an engine: JSON out, the raw body text back. Non-2xx and transport
 *  failures become EngineHttpError (status 0 for no answer). */
export async function engineHttp(e: EngineEndpoint, route: string, o: HttpOptions = {}): Promise<string> {
  const url = new URL(route, e.url);
  for (const [k, v] of Object.entries(o.query ?? {})) url.searchParams.set(k, v);
  const ctrl = new AbortController();
  const timeoutMs = o.timeoutMs ?? 120_000;
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; ctrl.abort(); }, timeoutMs);
  const headers: Record<string, string> = {};
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  const key = process.env[engineKeyEnv(e.id)];
  if (key) headers.authorization = `Bearer ${key}`;
  try {
    let res: Response;
    try {
      res = await fetch(url, {
        method: o.method ?? (o.body === undefined ? 'GET' : 'POST'),
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        headers,
        signal: ctrl.signal,
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      if (timedOut) throw new EngineHttpError(e.id, 0, route, `no answer within ${timeoutMs / 1000} s (${url.origin})`, 'a long request on a loaded server can take this long: raise engines.generateTimeoutSeconds in the run config', true);
      throw new EngineHttpError(e.id, 0, route, `${cause} (${url.origin})`, 'check the server is running and reachable from this worker');
    }
    const text = await res.text().catch(() => '');
    if (!res.ok) {
      const fix = res.status === 401 ? apiKeyFix(e.id) : res.status === 404 || res.status === 405 ? o.fix : undefined;
      throw new EngineHttpError(e.id, res.status, route, text.slice(0, 500) || res.statusText, fix);
    }
    return text;
  } finally {
    clearTimeout(timer);
  }
}

/** engineHttp, parsed as JSON (an empty body is null). */
export async function engineJson<T>(e: EngineEndpoint, route: string, o: HttpOptions = {}): Promise<T> {
  const text = await engineHttp(e, route, o);
  if (!text.trim()) return null as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new EngineHttpError(e.id, 200, route, `the body is not JSON: ${text.slice(0, 200)}`);
  }
}
