import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { answersHealth, type EngineEndpoint, type GenerateRequest, type ProbeVerdict } from '../activities/engines/adapter.js';
import { VllmAdapter } from '../activities/engines/vllm.js';
import { spanVersions } from '../core/weightVersions.js';
import { ReferenceAdapter } from '../activities/engines/reference.js';
import { settings } from './helpers/platform.js';
import { rejection } from './helpers/rejection.js';
import { startVllmDouble, type VllmDouble } from './helpers/vllmDouble.js';
import { eventually } from './helpers/wait.js';

/** floe's vLLM adapter against a double of vLLM 0.34.0 (test/helpers/vllmDouble.ts) that
 *  generates with a real reference engine, and the reference adapter against that engine. */

const HELLO = [72, 101, 108, 108, 111]; // "Hello" in the byte tokenizer
const EOS = 256;

let gpu: EmbeddedGpu;
let backend: string;
let launch: string; // the folder the engine was launched with (version 0)
/** A seed whose 120 ids from HELLO hold no EOS: exact lengths (the engine always stops on EOS). */
let LONG: number;
let FULL: { tokenIds: number[]; logprobs: number[] };
const doubles: VllmDouble[] = [];

const endpoint = (url: string, kind: 'vllm' | 'reference' = 'vllm'): EngineEndpoint => ({ id: `${kind}-test`, url, node: 'local', kind });
const req = (o: Partial<GenerateRequest> = {}): GenerateRequest => ({ requestId: `t-${randomUUID().slice(0, 8)}`, promptIds: HELLO, maxTokens: 8, temperature: 1, topP: 1, seed: 1, stopTokenIds: [EOS], ...o });

async function double(o: Partial<Parameters<typeof startVllmDouble>[0]> = {}): Promise<VllmDouble> {
  const d = await startVllmDouble({ backend, launchCheckpoint: launch, ...o });
  doubles.push(d);
  return d;
}

async function raw(url: string, route: string, body?: unknown, init: { method?: string; contentType?: string } = {}): Promise<{ status: number; text: string; json: unknown }> {
  const res = await fetch(`${url}${route}`, {
    method: init.method ?? (body === undefined ? 'GET' : 'POST'),
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    headers: body === undefined ? undefined : { 'content-type': init.contentType ?? 'application/json' },
  });
  const text = await res.text();
  let json: unknown = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* text */ }
  return { status: res.status, text, json };
}

const byCap = (v: ProbeVerdict[]) => Object.fromEntries(v.map((x) => [x.capability, x]));
const backendMetric = async (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec((await raw(backend, '/metrics')).text)?.[1]);

/** The launch folder published again as `version` (same weights, the version floe's worker extension checks). */
function copyAsVersion(folder: string, version: number): string {
  const out = path.join(path.dirname(folder), `v${version}-copy-${process.pid}`);
  fs.rmSync(out, { recursive: true, force: true });
  fs.cpSync(folder, out, { recursive: true });
  const meta = JSON.parse(fs.readFileSync(path.join(out, 'checkpoint.json'), 'utf8')) as Record<string, unknown>;
  fs.writeFileSync(path.join(out, 'checkpoint.json'), JSON.stringify({ ...meta, version }));
  return out;
}

