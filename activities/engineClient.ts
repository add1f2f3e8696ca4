/** HTTP client for inference engines speaking the vLLM / SGLang-style surface:
 *  OpenAI-compatible /v1/completions with token ids and logprobs, /metrics, /health. */

export interface EngineEndpoint { id: string; url: string; node: string }

export interface CompletionRequest {
  prompt: string | number[];
  max_tokens: number;
  temperature: number;
  top_p: number;
  n?: number;
  seed?: number;
  /** OpenAI's end-user field; floe sends the rollout id (engines may ignore it). */
  user?: string;
  /** The tokenizer's end-of-turn ids (vLLM and the reference engine stop on them). */
  stop_token_ids?: number[];
}

export interface CompletionChoice {
  index: number;
  text: string;
  finish_reason: string | null;
  token_ids?: number[];
  prompt_token_ids?: number[];
  logprobs?: { token_logprobs?: number[] } | null;
  weight_versions?: number[];
}

export interface CompletionResponse {
  choices: CompletionChoice[];
  usage?: { prompt_tokens: number; completion_tokens: number };
}

export class EngineHttpError extends Error {
  constructor(public readonly engineId: string, public readonly status: number, message: string) {
    super(`engine ${engineId}: HTTP ${status}: ${message}`);
  }
}

async function call<T>(e: EngineEndpoint, path: string, init: RequestInit & { timeoutMs?: number } = {}): Promise<T> {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), init.timeoutMs ?? 120_000);
  try {
    const res = await fetch(new URL(path, e.url), { ...init, signal: ctrl.signal, headers: { 'content-type': 'application/json', ...(init.headers ?? {}) } });
    const body = await res.text();
    if (!res.ok) throw new EngineHttpError(e.id, res.status, body.slice(0, 500));
    return (path === '/metrics' ? body : JSON.parse(body)) as T;
  } finally {
    clearTimeout(timer);
  }
}

export function complete(e: EngineEndpoint, req: CompletionRequest, timeoutMs = 300_000): Promise<CompletionResponse> {
  return call<CompletionResponse>(e, '/v1/completions', { method: 'POST', body: JSON.stringify({ ...req, logprobs: 1, return_token_ids: true }), timeoutMs });
}

/** Running and waiting request counts from Prometheus text (vLLM's metric names). */
export function parseLoad(metrics: string): { running: number; waiting: number } {
  const read = (name: string) => {
    let sum = 0;
    for (const line of metrics.split('\n')) {
      if (line.startsWith('#')) continue;
      const m = new RegExp(`^${name.replace(/[:]/g, '[:_]')}(?:\\{[^}]*\\})?\\s+([0-9.eE+-]+)`).exec(line);
      if (m) sum += Number(m[1]);
    }
    return sum;
  };
  return { running: read('vllm:num_requests_running'), waiting: read('vllm:num_requests_waiting') };
}

export async function engineLoad(e: EngineEndpoint): Promise<{ running: number; waiting: number }> {
  return parseLoad(await call<string>(e, '/metrics', { timeoutMs: 3000 }));
}

export async function updateWeights(e: EngineEndpoint, body: { path: string; version: number }): Promise<{ ok: boolean; version: number; load_ms?: number }> {
  return call(e, '/update_weights', { method: 'POST', body: JSON.stringify(body), timeoutMs: 600_000 });
}
