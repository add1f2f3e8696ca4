import type { EngineAdapter, EngineEndpoint } from './adapter.js';

/** The adapter for an endpoint's server kind. Each adapter module is loaded the first time
 *  its kind is used. */
export async function adapterFor(e: EngineEndpoint): Promise<EngineAdapter> {
  switch (e.kind) {
    case 'reference': return new (await import('./reference.js')).ReferenceAdapter(e);
    case 'vllm': return new (await import('./vllm.js')).VllmAdapter(e);
    case 'sglang': return new (await import('./sglang.js')).SglangAdapter(e);
  }
}

export { ENGINE_KINDS } from '../../core/contracts.js';
export * from './adapter.js';
