import type { EngineAdapter, EngineEndpoint, EngineKind } from './adapter.js';

/** The adapter for an endpoint's server kind (endpoints recorded before kinds existed:
 *  reference). Each adapter module is loaded the first time its kind is used. */
export async function adapterFor(e: EngineEndpoint): Promise<EngineAdapter> {
  const kind: EngineKind = e.kind ?? 'reference';
  switch (kind) {
    case 'reference': return new (await import('./reference.js')).ReferenceAdapter(e);
    case 'vllm': return new (await import('./vllm.js')).VllmAdapter(e);
    case 'sglang': return new (await import('./sglang.js')).SglangAdapter(e);
  }
}

export const ENGINE_KINDS: readonly EngineKind[] = ['reference', 'vllm', 'sglang'];

export * from './adapter.js';
