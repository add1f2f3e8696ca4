import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildWarmStart, type GoldTrajectory } from '../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { parseRunConfig } from '../core/config.js';
import { trainStepConfig, type TrainingSample } from '../core/contracts.js';
import { modelFolder } from '../activities/modelFolder.js';
import { SglangAdapter, sglangGauge, SGLANG_VERSION } from '../activities/engines/sglang.js';
import { engineHttp, type EngineEndpoint, type GenerateRequest } from '../activities/engines/adapter.js';
import { settings } from './helpers/platform.js';
import { rejection } from './helpers/rejection.js';
import { startSglangDouble, SGLANG_DOUBLE_VERSION, type SglangDouble } from './helpers/sglangDouble.js';

/** floe's SGLang adapter against a double of SGLang 0.5.23 (test/helpers/sglangDouble.ts),
 *  which generates with a real reference engine (a briefly warm-started tiny policy on CPU)
 *  and a reference trainer that publishes the folders loaded here. */

const EOS = 256;
let gpu: EmbeddedGpu;
let checkpoint: string;
let backend: string;
/** a server with none of SGLang's routes (/health answers JSON, /metrics has vLLM's gauges): what
 *  the adapter meets when pointed at the wrong server */
let notSglang: { url: string; close(): Promise<void> };
/** as fast as the backend */
let fast: SglangDouble;
/** releases 25 ids a second, so pauses and aborts land on requests in flight */
let slow: SglangDouble;
/** launched without --enable-metrics */
let bare: SglangDouble;
const RATE = 25;

const ep = (d: { url: string }, id: string): EngineEndpoint => ({ id, url: d.url, node: 'local', kind: 'sglang' });
const adapter = (d: { url: string }, id = 'sglang-test') => new SglangAdapter(ep(d, id));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PROMPT = [...Buffer.from('floe talks to SGLang: ')];
let seq = 0;
const req = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({ requestId: `t-${process.pid}-${seq++}`, promptIds: PROMPT, maxTokens: 16, temperature: 0, topP: 1, stopTokenIds: [], ...over });

