import fs from 'node:fs';
import YAML from 'yaml';
import { applyOverrides, ConfigError, parseRunConfig, type RunConfig } from '../core/config.js';

/** Read a run config (YAML or JSON) plus `--set key.path=value` overrides, and validate it. */
export function loadRunConfig(file: string | undefined, overrides: string[] = []): RunConfig {
  let raw: unknown = {};
  if (file) {
    if (!fs.existsSync(file)) throw new ConfigError([{ path: '', message: `file not found: ${file}` }], file);
    const text = fs.readFileSync(file, 'utf8');
    try {
      raw = file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text, { prettyErrors: true });
    } catch (err) {
      throw new ConfigError([{ path: '', message: `cannot parse: ${(err as Error).message}` }], file);
    }
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError([{ path: '', message: 'the top level must be a mapping of sections (tasks, policy, rollout, …)' }], file);
  }
  return parseRunConfig(applyOverrides(raw as Record<string, unknown>, overrides), [file ?? 'defaults', ...overrides.map((o) => `--set ${o}`)].join(' + '));
}
