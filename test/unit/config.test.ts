import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyOverrides, ConfigError, parseRunConfig } from '../../core/config.js';
import { loadRunConfig } from '../../cli/config.js';

const tmp = (name: string, text: string) => {
  const f = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'floe-cfg-')), name);
  fs.writeFileSync(f, text);
  return f;
};

describe('run config', () => {
  it('keeps held-out tasks out of training, and asks for the periodic evaluation that scores them', () => {
    expect(parseRunConfig({ evaluation: { every: 5, heldOut: ['x'] } }).evaluation).toMatchObject({ every: 5, heldOut: ['x'] });
    expect(() => parseRunConfig({ tasks: { include: ['x', 'y'] }, evaluation: { every: 5, heldOut: ['y'] } })).toThrow(/evaluation\.heldOut: held-out tasks must not be trained on, but tasks\.include lists y/);
    expect(() => parseRunConfig({ evaluation: { heldOut: ['y'] } })).toThrow(/evaluation\.every: .*set evaluation\.every/);
  });

  it('has defaults that fit the embedded setup', () => {
    const c = parseRunConfig({});
    expect(c.tasks.source).toBe('toy');
    expect(c.engines.router).toBe('least-loaded');
    expect(parseRunConfig({ engines: { router: 'cache-aware' } }).engines.router).toBe('cache-aware');
    expect(c.rollout.groupSize).toBeGreaterThan(1);
    expect(c.sandbox.memoryMb).toBeGreaterThan(0);
  });

  it('gives each trainer step setting its one default (the Python trainer has none), and bounds them', () => {
    expect(parseRunConfig({}).trainer).toMatchObject({ weightDecay: 0, ratioMode: 'clip', truncateCap: 2, lossAgg: 'token-mean', gradClip: 1, microBatchTokens: 16384 });
    expect(parseRunConfig({ trainer: { ratioMode: 'truncate', lossAgg: 'seq-mean-token-mean', weightDecay: 0.01 } }).trainer).toMatchObject({ ratioMode: 'truncate', lossAgg: 'seq-mean-token-mean', weightDecay: 0.01 });
    const bad = { weightDecay: -0.1, ratioMode: 'ppo', truncateCap: 0, lossAgg: 'sum', gradClip: 0, microBatchTokens: 1.5 };
    for (const [k, v] of Object.entries(bad)) expect(() => parseRunConfig({ trainer: { [k]: v } })).toThrow(new RegExp(`trainer\\.${k}: `));
  });

  it('names the path and the reason of every bad field', () => {
    try {
      parseRunConfig({ rollout: { groupSize: 0, extra: true }, engines: { router: 'random' } }, 'bad.yaml');
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const msg = (err as Error).message;
      expect(msg).toContain('bad.yaml');
      expect(msg).toMatch(/rollout\.groupSize: .*>0/);
      expect(msg).toMatch(/rollout: Unrecognized key: "extra"/);
      expect(msg).toMatch(/engines\.router: .*least-loaded/);
    }
  });

  it('names the tokenizer a model needs, and refuses models it does not know', () => {
    expect(parseRunConfig({}).policy).toMatchObject({ model: 'tiny', tokenizer: 'byte', chatTemplate: '' });
    expect(parseRunConfig({ policy: { model: 'hf:configs/models/qwen3-cpu.json', tokenizer: 'builtin:qwen3.6' } }).policy.tokenizer).toBe('builtin:qwen3.6');
    expect(() => parseRunConfig({ policy: { tokenizer: 'builtin:qwen3.6' } }, 'x.yaml')).toThrow(/policy\.tokenizer: the tiny policy reads bytes/);
    expect(() => parseRunConfig({ policy: { model: 'gpt2' } }, 'x.yaml')).toThrow(/policy\.model: unknown model "gpt2"/);
  });

  it('applies --set overrides, parsing JSON values', () => {
    const o = applyOverrides({ rollout: { groupSize: 4 } }, ['rollout.groupSize=2', 'name=x y', 'tasks.include=["a","b"]']);
    expect(parseRunConfig(o)).toMatchObject({ name: 'x y', rollout: { groupSize: 2 }, tasks: { include: ['a', 'b'] } });
    expect(() => applyOverrides({}, ['novalue'])).toThrow(/key\.path=value/);
  });

  it('reads YAML and JSON files and refuses broken ones with the file name', () => {
    expect(loadRunConfig(tmp('ok.yaml', 'name: demo\nrollout:\n  groupSize: 3\n')).rollout.groupSize).toBe(3);
    expect(loadRunConfig(tmp('ok.json', '{"training": {"updates": 5}}')).training.updates).toBe(5);
    expect(() => loadRunConfig(tmp('bad.yaml', 'rollout: [1, 2'))).toThrow(/bad\.yaml.*cannot parse/s);
    expect(() => loadRunConfig(tmp('list.yaml', '- 1\n- 2\n'))).toThrow(/top level must be a mapping/);
    expect(() => loadRunConfig(tmp('typo.yaml', 'sandbox:\n  memoryMB: 100\n'))).toThrow(/sandbox: Unrecognized key: "memoryMB"/);
    expect(() => loadRunConfig('/nonexistent/floe.yaml')).toThrow(/file not found/);
  });

  it('parses every committed config, and the stress test keeps its recipe', () => {
    const dir = path.join(import.meta.dirname, '..', '..', 'configs');
    const files = fs.readdirSync(dir).filter((f) => /\.(ya?ml|json)$/.test(f));
    expect(files).toContain('stress-test.yaml');
    for (const f of files) expect(() => loadRunConfig(path.join(dir, f))).not.toThrow();
    const stress = loadRunConfig(path.join(dir, 'stress-test.yaml'));
    expect(stress.trainer).toMatchObject({ advantage: 'reward', epochs: 6, minibatches: 16 });
    // from a weak start, the pool by the published rule, 20 epochs over 16 tasks
    expect(stress.evaluation).toEqual({ attempts: 4, atStart: true, atEnd: true, poolFromStart: true, every: 0, heldOut: [] });
    expect(stress.policy.warmStartSteps).toBe(300);
    expect((stress.training.updates * stress.training.groupsPerUpdate) / stress.tasks.limit).toBeGreaterThanOrEqual(20);
    // the router comparison shares the stress test's candidate pool (its own, longer warm start:
    // it compares placement, not the climb)
    const router = loadRunConfig(path.join(dir, 'router-comparison.yaml'));
    expect(router.policy.maxTokensPerTurn).toBe(stress.policy.maxTokensPerTurn);
    expect(router.tasks.limit).toBe(stress.tasks.limit);
    expect(router.engines.count).toBeGreaterThanOrEqual(2);
  });
});