async function post(url: string, route: string, body?: unknown) {
  const res = await fetch(`${url}${route}`, { method: 'POST', headers: body === undefined ? undefined : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json: unknown = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* text */ }
  return { status: res.status, text, json };
}
const getJson = async <T>(url: string) => (await (await fetch(url)).json()) as T;
const backendVersion = async () => (await getJson<{ version: number }>(`${backend}/health`)).version;

/** The backend's own answer, for what the double must reproduce. */
async function direct(o: { prompt: number[]; maxTokens: number; temperature: number; seed?: number; stop?: number[] }) {
  const r = await post(backend, '/v1/completions', { prompt: o.prompt, max_tokens: o.maxTokens, temperature: o.temperature, seed: o.seed, stop_token_ids: o.stop ?? [], logprobs: 1, return_token_ids: true });
  const c = (r.json as { choices: { token_ids: number[]; logprobs: { token_logprobs: number[] }; finish_reason: string }[] }).choices[0];
  return { ids: c.token_ids, lps: c.logprobs.token_logprobs, finish: c.finish_reason };
}

/** A seed whose sample from PROMPT runs long (at least `want` ids, or the longest of 24 seeds),
 *  so a pause or a gauge read lands mid-generation at the paced rate. */
async function longSeed(want: number): Promise<{ seed: number; long: Awaited<ReturnType<typeof direct>> }> {
  let seed = 0;
  let long = await direct({ prompt: PROMPT, maxTokens: 120, temperature: 1, seed });
  for (let s = 1; s < 24 && long.ids.length < want; s++) {
    const d = await direct({ prompt: PROMPT, maxTokens: 120, temperature: 1, seed: s });
    if (d.ids.length > long.ids.length) { long = d; seed = s; }
  }
  return { seed, long };
}

async function startNotSglang(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((q, res) => {
    q.resume();
    q.on('end', () => {
      const send = (status: number, body: string, type = 'application/json') => { res.writeHead(status, { 'content-type': type }); res.end(body); };
      if (q.method === 'GET' && q.url === '/health') return send(200, JSON.stringify({ status: 'ok' }));
      if (q.method === 'GET' && q.url === '/metrics') return send(200, 'vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n', 'text/plain');
      send(404, JSON.stringify({ detail: 'Not Found' }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

beforeAll(async () => {
  // a tiny policy taught one sentence (the byte tokenizer; no sandbox needed)
  const text = [...Buffer.from('floe talks to SGLang: generate, pause, load, flush, resume. ')];
  const gold: GoldTrajectory[] = [{ taskId: 'sglang-double', ids: [...text, EOS], lossMask: [...text.map((_, i) => (i < 22 ? 0 : 1)), 1], replies: [text.length - 22 + 1] }];
  checkpoint = await buildWarmStart(settings, gold, { steps: 4, lr: 1e-3, model: 'tiny', seed: 0, batchSize: 2 });
  gpu = await startEmbeddedGpu(settings, { count: 1, checkpoint, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-sglang`), trainer: true });
  backend = gpu.engines[0].url;
  notSglang = await startNotSglang();
  fast = await startSglangDouble({ backend, launchCheckpoint: checkpoint, deterministicInference: true, returnOriginalLogprob: true });
  slow = await startSglangDouble({ backend, launchCheckpoint: checkpoint, deterministicInference: true, tokensPerSecond: RATE, returnOriginalLogprob: true });
  bare = await startSglangDouble({ backend, launchCheckpoint: checkpoint, metrics: false, returnOriginalLogprob: true });
}, 600_000);

afterAll(async () => {
  await Promise.all([fast?.close(), slow?.close(), bare?.close(), notSglang?.close()]);
  await gpu?.stop();
});

describe('SGLang adapter (against the SGLang 0.5.23 double)', () => {
  it('is pinned to the release the double reproduces', () => {
    expect(SGLANG_VERSION).toBe(SGLANG_DOUBLE_VERSION);
    const a = adapter(fast);
    expect([a.kind, a.inPlaceUpdates]).toEqual(['sglang', false]);
  });

  it('generates from token ids: the ids, one logprob each and the finish reason, as the engine made them', async () => {
    const want = await direct({ prompt: PROMPT, maxTokens: 12, temperature: 0 });
    const r = await adapter(fast).generate(req({ maxTokens: 12 }));
    expect(r.tokenIds).toEqual(want.ids);
    expect(r.logprobs).toHaveLength(r.tokenIds.length);
    r.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(want.lps[i], 4));
    expect(r.finishReason).toBe(want.finish);
    expect(r.versions).toBeNull();
    // what went over the wire: SGLang's native request
    const sent = fast.requests.filter((q) => q.route === '/generate').at(-1)!.body as Record<string, unknown>;
    expect(sent).toMatchObject({ input_ids: PROMPT, return_logprob: true, logprob_start_len: -1, stream: false, sampling_params: { max_new_tokens: 12, temperature: 0, top_p: 1, stop_token_ids: [] } });
    expect(typeof sent.rid).toBe('string');
  });

  it('a sampled request with a seed is the backend\'s sample for that seed (--enable-deterministic-inference)', async () => {
    const want = await direct({ prompt: PROMPT, maxTokens: 10, temperature: 1, seed: 7 });
    const r = await adapter(fast).generate(req({ maxTokens: 10, temperature: 1, seed: 7 }));
    expect(r.tokenIds).toEqual(want.ids);
  });

  it('stops on a stop id, which is the last id returned (SGLang keeps it in output_ids)', async () => {
    const greedy = await direct({ prompt: PROMPT, maxTokens: 24, temperature: 0 });
    let j = greedy.ids.findIndex((t, i) => i >= 2 && greedy.ids.indexOf(t) === i && t !== EOS);
    if (j < 0) j = 0;
    const stopId = greedy.ids[j];
    const r = await adapter(fast).generate(req({ maxTokens: 24, stopTokenIds: [stopId] }));
    expect(r.finishReason).toBe('stop');
    expect(r.tokenIds).toEqual(greedy.ids.slice(0, j + 1));
    expect(r.tokenIds.at(-1)).toBe(stopId);
    expect(r.logprobs).toHaveLength(j + 1);
    // the raw answer: output_ids ends in the matched id, finish_reason {type: stop, matched}
    const raw = await post(fast.url, '/generate', adapter(fast).generateBody(req({ maxTokens: 24, stopTokenIds: [stopId] })));
    const body = raw.json as { output_ids: number[]; meta_info: { finish_reason: unknown; completion_tokens: number } };
    expect(body.output_ids.at(-1)).toBe(stopId);
    expect(body.meta_info.finish_reason).toEqual({ type: 'stop', matched: stopId });
    expect(body.meta_info.completion_tokens).toBe(j + 1);
  });

  it('a pause during a long generation aborts it with the ids made so far; requests sent while paused wait for resume', async () => {
    const a = adapter(slow);
    // a seed whose sample runs long, so the pause lands mid-generation
    const { seed, long } = await longSeed(60);
    expect(long.ids.length).toBeGreaterThanOrEqual(30);
    const started = Date.now();
    const g = a.generate(req({ maxTokens: 120, temperature: 1, seed }));
    await sleep(500);
    expect(await a.load()).toEqual({ running: 1, waiting: 0 });
    await a.pause();
    const r = await g;
    expect(r.finishReason).toBe('abort');
    expect(r.tokenIds.length).toBeGreaterThan(0);
    expect(r.tokenIds.length).toBeLessThan(long.ids.length);
    expect(r.tokenIds.length).toBeLessThanOrEqual(Math.ceil(((Date.now() - started) / 1000) * RATE));
    expect(r.tokenIds).toEqual(long.ids.slice(0, r.tokenIds.length));
    expect(r.logprobs).toHaveLength(r.tokenIds.length);
    expect(await a.load()).toEqual({ running: 0, waiting: 0 });

    let settled = false;
    const held = a.generate(req({ maxTokens: 3 })).finally(() => { settled = true; });
    await sleep(600);
    expect(settled).toBe(false);
    await a.resume();
    const h = await held;
    expect(h.tokenIds.length).toBeGreaterThan(0);
    expect(h.finishReason).not.toBe('abort');
  });

  it('aborts one request by id, or all', async () => {
    const a = adapter(slow);
    const one = req({ maxTokens: 100, temperature: 1, seed: 3 });
    const g = a.generate(one);
    await sleep(300);
    await a.abort([one.requestId]);
    expect((await g).finishReason).toBe('abort');
    expect(slow.requests.filter((q) => q.route === '/abort_request').at(-1)!.body).toEqual({ rid: one.requestId });

    const both = [a.generate(req({ maxTokens: 100, temperature: 1, seed: 4 })), a.generate(req({ maxTokens: 100, temperature: 1, seed: 5 }))];
    await sleep(300);
    await a.abort();
    for (const r of await Promise.all(both)) expect(r.finishReason).toBe('abort');
    expect(slow.requests.filter((q) => q.route === '/abort_request').at(-1)!.body).toEqual({ abort_all: true });
  });

  it('health of a paused server: /health\'s generation waits behind the pause, the adapter still says it is alive', async () => {
    await adapter(fast).pause();
    try {
      const t0 = Date.now();
      await adapter(fast).health();
      expect(Date.now() - t0).toBeLessThan(10_000); // SGLang's own /health would answer 503 after 20 s
      expect(fast.requests.some((q) => q.route === '/model_info')).toBe(true);
    } finally {
      await adapter(fast).resume();
    }
    // negative control: a server that is not there is not healthy
    await expect(adapter({ url: 'http://127.0.0.1:9' }).health()).rejects.toMatchObject({ status: 0 });
  }, 60_000);

  it('log-probs: temperature-scaled unless SGLANG_RETURN_ORIGINAL_LOGPROB=1, as SGLang\'s sampler returns them', async () => {
    const scaled = await startSglangDouble({ backend, launchCheckpoint: checkpoint, deterministicInference: true });
    try {
      // a prompt the policy was not taught: its next-token distributions are broad, where
      // scaling moves a log-prob most (on a near-certain id it moves it little)
      const odd = [...Buffer.from('qz#7 ')];
      const r = req({ promptIds: odd, maxTokens: 3, temperature: 0.5, seed: 4 });
      const s1 = await adapter(scaled).generate(r);
      const o1 = await adapter(fast).generate({ ...r, requestId: `${r.requestId}-o` });
      expect(s1.tokenIds).toEqual(o1.tokenIds); // same seed, same sampling: the same ids
      const raw = await direct({ prompt: odd, maxTokens: 3, temperature: 0.5, seed: 4 });
      expect(o1.logprobs).toEqual(raw.lps); // launched right: the policy's own
      expect(s1.logprobs.some((x, i) => Math.abs(x - raw.lps[i]) > 0.01)).toBe(true); // scaled: not
      // at temperature 1 scaling changes nothing
      const t1 = req({ promptIds: odd, maxTokens: 3, temperature: 1, seed: 4 });
      expect((await adapter(scaled).generate(t1)).logprobs).toEqual((await direct({ prompt: odd, maxTokens: 3, temperature: 1, seed: 4 })).lps);
      const v = (await adapter(scaled).probe()).find((x) => x.capability === 'original_logprobs');
      expect(v).toMatchObject({ ok: false, fix: expect.stringMatching(/SGLANG_RETURN_ORIGINAL_LOGPROB=1/) });
    } finally {
      await scaled.close();
    }
  }, 120_000);

  it('health: an empty 200 body is healthy', async () => {
    const res = await fetch(`${fast.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    await adapter(fast).health();
    await adapter(bare).health();
  });

  it('load() reads sglang:num_running_reqs / sglang:num_queue_reqs; without --enable-metrics it fails naming the flag', async () => {
    expect(await adapter(fast).load()).toEqual({ running: 0, waiting: 0 });
    const res = await fetch(`${bare.url}/metrics`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: 'Not Found' });
    const err = await rejection(adapter(bare).load());
    expect(err.status).toBe(404);
    expect(err.fix).toMatch(/--enable-metrics/);
    // an exposition without the gauges (another server's) is an error naming the flag too
    const ref = await rejection(new SglangAdapter({ id: 'other', url: notSglang.url, node: 'local', kind: 'sglang' }).load());
    expect(ref.message).toMatch(/sglang:num_running_reqs/);
    expect(ref.fix).toMatch(/--enable-metrics/);
  });

  it('the gauges hold between refreshes, as SGLang publishes them (each prefill, every 40 decode steps, on going idle)', async () => {
    const a = adapter(slow);
    const { seed, long: best } = await longSeed(30);
    expect(best.ids.length).toBeGreaterThanOrEqual(20); // ≥ 0.8 s at the paced rate
    const long = a.generate(req({ maxTokens: 120, temperature: 1, seed }));
    await sleep(50);
    const short = await a.generate(req({ maxTokens: 2, temperature: 0 }));
    expect(short.tokenIds.length).toBeGreaterThan(0);
    // the short request has finished, but no prefill, idle or 40-step refresh has happened since it was admitted
    expect((await a.load()).running).toBe(2);
    await long;
    expect(await a.load()).toEqual({ running: 0, waiting: 0 }); // published on going idle
  });

  it('sums a gauge over DP ranks, once per batch (TP rank 0) and the total only under priority scheduling', () => {
    const text = [
      '# TYPE sglang:num_running_reqs gauge',
      'sglang:num_running_reqs{dp_rank="0",model_name="m",priority="",tp_rank="0"} 3.0',
      'sglang:num_running_reqs{dp_rank="0",model_name="m",priority="1",tp_rank="0"} 3.0',
      'sglang:num_running_reqs{dp_rank="0",model_name="m",priority="",tp_rank="1"} 3.0',
      'sglang:num_running_reqs{dp_rank="1",model_name="m",priority="",tp_rank="0"} 2.0',
      'sglang:num_running_reqs_total 9',
    ].join('\n');
    expect(sglangGauge(text, 'sglang:num_running_reqs')).toBe(5);
    expect(sglangGauge(text, 'sglang:num_queue_reqs')).toBeNull();
  });

  it('routes vLLM has and SGLang lacks are 404 {"detail":"Not Found"} (missingRoute), with a fix from the adapter', async () => {
    for (const route of ['/pause', '/resume', '/is_paused', '/collective_rpc', '/abort_requests', '/update_weights', '/reset_prefix_cache', '/sleep']) {
      const err = await rejection(engineHttp(ep(fast, 'sg'), route, { body: {} }));
      expect([route, err.status, err.missingRoute]).toEqual([route, 404, true]);
      expect(err.message).toContain('{"detail":"Not Found"}');
    }
    const get = await rejection(engineHttp(ep(fast, 'sg'), '/generate'));
    expect([get.status, get.missingRoute]).toEqual([405, true]);
    // a server without SGLang's routes: the adapter says what to run
    const ref = new SglangAdapter({ id: 'other', url: notSglang.url, node: 'local', kind: 'sglang' });
    for (const call of [() => ref.pause(), () => ref.resume(), () => ref.generate(req()), () => ref.abort(['x'])]) {
      const err = await rejection(call());
      expect(err.missingRoute).toBe(true);
      expect(err.fix).toMatch(/SGLang 0\.5\.23/);
    }
  });

  it('max_new_tokens is capped at what the context leaves; a prompt that leaves nothing is prompt_too_long, as on vLLM', async () => {
    const ctx = (await getJson<{ max_model_len: number }>(`${backend}/health`)).max_model_len;
    expect(await adapter(fast).contextLength()).toBe(ctx); // GET /v1/models → data[0].max_model_len
    // SGLang itself refuses prompt + max_new_tokens past the context (no clamping) ...
    const refused = await post(fast.url, '/generate', { input_ids: Array.from({ length: ctx - 10 }, () => 97), sampling_params: { max_new_tokens: 20 } });
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/maximum context length/);
    // ... so the adapter asks for what fits: the turn ends at the context, not a turn budget early
    const tight = await adapter(fast).generate(req({ promptIds: Array.from({ length: ctx - 10 }, () => 97), maxTokens: 20, temperature: 1, seed: 3 }));
    expect(tight.tokenIds.length).toBeGreaterThan(0);
    expect(tight.tokenIds.length).toBeLessThanOrEqual(10);
    expect(fast.requests.filter((q) => q.route === '/generate').at(-1)!.body).toMatchObject({ sampling_params: { max_new_tokens: 10 } });
    // a prompt of the whole context: prompt_too_long before anything is sent (vLLM: the same)
    const sent = fast.requests.length;
    const tooLong = await rejection(adapter(fast).generate(req({ promptIds: Array.from({ length: ctx }, () => 97) })));
    expect([tooLong.status, tooLong.promptTooLong]).toEqual([400, true]);
    expect(fast.requests.slice(sent).filter((q) => q.route === '/generate')).toEqual([]);
    // negative control: one id of room is a request, not prompt_too_long
    const one = await adapter(fast).generate(req({ promptIds: Array.from({ length: ctx - 1 }, () => 97), maxTokens: 5 }));
    expect(one.tokenIds.length).toBe(1);
  });

  it('the double refuses what SGLang refuses: an unknown sampling param, a missing body', async () => {
    const r = await post(fast.url, '/generate', { input_ids: PROMPT, sampling_params: { max_new_tokens: 2, seed: 1 } });
    expect(r.status).toBe(400);
    expect((r.json as { error: string }).error).toMatch(/^unknown field `seed`, expected one of `max_new_tokens`/);
    const nobody = await post(fast.url, '/continue_generation');
    expect(nobody.status).toBe(400);
    expect(nobody.json).toMatchObject({ object: 'error', type: 'Bad Request', code: 400 });
  });

  it('flush_cache is refused while a request runs; flushCache() waits for idle', async () => {
    const a = adapter(slow);
    let done = 0;
    const g = a.generate(req({ maxTokens: 20, temperature: 1, seed: 11 })).then((r) => { done = Date.now(); return r; });
    await sleep(200);
    const busy = await post(slow.url, '/flush_cache');
    expect(busy.status).toBe(400);
    expect(busy.text).toBe('Flush cache failed.\n');
    await a.flushCache();
    const flushed = Date.now();
    expect((await g).finishReason).not.toBe('abort');
    expect(done).toBeGreaterThan(0);
    expect(done).toBeLessThanOrEqual(flushed);
    const ok = await post(slow.url, '/flush_cache');
    expect([ok.status, ok.text.startsWith('Cache flushed.')]).toEqual([200, true]);
  });

  it('probe: every capability on an idle server, without pausing a busy one, and what a non-SGLang server lacks', async () => {
    const loadsBefore = fast.requests.filter((q) => q.route === '/update_weights_from_disk').length;
    const v = await adapter(fast).probe();
    expect(v.map((x) => x.capability)).toEqual(['health', 'generate', 'logprobs', 'original_logprobs', 'metrics', 'pause', 'resume', 'abort', 'flush_cache', 'load_weights', 'weight_versions']);
    expect(v.filter((x) => !x.ok).map((x) => [x.capability, x.optional])).toEqual([['weight_versions', true]]);
    expect(v.find((x) => x.capability === 'health')!.detail).toMatch(/empty body.*SGLang 0\.5\.23/);
    // nothing was loaded: the one load_weights request had no model_path
    expect(fast.requests.filter((q) => q.route === '/update_weights_from_disk').slice(loadsBefore).map((q) => q.body)).toEqual([{}]);
    expect(await backendVersion()).toBe(0);

    // without metrics, pause and resume are checked without pausing
    const b = await adapter(bare).probe();
    expect(b.find((x) => x.capability === 'metrics')).toMatchObject({ ok: false, fix: expect.stringMatching(/--enable-metrics/) });
    expect(b.find((x) => x.capability === 'pause')).toMatchObject({ ok: true, detail: expect.stringMatching(/not paused/) });
    expect(bare.requests.some((q) => q.route === '/pause_generation' && (q.body as { mode?: string }).mode === 'abort')).toBe(false);

    // a paused server (a weight update under way, say) is left paused
    await adapter(fast).pause();
    const p = await adapter(fast).probe();
    expect(p.find((x) => x.capability === 'resume')).toMatchObject({ ok: true, detail: expect.stringMatching(/ready is 503/) });
    expect(p.find((x) => x.capability === 'health')).toMatchObject({ ok: false, detail: expect.stringMatching(/paused/) });
    expect((await fetch(`${fast.url}/ready`)).status).toBe(503);
    await adapter(fast).resume();

    // a busy server is not paused: its request runs to its end
    const g = adapter(slow).generate(req({ maxTokens: 60, temperature: 1, seed: 2 }));
    await sleep(300);
    const s = await adapter(slow).probe();
    // 1 running, or 2: SGLang's gauges hold until their next refresh, so the probe's own
    // one-id generation, admitted meanwhile, may still be counted (metrics_reporter.py)
    expect(s.find((x) => x.capability === 'pause')).toMatchObject({ ok: true, detail: expect.stringMatching(/[12] running and 0 queued, so not paused/) });
    expect((await g).finishReason).not.toBe('abort');

    // a server that is not SGLang: no /generate, no sglang gauges, no pause_generation
    const r = await new SglangAdapter({ id: 'other', url: notSglang.url, node: 'local', kind: 'sglang' }).probe();
    for (const cap of ['generate', 'logprobs', 'metrics', 'pause'] as const) expect([cap, r.find((x) => x.capability === cap)!.ok]).toEqual([cap, false]);
    expect(r.find((x) => x.capability === 'generate')!.fix).toMatch(/SGLang 0\.5\.23/);
  });

  it('loads a published folder as a version: paused, loaded, flushed, resumed; a bad folder is refused', async () => {
    const completion = [...Buffer.from('load me')];
    const sample: TrainingSample = {
      rollout_id: 'load-me', group_id: 'load-me', reward: 1, advantage: 1, ids: [...PROMPT, ...completion],
      loss_mask: [...PROMPT.map(() => 0), ...completion.map(() => 1)], behaviour_logprobs: [...PROMPT.map(() => 0), ...completion.map(() => -1)],
      token_versions: [...PROMPT.map(() => -1), ...completion.map(() => 0)],
    };
    const step = await post(gpu.trainer!.url, '/train_step', { samples: [sample], config: trainStepConfig(parseRunConfig({ trainer: { lr: 1e-3 } }).trainer, 1, 1) });
    expect(step.status).toBe(200);
    const published = step.json as { version: number; path: string };
    expect(published.version).toBe(1);
    const folder = modelFolder(published.path);
    const a = adapter(fast);
    await a.pause();
    const { loadMs } = await a.loadWeights(folder, 1);
    expect(loadMs).toBeGreaterThanOrEqual(0);
    await a.flushCache();
    await a.resume();
    expect(fast.requests.filter((q) => q.route === '/update_weights_from_disk').at(-1)!.body).toEqual({ model_path: folder, weight_version: '1', abort_all_requests: true, flush_cache: false });
    expect(await backendVersion()).toBe(1);
    expect(await getJson<{ model_path: string; weight_version: string }>(`${fast.url}/get_model_info`)).toMatchObject({ model_path: folder, weight_version: '1' });
    const raw = await post(fast.url, '/generate', a.generateBody(req({ maxTokens: 3 })));
    expect((raw.json as { meta_info: { weight_version: string } }).meta_info.weight_version).toBe('1');
    expect((await a.generate(req({ maxTokens: 3 }))).versions).toBeNull();

    const bad = await rejection(a.loadWeights(path.join(folder, 'no-such-folder'), 2));
    expect(bad.status).toBe(400);
    expect(bad.message).toMatch(/Failed to get weights iterator/);
    expect(await backendVersion()).toBe(1);
  });

  it('a pause in mode retract (floe\'s keep) keeps a long generation through a load: it goes on under the new weights, its spans say where', async () => {
    const a = adapter(slow);
    const { seed, long } = await longSeed(60);
    expect(long.ids.length).toBeGreaterThanOrEqual(30);
    const before = await backendVersion();
    const g = a.generate(req({ maxTokens: 120, temperature: 1, seed }));
    await sleep(500);
    await a.pause('keep');
    // a new version, published by the trainer while the request is held
    const completion = [...Buffer.from('keep me')];
    const sample: TrainingSample = {
      rollout_id: 'keep-me', group_id: 'keep-me', reward: 1, advantage: 1, ids: [...PROMPT, ...completion],
      loss_mask: [...PROMPT.map(() => 0), ...completion.map(() => 1)], behaviour_logprobs: [...PROMPT.map(() => 0), ...completion.map(() => -1)],
      token_versions: [...PROMPT.map(() => -1), ...completion.map(() => before)],
    };
    const step = await post(gpu.trainer!.url, '/train_step', { samples: [sample], config: trainStepConfig(parseRunConfig({ trainer: { lr: 1e-3 } }).trainer, before + 1, before + 1) });
    expect(step.status).toBe(200);
    const published = step.json as { version: number; path: string };
    await a.loadWeights(modelFolder(published.path), published.version, { keepRequests: true });
    await a.flushCache({ running: true });
    await a.resume();
    const r = await g;
    expect(r.finishReason).not.toBe('abort');
    const labels = r.servedSpans!.map((x) => x.label);
    expect(labels).toHaveLength(2);
    expect(labels[1]).toBe(String(published.version));
    const at = r.servedSpans![1].start;
    expect(at).toBeGreaterThan(0);
    expect(r.tokenIds.slice(0, at)).toEqual(long.ids.slice(0, at)); // the old weights' ids, kept
    expect(r.logprobs).toHaveLength(r.tokenIds.length);
    const bodies = slow.requests.filter((q) => q.route === '/pause_generation' || q.route === '/update_weights_from_disk').map((q) => q.body);
    expect(bodies.at(-2)).toEqual({ mode: 'retract' });
    expect(bodies.at(-1)).toMatchObject({ weight_version: String(published.version), abort_all_requests: false, flush_cache: false });
  });

  it('a restart drops requests and refuses connections, then recovers with its launch weights', async () => {
    const a = adapter(slow);
    const inFlight = a.generate(req({ maxTokens: 100, temperature: 1, seed: 1 }));
    await sleep(300);
    const restarting = slow.restart({ downMs: 1500 });
    expect((await rejection(inFlight)).unreachable).toBe(true);
    await sleep(300);
    const down = await rejection(a.health());
    expect([down.status, down.unreachable]).toEqual([0, true]);
    await restarting;
    await a.health();
    expect(await backendVersion()).toBe(0);
    expect(await getJson<{ weight_version: string; model_path: string }>(`${slow.url}/model_info`)).toMatchObject({ weight_version: 'default', model_path: checkpoint });
    expect((await a.generate(req({ maxTokens: 4 }))).tokenIds.length).toBeGreaterThan(0);
  });
});
