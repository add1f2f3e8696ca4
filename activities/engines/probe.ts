import { adapterFor, EngineHttpError, engineKeyEnv, type EngineEndpoint, type EngineKind, type ProbeVerdict } from './index.js';

/** `floe engine probe`: which server answers at a url, and what each capability floe needs
 *  does there. Nothing here changes the weights an engine serves. */

export interface ProbeReport { url: string; kind: EngineKind; detected: boolean; verdicts: ProbeVerdict[]; ok: boolean }

async function getJson(url: string, route: string): Promise<{ status: number; body: unknown }> {
  try {
    // the probe's endpoint id is "probe": its key, if the server wants one, is FLOE_ENGINE_KEY_PROBE
    const key = process.env[engineKeyEnv('probe')];
    const res = await fetch(new URL(route, url), { signal: AbortSignal.timeout(5000), headers: key ? { authorization: `Bearer ${key}` } : {} });
    const text = await res.text();
    let body: unknown = text;
    try { body = text.trim() ? JSON.parse(text) : null; } catch { /* not JSON */ }
    return { status: res.status, body };
  } catch {
    return { status: 0, body: null };
  }
}

/** The server kind at `url`: floe's reference engine says so in its /health body; SGLang has
 *  /get_model_info; vLLM names itself as the owner in /v1/models. */
export async function detectKind(url: string): Promise<EngineKind> {
  const health = await getJson(url, '/health');
  if (health.status === 0) throw new EngineHttpError('probe', 0, '/health', `nothing answers at ${url}`, 'start the server, or check the url and port');
  const h = health.body as { tokenizer?: unknown; version?: unknown } | null;
  if (h && typeof h === 'object' && 'tokenizer' in h && 'version' in h) return 'reference';
  // under --api-key both leave /health open; SGLang guards /get_model_info (vLLM has no such
  // route: 404), vLLM guards /v1: a 401 there still tells which server it is, and the probe's
  // checks then fail with the variable to set
  const info = await getJson(url, '/get_model_info');
  if (info.status === 200 || info.status === 401) return 'sglang';
  const models0 = await getJson(url, '/v1/models');
  if (models0.status === 401) return 'vllm';
  const models = models0.body as { data?: { owned_by?: string }[] } | null;
  if (models?.data?.some((m) => m.owned_by === 'vllm')) return 'vllm';
  throw new EngineHttpError('probe', health.status, '/health', `cannot tell which server answers at ${url} (not floe's reference engine, no SGLang /get_model_info, no vLLM-owned model in /v1/models)`, 'pass --kind reference|vllm|sglang');
}

export async function probeEngine(url: string, kind?: EngineKind): Promise<ProbeReport> {
  const k = kind ?? await detectKind(url);
  const endpoint: EngineEndpoint = { id: 'probe', url, node: 'local', kind: k };
  const verdicts = await (await adapterFor(endpoint)).probe();
  return { url, kind: k, detected: kind === undefined, verdicts, ok: verdicts.every((v) => v.ok || v.optional) };
}

export function formatProbe(r: ProbeReport): string {
  const lines = [`${r.url}: ${r.kind}${r.detected ? ' (detected)' : ''}`];
  for (const v of r.verdicts) {
    const mark = v.ok ? 'ok  ' : v.optional ? 'n/a ' : 'FAIL';
    // an error's message carries its fix too: print it once, on its own line
    const detail = (v.fix ? v.detail.replace(` (fix: ${v.fix})`, '') : v.detail).replace(/^engine probe: /, '');
    lines.push(`  ${mark} ${v.capability.padEnd(17)} ${detail}${!v.ok && v.fix ? `\n       → ${v.fix}` : ''}`);
  }
  lines.push(r.ok ? `floe can train with this engine (engines.endpoints[].kind: ${r.kind})` : 'floe cannot train with this engine until the FAIL lines are fixed');
  return lines.join('\n');
}