beforeAll(async () => {
  const publishDir = path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-vllm-adapter`);
  // the trainer publishes its starting weights (v0) when it starts: the engine's launch folder
  const trainer = await startEmbeddedGpu(settings, { count: 0, checkpoint: '', publishDir, trainer: true });
  await trainer.stop();
  launch = path.join(publishDir, 'v0');
  expect(fs.existsSync(path.join(launch, 'checkpoint.json'))).toBe(true);
  gpu = await startEmbeddedGpu(settings, { count: 1, checkpoint: launch, publishDir, trainer: false });
  backend = gpu.engines[0].url;
  const ref = new ReferenceAdapter(endpoint(backend, 'reference'));
  for (LONG = 1; ; LONG++) {
    FULL = await ref.generate(req({ maxTokens: 120, seed: LONG, stopTokenIds: [], requestId: `seed-${LONG}` }));
    if (FULL.tokenIds.length === 120) break;
  }
});

// a failed test leaves nothing behind for the next: the shared engine runs, with nothing in flight
afterEach(async () => {
  await raw(backend, '/abort_requests', {});
  await raw(backend, '/resume', {});
});

afterAll(async () => {
  await Promise.all(doubles.map((d) => d.close().catch(() => undefined)));
  await gpu?.stop();
});

describe('VllmAdapter against the vLLM double', () => {
  it('generates from token ids: ids, logprobs and finish reason, the same ids the engine behind it samples', async () => {
    const d = await double();
    const vllm = new VllmAdapter(endpoint(d.url));
    const r = req({ maxTokens: 8, stopTokenIds: [], seed: LONG });
    const got = await vllm.generate(r);
    expect(got.tokenIds).toHaveLength(8);
    expect(got.logprobs).toHaveLength(8);
    expect(got.logprobs.every((x) => Number.isFinite(x) && x <= 0)).toBe(true);
    expect(got.finishReason).toBe('length');
    expect(got.versions).toBeNull();
    // the double forwards the seed: the reference engine itself samples the same ids
    const direct = await new ReferenceAdapter(endpoint(backend, 'reference')).generate({ ...r, requestId: `direct-${r.requestId}` });
    expect(got.tokenIds).toEqual(direct.tokenIds);
    expect(got.logprobs).toEqual(direct.logprobs);

    // what went over the wire: ids in, ids and log-probs out, no text processing
    const sent = d.requests.find((x) => x.route === '/v1/completions')!.body as Record<string, unknown>;
    expect(sent).toMatchObject({ prompt: HELLO, max_tokens: 8, temperature: 1, top_p: 1, seed: LONG, stop_token_ids: [], logprobs: 1, return_token_ids: true, request_id: r.requestId, skip_special_tokens: false, top_k: 0, n: 1, stream: false });
  });

  it("answers in vLLM's response shape: cmpl- ids, token_ids and prompt_token_ids, no per-token versions", async () => {
    const d = await double();
    const r = await raw(d.url, '/v1/completions', { prompt: HELLO, max_tokens: 3, seed: 3, ignore_eos: true, logprobs: 1, return_token_ids: true, return_tokens_as_token_ids: true, request_id: 'shape-1', stop_token_ids: [] });
    expect(r.status).toBe(200);
    const body = r.json as { id: string; object: string; model: string; choices: Record<string, unknown>[]; usage: Record<string, number> };
    expect(body.id).toBe('cmpl-shape-1');
    expect(body.object).toBe('text_completion');
    expect(body.model).toBe('floe-tiny');
    const c = body.choices[0] as { token_ids: number[]; prompt_token_ids: number[]; weight_versions: unknown; finish_reason: string; logprobs: { tokens: string[]; token_logprobs: number[]; text_offset: number[] } };
    expect(c.token_ids).toHaveLength(3);
    expect(c.prompt_token_ids).toEqual(HELLO);
    expect(c.weight_versions).toBeNull();
    expect(c.finish_reason).toBe('length');
    expect(c.logprobs.tokens).toEqual(c.token_ids.map((t) => `token_id:${t}`));
    expect(c.logprobs.text_offset[0]).toBe(0);
    expect(body.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
    // without return_token_ids there are no ids (vLLM returns them only when asked)
    const plain = await raw(d.url, '/v1/completions', { prompt: HELLO, max_tokens: 2, seed: 3 });
    expect((plain.json as { choices: { token_ids: unknown; logprobs: unknown }[] }).choices[0]).toMatchObject({ token_ids: null, logprobs: null });
  });

  it('a stop id ends the generation and is the last id', async () => {
    const d = await double();
    const vllm = new VllmAdapter(endpoint(d.url));
    const free = await vllm.generate(req({ maxTokens: 24, stopTokenIds: [], seed: LONG }));
    expect(free.tokenIds).toHaveLength(24);
    const stopId = free.tokenIds[5];
    const cut = free.tokenIds.indexOf(stopId) + 1;
    const stopped = await vllm.generate(req({ maxTokens: 24, stopTokenIds: [stopId], seed: LONG }));
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.tokenIds).toEqual(free.tokenIds.slice(0, cut));
    expect(stopped.tokenIds[stopped.tokenIds.length - 1]).toBe(stopId);
    expect(stopped.logprobs).toHaveLength(cut);
    // vLLM names the stop id that matched (stop_reason)
    const r = await raw(d.url, '/v1/completions', { prompt: HELLO, max_tokens: 24, seed: LONG, stop_token_ids: [stopId], return_token_ids: true });
    expect((r.json as { choices: { stop_reason: unknown }[] }).choices[0].stop_reason).toBe(stopId);
  });

  it('a pause aborts a long generation: finish reason abort with the ids generated so far; paused, new requests are refused until resume', async () => {
    const d = await double({ tokensPerSecond: 40 }); // ~3 s for 120 ids: the pause lands mid-generation
    const vllm = new VllmAdapter(endpoint(d.url));
    const pending = vllm.generate(req({ maxTokens: 120, seed: LONG, stopTokenIds: [] }));
    await new Promise((r) => setTimeout(r, 700));
    await vllm.pause();
    const got = await pending;
    expect(got.finishReason).toBe('abort');
    expect(got.tokenIds.length).toBeGreaterThan(5);
    expect(got.tokenIds.length).toBeLessThan(90);
    expect(got.tokenIds).toEqual(FULL.tokenIds.slice(0, got.tokenIds.length));
    expect(got.logprobs).toEqual(FULL.logprobs.slice(0, got.tokenIds.length));
    expect(d.requests.some((x) => x.route === '/pause?mode=abort&clear_cache=false')).toBe(true);

    // paused in mode abort, vLLM refuses new requests with a 503; the adapter reads it as an abort before any id
    const refused = await raw(d.url, '/v1/completions', { prompt: HELLO, max_tokens: 2 });
    expect(refused.status).toBe(503);
    expect(refused.json).toEqual({ error: { message: 'Generation is paused. Please retry after it resumes.', type: 'ServiceUnavailableError', param: null, code: 503 } });
    expect(await vllm.generate(req())).toEqual({ tokenIds: [], logprobs: [], finishReason: 'abort', versions: null });
    expect((await raw(d.url, '/is_paused')).json).toEqual({ is_paused: true });

    await vllm.resume();
    expect((await raw(d.url, '/is_paused')).json).toEqual({ is_paused: false });
    const after = await vllm.generate(req({ maxTokens: 4, stopTokenIds: [], seed: LONG }));
    expect(after.finishReason).toBe('length');
    expect(after.tokenIds).toHaveLength(4);
  });

  it('a pause in mode keep keeps a long generation: after the load and the preempting flush it goes on, its spans say where the weights changed', async () => {
    const d = await double({ tokensPerSecond: 40 });
    const vllm = new VllmAdapter(endpoint(d.url));
    const v1 = copyAsVersion(launch, 1);
    const pending = vllm.generate(req({ maxTokens: 120, seed: LONG, stopTokenIds: [] }));
    await new Promise((r) => setTimeout(r, 700));
    await vllm.pause('keep');
    // paused in mode keep, vLLM accepts new requests and queues them (no 503)
    const queued = vllm.generate(req({ maxTokens: 3, stopTokenIds: [], seed: LONG }));
    await vllm.loadWeights(v1, 1, { verified: true, keepRequests: true });
    await vllm.flushCache({ running: true });
    await vllm.resume();
    const got = await pending;
    expect(got.finishReason).toBe('length');
    expect(got.tokenIds).toHaveLength(120);
    const spans = got.servedSpans!;
    expect(spans.map((x) => x.label)).toEqual(['default', '1']);
    const at = spans[1].start;
    expect(at).toBeGreaterThan(5);
    expect(at).toBeLessThan(90);
    expect(spanVersions(spans, 120, 0)!.slice(at - 1, at + 1)).toEqual([0, 1]);
    // the ids before the switch are the ones the old weights sampled
    expect(got.tokenIds.slice(0, at)).toEqual(FULL.tokenIds.slice(0, at));
    expect((await queued).servedSpans!.map((x) => x.label)).toEqual(['1']);
    const routes = d.requests.map((x) => x.route);
    expect(routes).toContain('/pause?mode=keep&clear_cache=false');
    expect(routes).toContain('/reset_prefix_cache?reset_running_requests=true&reset_external=true');
    // negative control: in mode abort the same request ends at the pause with one label
    const again = vllm.generate(req({ maxTokens: 120, seed: LONG, stopTokenIds: [] }));
    await new Promise((r) => setTimeout(r, 700));
    await vllm.pause();
    const cut = await again;
    await vllm.resume();
    expect(cut.finishReason).toBe('abort');
    expect(cut.servedSpans!.map((x) => x.label)).toEqual(['1']);
  });

  it("abort(ids) aborts that request by vLLM's engine id (cmpl-<id>-0)", async () => {
    const d = await double();
    const vllm = new VllmAdapter(endpoint(d.url));
    await raw(backend, '/pause', {}); // the request waits in the engine
    try {
      const r = req({ maxTokens: 50 });
      const pending = vllm.generate(r);
      await eventually('the request to wait in the engine', () => backendMetric('vllm:num_requests_waiting'), (n) => n >= 1, 10_000);
      await vllm.abort([r.requestId]);
      const got = await pending;
      expect(got).toEqual({ tokenIds: [], logprobs: [], finishReason: 'abort', versions: null, servedLabels: [], servedSpans: [] });
      expect(d.requests.find((x) => x.route === '/abort_requests')?.body).toEqual({ request_ids: [`cmpl-${r.requestId}-0`] });
      await vllm.abort([]); // nothing: an empty list would abort everything on vLLM
      expect(d.requests.filter((x) => x.route === '/abort_requests')).toHaveLength(1);
    } finally {
      await raw(backend, '/resume', {});
    }
  });

  it('an empty /health body is healthy', async () => {
    const d = await double();
    const h = await raw(d.url, '/health');
    expect(h.status).toBe(200);
    expect(h.text).toBe('');
    await expect(new VllmAdapter(endpoint(d.url)).health()).resolves.toBeUndefined();
  });

  it('max_tokens is capped at what the context leaves; a prompt of the whole context is prompt_too_long, not a retried 400', async () => {
    const d = await double();
    const vllm = new VllmAdapter(endpoint(d.url));
    expect(await vllm.contextLength()).toBe(1024); // GET /v1/models → data[0].max_model_len
    // vLLM's own answers at the edge: a prompt over the context, and one exactly the context
    const over = await raw(d.url, '/v1/completions', { prompt: Array.from({ length: 1025 }, () => 65), max_tokens: 2 });
    expect([over.status, over.text]).toEqual([400, expect.stringMatching(/maximum context length is 1024 tokens\. However, your prompt contains 1025 input tokens/)]);
    const exact = await raw(d.url, '/v1/completions', { prompt: Array.from({ length: 1024 }, () => 65), max_tokens: 2 });
    expect([exact.status, exact.text]).toEqual([400, expect.stringMatching(/max_tokens must be at least 1, got 0/)]);
    // the adapter: both are prompt_too_long, before anything is sent
    const sent = d.requests.length;
    for (const n of [1024, 1025]) {
      const e = await rejection(vllm.generate(req({ promptIds: Array.from({ length: n }, () => 65) })));
      expect([e.status, e.promptTooLong], `prompt of ${n}`).toEqual([400, true]);
    }
    expect(d.requests.slice(sent).filter((x) => x.route === '/v1/completions')).toEqual([]);
    // max_tokens past the context is capped (vLLM would refuse max_tokens > max_model_len)
    const many = await vllm.generate(req({ promptIds: Array.from({ length: 1000 }, () => 65), maxTokens: 2000 }));
    expect(many.tokenIds.length).toBeGreaterThan(0);
    expect((d.requests.filter((x) => x.route === '/v1/completions').at(-1)!.body as { max_tokens: number }).max_tokens).toBe(24);
    // negative control: a prompt that leaves room generates
    const tight = await vllm.generate(req({ promptIds: Array.from({ length: 1020 }, () => 65), maxTokens: 50, stopTokenIds: [] }));
    expect(tight.tokenIds.length).toBeLessThanOrEqual(4);
  });

  it("rejects what vLLM rejects, in vLLM's error shapes", async () => {
    const d = await double();
    const noPrompt = await raw(d.url, '/v1/completions', { max_tokens: 2 });
    expect(noPrompt.status).toBe(400);
    expect(noPrompt.json).toMatchObject({ error: { type: 'Bad Request', param: 'prompt', code: 400 } });
    expect((noPrompt.json as { error: { message: string } }).error.message).toMatch(/Either prompt or prompt_embeds must be provided and non-empty/);
    const lp = await raw(d.url, '/v1/completions', { prompt: HELLO, logprobs: -2 });
    expect(lp.status).toBe(400);
    expect(lp.json).toMatchObject({ error: { param: 'logprobs', code: 400 } });
    const ct = await raw(d.url, '/v1/completions', JSON.stringify({ prompt: HELLO }), { contentType: 'text/plain' });
    expect(ct.status).toBe(400);
    expect(ct.text).toMatch(/Unsupported Media Type: Only 'application\/json' is allowed/);
    const vocab = await raw(d.url, '/v1/completions', { prompt: [1, 300] });
    expect(vocab.json).toEqual({ error: { message: 'Token id 300 is out of vocabulary', type: 'BadRequestError', param: null, code: 400 } });
    const model = await raw(d.url, '/v1/completions', { prompt: HELLO, model: 'gpt-x' });
    expect(model.status).toBe(404);
    expect(model.json).toMatchObject({ error: { type: 'NotFoundError', param: 'model', code: 404 } });
    const temp = await raw(d.url, '/v1/completions', { prompt: HELLO, temperature: 3 });
    expect(temp.json).toMatchObject({ error: { message: 'temperature must be in [0, 2], got 3.', type: 'BadRequestError', param: 'temperature' } });
    expect(await raw(d.url, '/no/such/route')).toMatchObject({ status: 404, json: { detail: 'Not Found' } });
    expect(await raw(d.url, '/v1/completions')).toMatchObject({ status: 405, json: { detail: 'Method Not Allowed' } });
    const rpc = await raw(d.url, '/collective_rpc', { method: 'no_such_method' });
    expect(rpc.status).toBe(500);
    expect(rpc.json).toMatchObject({ error: { type: 'InternalServerError', code: 500 } });
    expect((rpc.json as { error: { message: string } }).error.message).toMatch(/Method 'no_such_method' is not implemented\./);
    expect(await raw(d.url, '/collective_rpc', {})).toMatchObject({ status: 400, json: { error: { message: "Missing 'method' in request body" } } });
    expect(await raw(d.url, '/abort_requests', '')).toMatchObject({ status: 400, json: { error: { message: 'Invalid JSON format', type: 'Bad Request' } } });
    expect(await raw(d.url, '/pause?mode=later', '')).toMatchObject({ status: 400, json: { error: { param: 'query.mode' } } });
  });

  it('without VLLM_SERVER_DEV_MODE the dev routes are 404s whose fix names it; generation still works', async () => {
    const d = await double({ devMode: false });
    const vllm = new VllmAdapter(endpoint(d.url));
    expect(await raw(d.url, '/pause?mode=abort', '')).toMatchObject({ status: 404, json: { detail: 'Not Found' } });
    for (const call of [() => vllm.pause(), () => vllm.resume(), () => vllm.abort(['x']), () => vllm.flushCache(), () => vllm.loadWeights(launch, 0)]) {
      const err = await rejection(call());
      expect(err.status).toBe(404);
      expect(err.missingRoute).toBe(true);
      expect(err.fix).toMatch(/VLLM_SERVER_DEV_MODE=1/);
      expect(err.message).toMatch(/VLLM_SERVER_DEV_MODE=1/);
    }
    const g = await vllm.generate(req({ maxTokens: 3, stopTokenIds: [], seed: LONG }));
    expect(g.tokenIds).toHaveLength(3);
  });

  it('every tensor-parallel worker loads through reload_weights; vLLM\'s built-in reload_weights answers beside floe\'s method', async () => {
    const d = await double({ tensorParallel: 2 });
    const vllm = new VllmAdapter(endpoint(d.url));
    await vllm.loadWeights(launch, 0, { verified: true });
    expect(d.reloads).toBe(2);
    // verified by the caller on this node: the workers do not hash it again; otherwise they do
    await vllm.loadWeights(launch, 0);
    const bodies = d.requests.filter((x) => x.route === '/collective_rpc').map((x) => (x.body as { kwargs: unknown }).kwargs);
    expect(bodies).toEqual([{ version: 0, verify: false }, { version: 0 }]);
    expect(d.reloads).toBe(4);
    const builtin = await raw(d.url, '/collective_rpc', { method: 'reload_weights', kwargs: { weights_path: launch, is_checkpoint_format: true } });
    expect([builtin.status, builtin.json]).toEqual([200, { results: [null, null] }]);
    expect(d.reloads).toBe(6);
  });

  it('pause leaves the caches to floe (clear_cache=false, sent); the flush includes the connector\'s cache (reset_external=true)', async () => {
    const d = await double();
    const vllm = new VllmAdapter(endpoint(d.url));
    await vllm.pause();
    await vllm.flushCache();
    await vllm.resume();
    const routes = d.requests.map((x) => x.route);
    expect(routes).toContain('/pause?mode=abort&clear_cache=false');
    expect(routes).toContain('/reset_prefix_cache?reset_external=true');
    // negative control: the double reads clear_cache; its default (true) is what floe must not leave implicit
    expect(routes.filter((r) => r.startsWith('/pause')).every((r) => r.includes('clear_cache=false'))).toBe(true);
  });

  it('a request slower than the timeout is timedOut on a server that still answers health: slow, not dead', async () => {
    const d = await double({ tokensPerSecond: 5 });
    const vllm = new VllmAdapter(endpoint(d.url));
    const e = await rejection(vllm.generate(req({ maxTokens: 40, stopTokenIds: [] }), { timeoutMs: 1000 }));
    expect([e.status, e.timedOut]).toEqual([0, true]);
    expect(e.fix).toMatch(/engines\.generateTimeoutSeconds/);
    expect(await answersHealth(vllm)).toBe(true);
    // negative control: nothing listening is unreachable, not timed out, and fails health
    const gone = new VllmAdapter(endpoint('http://127.0.0.1:9'));
    const g = await rejection(gone.generate(req()));
    expect([g.status, g.timedOut]).toEqual([0, false]);
    expect(await answersHealth(gone)).toBe(false);
  });

  it('an API key comes from FLOE_ENGINE_KEY_<ID> in the environment; without it the 401 names the variable', async () => {
    const d = await double({ apiKey: 'vllm-key' });
    const ep: EngineEndpoint = { id: 'gpu-a', url: d.url, node: 'local', kind: 'vllm' };
    delete process.env.FLOE_ENGINE_KEY_GPU_A;
    const e = await rejection(new VllmAdapter(ep).generate(req()));
    expect(e.status).toBe(401);
    expect(e.fix).toContain('export FLOE_ENGINE_KEY_GPU_A=<key>');
    process.env.FLOE_ENGINE_KEY_GPU_A = 'vllm-key';
    try {
      expect((await new VllmAdapter(ep).generate(req())).tokenIds.length).toBeGreaterThan(0);
    } finally {
      delete process.env.FLOE_ENGINE_KEY_GPU_A;
    }
  });

  it('loadWeights goes through collective_rpc floe_load_folder into the engine; without the worker extension its fix names the flag', async () => {
    const d = await double();
    const vllm = new VllmAdapter(endpoint(d.url));
    const before = await backendMetric('floe_engine_weight_updates_total');
    const { loadMs } = await vllm.loadWeights(launch, 0);
    expect(loadMs).toBeGreaterThanOrEqual(0);
    expect(d.requests.find((x) => x.route === '/collective_rpc')?.body).toEqual({ method: 'floe_load_folder', args: [launch], kwargs: { version: 0 } });
    expect(await backendMetric('floe_engine_weight_updates_total')).toBe(before + 1);
    // floe labels the weights it loaded: every answer says which label sampled its ids
    expect(d.requests.find((x) => x.route === '/update_weight_version')?.body).toEqual({ new_version: '0' });
    expect((await vllm.generate(req({ maxTokens: 2 }))).servedLabels).toEqual(['0']);
    // the extension refuses a folder that holds another version than floe asked for
    const other = await rejection(vllm.loadWeights(launch, 3));
    expect(other.status).toBe(500);
    expect(other.message).toMatch(/asked for version 3 but .* holds version 0/);
    expect(await backendMetric('floe_engine_weight_updates_total')).toBe(before + 1);
    const missing = await rejection(vllm.loadWeights(path.join(launch, 'no-such-folder'), 1));
    expect(missing.status).toBe(500);
    expect(missing.message).toMatch(/Call to collective_rpc method failed: Worker failed with error/);

    const bare = await double({ workerExtension: false });
    const err = await rejection(new VllmAdapter(endpoint(bare.url)).loadWeights(launch, 0));
    expect(err.status).toBe(500);
    expect(err.message).toMatch(/Method 'floe_load_folder' is not implemented/);
    expect(err.fix).toBe("--worker-extension-cls floe_vllm.FloeWorkerExtension (pip install the engine/ package into vLLM's env)");
  });

  it('flushCache resets the prefix cache; load() reads the scheduler gauges', async () => {
    const d = await double({ tokensPerSecond: 20 });
    const vllm = new VllmAdapter(endpoint(d.url));
    await vllm.flushCache();
    expect((await raw(d.url, '/reset_prefix_cache', '')).json).toEqual({ success: true });
    expect(await vllm.load()).toEqual({ running: 0, waiting: 0 });
    const a = vllm.generate(req({ maxTokens: 40, stopTokenIds: [], seed: LONG }));
    const b = vllm.generate(req({ maxTokens: 40, stopTokenIds: [], seed: LONG }));
    const busy = await eventually('two requests running', () => vllm.load(), (l) => l.running === 2, 5000);
    expect(busy).toEqual({ running: 2, waiting: 0 });
    // running requests hold blocks: vLLM refuses the reset (success false)
    expect((await raw(d.url, '/reset_prefix_cache', '')).json).toEqual({ success: false });
    const text = (await raw(d.url, '/metrics')).text;
    // both requests are in flight, in vLLM's families and labels; the backend may have either
    // queued for its next step at this read (loaded CI machines read running 1, waiting 1 and
    // running 0, waiting 2), so the test reads the two gauges' sum
    const gauge = (name: string) => Number(new RegExp(`^vllm:${name}\\{engine="0",model_name="floe-tiny"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
    expect(gauge('num_requests_running') + gauge('num_requests_waiting')).toBe(2);
    expect(text).not.toMatch(/floe_engine_/);
    await vllm.pause();
    expect((await a).finishReason).toBe('abort');
    expect((await b).finishReason).toBe('abort');
    await vllm.flushCache();
    await vllm.resume();
    expect(await vllm.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('load() on an exposition without the gauges is an error naming the metric', async () => {
    const srv = http.createServer((_q, s) => { s.writeHead(200, { 'content-type': 'text/plain' }).end('# TYPE other gauge\nother 1\n'); });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    try {
      const err = await rejection(new VllmAdapter(endpoint(`http://127.0.0.1:${(srv.address() as AddressInfo).port}`)).load());
      expect(err.message).toMatch(/no sample of vllm:num_requests_running/);
    } finally {
      await new Promise((r) => srv.close(r));
    }
  });

  it('a restart drops requests and refuses connections (status 0), then answers again with the launch weights', async () => {
    const d = await double({ tokensPerSecond: 20 });
    const vllm = new VllmAdapter(endpoint(d.url));
    await vllm.generate(req({ maxTokens: 2 }));
    const updatesBefore = await backendMetric('floe_engine_weight_updates_total');
    const inflight = vllm.generate(req({ maxTokens: 100, stopTokenIds: [], seed: LONG }));
    await new Promise((r) => setTimeout(r, 300));
    const restarting = d.restart({ downMs: 1500 });
    const dropped = await rejection(inflight);
    expect(dropped.status).toBe(0);
    expect(dropped.unreachable).toBe(true);
    const refused = await rejection(vllm.generate(req()));
    expect(refused.status).toBe(0);
    await expect(vllm.health()).rejects.toMatchObject({ status: 0 });
    await restarting;
    await vllm.health();
    const again = await vllm.generate(req({ maxTokens: 3, stopTokenIds: [], seed: LONG }));
    expect(again.tokenIds).toHaveLength(3);
    expect(again.servedLabels).toEqual(['default']); // the launch label (v1/engine/core.py): floe sees the restart
    expect(d.url).toBe(`http://127.0.0.1:${d.port}`);
    // the backend was reset to the launch folder as version 0
    expect(await backendMetric('floe_engine_weight_updates_total')).toBe(updatesBefore + 1);
    expect(((await raw(backend, '/health')).json as { version: number }).version).toBe(0);
  });

  it('probe(): every capability on a full server; per-token versions are optional and absent', async () => {
    const d = await double();
    const v = byCap(await new VllmAdapter(endpoint(d.url)).probe());
    for (const c of ['health', 'generate', 'logprobs', 'metrics', 'pause', 'resume', 'abort', 'flush_cache', 'load_weights'] as const) expect(v[c], c).toMatchObject({ ok: true });
    expect(v.load_weights.detail).toMatch(/floe_vllm 0\.1\.0 on 1 worker/);
    expect(v.weight_versions).toMatchObject({ ok: false, optional: true });
    expect(d.requests.map((x) => x.route)).toEqual(expect.arrayContaining(['/pause?mode=abort&clear_cache=false', '/resume', '/abort_requests', '/reset_prefix_cache?reset_external=true', '/collective_rpc']));
    expect((await raw(d.url, '/is_paused')).json).toEqual({ is_paused: false });
  });

  it('probe(): without dev mode the dev capabilities fail with the dev-mode fix', async () => {
    const d = await double({ devMode: false });
    const v = byCap(await new VllmAdapter(endpoint(d.url)).probe());
    for (const c of ['health', 'generate', 'logprobs', 'metrics'] as const) expect(v[c], c).toMatchObject({ ok: true });
    for (const c of ['pause', 'resume', 'abort', 'flush_cache', 'load_weights'] as const) {
      expect(v[c], c).toMatchObject({ ok: false });
      expect(v[c].fix, c).toMatch(/VLLM_SERVER_DEV_MODE=1/);
    }
  });

  it('probe(): without the worker extension only load_weights fails, with the extension fix', async () => {
    const d = await double({ workerExtension: false });
    const v = byCap(await new VllmAdapter(endpoint(d.url)).probe());
    for (const c of ['health', 'generate', 'logprobs', 'metrics', 'pause', 'resume', 'abort', 'flush_cache'] as const) expect(v[c], c).toMatchObject({ ok: true });
    expect(v.load_weights).toMatchObject({ ok: false, fix: "--worker-extension-cls floe_vllm.FloeWorkerExtension (pip install the engine/ package into vLLM's env)" });
    expect(v.load_weights.detail).toMatch(/Method 'floe_ping' is not implemented/);
  });

  it('probe() on a busy server does not pause it', async () => {
    const d = await double({ tokensPerSecond: 20 });
    const vllm = new VllmAdapter(endpoint(d.url));
    const pending = vllm.generate(req({ maxTokens: 60, stopTokenIds: [], seed: LONG }));
    await eventually('the request to run', () => vllm.load(), (l) => l.running === 1, 5000);
    const v = byCap(await vllm.probe());
    expect(v.pause).toMatchObject({ ok: true });
    expect(v.pause.detail).toMatch(/not exercised \(1 request\(s\) in flight/);
    expect(d.requests.some((x) => x.route.startsWith('/pause'))).toBe(false);
    expect((await pending).finishReason).toBe('length');
  });
});

describe('ReferenceAdapter against the reference engine', () => {
  it('generates with one weight version per id, loads weights in place, probes clean', async () => {
    const ref = new ReferenceAdapter(endpoint(backend, 'reference'));
    expect(ref.inPlaceUpdates).toBe(true);
    expect(ref.kind).toBe('reference');
    const g = await ref.generate(req({ maxTokens: 6, stopTokenIds: [], seed: LONG }));
    expect(g.tokenIds).toHaveLength(6);
    expect(g.versions).toEqual([0, 0, 0, 0, 0, 0]);
    expect(g.finishReason).toBe('length');
    const { loadMs } = await ref.loadWeights(launch, 0);
    expect(loadMs).toBeGreaterThan(0);
    const wrong = await rejection(ref.loadWeights(launch, 5));
    expect(wrong.status).toBe(400);
    expect(wrong.message).toMatch(/holds version 0/);
    expect(await ref.load()).toEqual({ running: 0, waiting: 0 });
    const v = byCap(await ref.probe());
    for (const c of ['health', 'generate', 'logprobs', 'metrics', 'pause', 'resume', 'abort', 'flush_cache', 'load_weights', 'weight_versions'] as const) expect(v[c], c).toMatchObject({ ok: true });
    expect(((await raw(backend, '/health')).json as { paused: boolean }).paused).toBe(false);
  });

  it('pause aborts what is in flight (the reference /pause only stops scheduling)', async () => {
    const ref = new ReferenceAdapter(endpoint(backend, 'reference'));
    await raw(backend, '/pause', {});
    const pending = ref.generate(req({ maxTokens: 50 }));
    await eventually('the request to wait', () => backendMetric('vllm:num_requests_waiting'), (n) => n >= 1, 10_000);
    await ref.pause();
    expect(await pending).toMatchObject({ tokenIds: [], finishReason: 'abort' });
    await ref.resume();
    expect(((await raw(backend, '/health')).json as { paused: boolean }).paused).toBe(false);
  });
});
