import type { RolloutSettings } from './contracts.js';

/** A rollout's generation settings travel to the generate activity once, not every turn.
 *  They are the same for every turn of a rollout (and for every rollout of a run), yet they
 *  were most of a turn's activity input: engines, router, render, system prompt, sampling.
 *  The workflow names them by a content reference (`settingsRef`, a pure function of the
 *  settings, so replay computes the same one); the control worker keeps the settings it has
 *  been sent under that reference (SettingsKeeper), and a turn carries only the reference.
 *  A worker that does not hold them (a fresh or another process) answers SettingsNotKept and
 *  the workflow sends them again (workflows/rollout.ts). */

export type GenerationSettings = Pick<RolloutSettings, 'engines' | 'router' | 'render' | 'systemPrompt' | 'sampling' | 'generateTimeoutSeconds' | 'frozenVersion'>;

export function generationSettings(s: RolloutSettings): GenerationSettings {
  return {
    engines: s.engines, router: s.router, render: s.render, systemPrompt: s.systemPrompt, sampling: s.sampling, generateTimeoutSeconds: s.generateTimeoutSeconds,
    ...(s.frozenVersion === undefined ? {} : { frozenVersion: s.frozenVersion }),
  };
}

/** JSON with object keys sorted at every level (undefined members left out, as JSON does):
 *  equal settings give equal text whatever order their keys were built in. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? 'null' : canonicalJson(x))).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o).filter((k) => o[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

/** Two independent 32-bit hashes of the UTF-16 code units (FNV-1a, and a multiply-xorshift
 *  mix), pure integer arithmetic: the same in a workflow and in an activity. */
function hashes(text: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x9e3779b9 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  b = Math.imul(b ^ (b >>> 13), 0xc2b2ae35);
  b ^= b >>> 16;
  return [a >>> 0, b >>> 0];
}

const hex = (n: number) => n.toString(16).padStart(8, '0');

/** The settings' content reference: `g1-<64 bits of hash>-<length of the canonical text>`.
 *  A worker given the settings recomputes it and refuses a mismatch (SettingsKeeper.keep). */
export function settingsRef(g: GenerationSettings): string {
  const text = canonicalJson(g);
  const [a, b] = hashes(text);
  return `g1-${hex(a)}${hex(b)}-${text.length}`;
}

/** The error type a worker answers when a turn names settings it does not hold. */
export const SETTINGS_NOT_KEPT = 'SettingsNotKept';

/** A control worker's settings by reference: the most recently used `capacity` kept (a run has
 *  a handful: training, each frozen evaluation version). */
export class SettingsKeeper {
  private readonly kept = new Map<string, GenerationSettings>();
  constructor(private readonly capacity = 256) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`SettingsKeeper capacity must be a positive integer, got ${capacity}`);
  }

  /** Keep `settings` under `ref`; a ref that is not theirs is refused (a caller built by other
   *  code, or a hash collision) rather than kept, naming both. */
  keep(ref: string, settings: GenerationSettings): GenerationSettings {
    const own = settingsRef(settings);
    if (own !== ref) throw new Error(`generation settings sent under ${ref} hash to ${own}: the workflow and this worker compute settingsRef differently (run one floe version on both)`);
    this.touch(ref, settings);
    return settings;
  }

  /** The settings kept under `ref`, or null. */
  get(ref: string): GenerationSettings | null {
    const s = this.kept.get(ref);
    if (s) this.touch(ref, s);
    return s ?? null;
  }

  get size(): number {
    return this.kept.size;
  }

  private touch(ref: string, s: GenerationSettings): void {
    this.kept.delete(ref);
    this.kept.set(ref, s);
    if (this.kept.size > this.capacity) this.kept.delete(this.kept.keys().next().value!);
  }
}
