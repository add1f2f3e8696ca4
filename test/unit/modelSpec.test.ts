import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveModel, resolveTokenizer } from '../../activities/renderer.js';

/** `hf:model:NAME` and `model:NAME` name a checkpoint `floe models` built under FLOE_HOME/models. */
describe('model:NAME specs', () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-models-'));
  fs.mkdirSync(path.join(home, 'models', 'smol'), { recursive: true });
  fs.writeFileSync(path.join(home, 'models', 'smol', 'config.json'), '{}');
  const p = { home, repoRoot: '/repo' };

  it('resolve to the folder under FLOE_HOME/models', () => {
    expect(resolveModel('hf:model:smol', p)).toBe(`hf:${path.join(home, 'models', 'smol')}`);
    expect(resolveTokenizer('model:smol', p)).toBe(path.join(home, 'models', 'smol'));
  });

  it('leave every other spec as it is', () => {
    expect(resolveModel('hf:configs/models/qwen3-cpu.json', p)).toBe('hf:configs/models/qwen3-cpu.json');
    expect(resolveModel('tiny', p)).toBe('tiny');
    expect(resolveTokenizer('builtin:qwen3.6', p)).toBe(path.join(home, 'tokenizers', 'qwen3.6'));
  });

  it('refuse a checkpoint that was never built, naming the command that builds it', () => {
    expect(() => resolveModel('hf:model:absent', p)).toThrow(/floe models.*--name absent/);
    expect(() => resolveTokenizer('model:absent', p)).toThrow(/no checkpoint at .*absent/);
  });
});
