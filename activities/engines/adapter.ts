import type { EngineEndpoint, EngineKind } from '../../core/contracts.js';

/** One interface over the inference servers floe drives: floe's reference engine, vLLM and
 *  SGLang, each with its own HTTP surface. An adapter speaks one server's protocol and
 *  nothing else; the rules of weight versions and abort-and-resubmit live in
 *  core/weightVersions.ts and activities/engines/versions.ts, above every adapter. */

export type { EngineEndpoint, EngineKind } from '../../core/contracts.js';

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
}

export interface EngineLoad { running: number; waiting: number }

/** A failed HTTP exchange with an engine. `status` 0: no answer (refused, reset, timed out). */
export class EngineHttpError extends Error {
  constructor(
    public readonly engineId: string,
    public readonly status: number,
    public readonly route: string,
    detail: string,
    /** What to change so this works (a server flag, a version), when known. */
    public readonly fix?: string,
  ) {
    super(`engine ${engineId}: ${route}: ${status === 0 ? 'no answer' : `HTTP ${status}`}: ${detail}${fix ? ` (fix: ${fix})` : ''}`);
    this.name = 'EngineHttpError';
  }
  /** The server has no such route (vLLM and SGLang answer 404 {"detail":"Not Found"}). */
  get missingRoute(): boolean { return this.status === 404 || this.status === 405; }
  /** Nothing answered: the server is down or restarting. */
  get unreachable(): boolean { return this.status === 0; }
}

/** One capability of a running server, as `floe engine probe` prints it. */
export interface ProbeVerdict {
  capability: 'health' | 'generate' | 'logprobs' | 'metrics' | 'pause' | 'resume' | 'abort' | 'flush_cache' | 'load_weights' | 'weight_versions';
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
  loadWeights(folder: string, version: number, opts?: { keepCache?: boolean }): Promise<{ loadMs: number }>;
  /** Stop generating and abort every request in flight (they answer finishReason 'abort'
   *  with the ids generated so far where the server returns them). */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Abort these requests (all when absent). */
  abort(requestIds?: string[]): Promise<void>;
  flushCache(): Promise<void>;
  /** Running and waiting requests, from the server's Prometheus metrics. */
  load(): Promise<EngineLoad>;
  /** Check each capability without changing the weights it serves. */
  probe(): Promise<ProbeVerdict[]>;
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
  const timer = setTimeout(() => ctrl.abort(), o.timeoutMs ?? 120_000);
  try {
    let res: Response;
    try {
      res = await fetch(url, {
        method: o.method ?? (o.body === undefined ? 'GET' : 'POST'),
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        headers: o.body === undefined ? undefined : { 'content-type': 'application/json' },
        signal: ctrl.signal,
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
      throw new EngineHttpError(e.id, 0, route, `${cause} (${url.origin})`, 'check the server is running and reachable from this worker');
    }
    const text = await res.text().catch(() => '');
    if (!res.ok) {
      throw new EngineHttpError(e.id, res.status, route, text.slice(0, 500) || res.statusText, res.status === 404 || res.status === 405 ? o.fix : undefined);
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
