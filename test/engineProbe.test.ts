import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { settings } from './helpers/platform.js';
import { floe } from './helpers/cli.js';
import { startVllmDouble, type VllmDouble } from './helpers/vllmDouble.js';
import { startSglangDouble, type SglangDouble } from './helpers/sglangDouble.js';

/** `floe engine probe <url>` as a user runs it, against floe's reference engine and against
 *  the vLLM and SGLang doubles (test/helpers/*Double.ts), with and without the server flags
 *  floe needs: it detects the kind, prints a verdict per capability, the fix for each
 *  failure, and exits 0 only when floe can train with the engine. */

let gpu: EmbeddedGpu;
let launch: string;
const doubles: (VllmDouble | SglangDouble)[] = [];

/** capability → verdict mark ('ok', 'n/a', 'FAIL') from the printed lines. */
function verdicts(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of stdout.matchAll(/^ {2}(ok|n\/a|FAIL)\s+(\w+)/gm)) out[m[2]] = m[1];
  return out;
}

const CORE = ['health', 'generate', 'logprobs', 'metrics', 'pause', 'resume', 'abort', 'flush_cache', 'load_weights'];
const allOk = (v: Record<string, string>) => Object.fromEntries(CORE.map((c) => [c, v[c]]));

beforeAll(async () => {
  const publishDir = path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-probe`);
  const trainer = await startEmbeddedGpu(settings, { count: 0, checkpoint: '', publishDir, trainer: true });
  await trainer.stop();
  launch = path.join(publishDir, 'v0');
  gpu = await startEmbeddedGpu(settings, { count: 1, checkpoint: launch, publishDir, trainer: false });
}, 300_000);

afterAll(async () => {
  await Promise.all(doubles.map((d) => d.close()));
  await gpu?.stop();
});

describe('floe engine probe', () => {
  it('the reference engine: detected, every capability ok, per-token versions included', async () => {
    const r = await floe(['engine', 'probe', gpu.engines[0].url]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${gpu.engines[0].url}: reference (detected)`);
    const v = verdicts(r.stdout);
    expect(allOk(v)).toEqual(Object.fromEntries(CORE.map((c) => [c, 'ok'])));
    expect(v.weight_versions).toBe('ok');
    expect(r.stdout).toContain('floe can train with this engine (engines.endpoints[].kind: reference)');
  });

  it('a vLLM server: detected; dev mode off fails the RL routes with the flag that fixes it', async () => {
    const full = await startVllmDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch });
    doubles.push(full);
    const ok = await floe(['engine', 'probe', full.url]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`${full.url}: vllm (detected)`);
    expect(allOk(verdicts(ok.stdout))).toEqual(Object.fromEntries(CORE.map((c) => [c, 'ok'])));
    expect(verdicts(ok.stdout).weight_versions).toBe('n/a'); // optional: floe stamps versions itself

    const noDev = await startVllmDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch, devMode: false });
    doubles.push(noDev);
    const bad = await floe(['engine', 'probe', noDev.url, '--kind', 'vllm']);
    expect(bad.code).toBe(1);
    const v = verdicts(bad.stdout);
    expect([v.health, v.generate, v.metrics]).toEqual(['ok', 'ok', 'ok']);
    for (const c of ['pause', 'abort', 'flush_cache', 'load_weights']) expect(v[c]).toBe('FAIL');
    expect(bad.stdout).toContain('→ start vLLM with VLLM_SERVER_DEV_MODE=1');
    expect(bad.stdout).toContain('floe cannot train with this engine until the FAIL lines are fixed');

    const noExt = await startVllmDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch, workerExtension: false });
    doubles.push(noExt);
    const ext = await floe(['engine', 'probe', noExt.url, '--kind', 'vllm', '--json']);
    expect(ext.code).toBe(1);
    const report = JSON.parse(ext.stdout) as { kind: string; ok: boolean; verdicts: { capability: string; ok: boolean; fix?: string }[] };
    expect(report).toMatchObject({ kind: 'vllm', ok: false });
    expect(report.verdicts.filter((x) => !x.ok && !['weight_versions'].includes(x.capability)).map((x) => [x.capability, x.fix])).toEqual([
      ['load_weights', "--worker-extension-cls floe_vllm.FloeWorkerExtension (pip install the engine/ package into vLLM's env)"],
    ]);
  });

  it('an SGLang server: detected; without --enable-metrics the metrics verdict says so', async () => {
    const full = await startSglangDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch, returnOriginalLogprob: true });
    doubles.push(full);
    const ok = await floe(['engine', 'probe', full.url]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`${full.url}: sglang (detected)`);
    expect(allOk(verdicts(ok.stdout))).toEqual(Object.fromEntries(CORE.map((c) => [c, 'ok'])));

    const noMetrics = await startSglangDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch, metrics: false, returnOriginalLogprob: true });
    doubles.push(noMetrics);
    const bad = await floe(['engine', 'probe', noMetrics.url, '--kind', 'sglang']);
    expect(bad.code).toBe(1);
    expect(verdicts(bad.stdout).metrics).toBe('FAIL');
    expect(bad.stdout).toMatch(/→ .*--enable-metrics/);
  });

  it('an SGLang server without SGLANG_RETURN_ORIGINAL_LOGPROB=1: its temperature-scaled log-probs fail with the launch-line fix', async () => {
    const scaled = await startSglangDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch });
    doubles.push(scaled);
    const bad = await floe(['engine', 'probe', scaled.url]);
    expect(bad.code).toBe(1);
    const v = verdicts(bad.stdout);
    expect(v.original_logprobs).toBe('FAIL');
    expect(bad.stdout).toMatch(/original_logprobs .*temperature-scaled/);
    expect(bad.stdout).toMatch(/→ launch SGLang with SGLANG_RETURN_ORIGINAL_LOGPROB=1/);
    // negative control: the same server launched right passes the same check
    const right = await startSglangDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch, returnOriginalLogprob: true });
    doubles.push(right);
    const ok = await floe(['engine', 'probe', right.url]);
    expect(verdicts(ok.stdout).original_logprobs).toBe('ok');
    expect(ok.code).toBe(0);
  });

  it('a server with --api-key: without the key in the environment the probe fails with the variable to set; with it, ok', async () => {
    const key = 'floe-test-key';
    const v = await startVllmDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch, apiKey: key });
    const s = await startSglangDouble({ backend: gpu.engines[0].url, launchCheckpoint: launch, apiKey: key, returnOriginalLogprob: true });
    doubles.push(v, s);
    for (const d of [v, s]) {
      const bad = await floe(['engine', 'probe', d.url], { FLOE_ENGINE_KEY_PROBE: '' });
      expect(bad.code).toBe(1);
      expect(verdicts(bad.stdout).generate).toBe('FAIL');
      expect(bad.stdout).toMatch(/→ the server wants an API key .*export FLOE_ENGINE_KEY_PROBE=<key>/);
      const ok = await floe(['engine', 'probe', d.url], { FLOE_ENGINE_KEY_PROBE: key });
      expect(ok.code).toBe(0);
      expect(allOk(verdicts(ok.stdout))).toEqual(Object.fromEntries(CORE.map((c) => [c, 'ok'])));
    }
  });

  it('nothing listening, or a bad argument: an error naming what is wrong', async () => {
    const none = await floe(['engine', 'probe', 'http://127.0.0.1:9']);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toMatch(/nothing answers at http:\/\/127\.0\.0\.1:9/);
    const kind = await floe(['engine', 'probe', gpu.engines[0].url, '--kind', 'tgi']);
    expect(kind.code).not.toBe(0);
    expect(kind.stderr).toContain("unknown engine kind 'tgi' (reference, vllm or sglang)");
  });
});
