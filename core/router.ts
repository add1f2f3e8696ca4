/** Placement of generation requests across inference engines (pure policy).
 *  - least-loaded (default): per request, the healthy engine with the least outstanding
 *    work: its running + waiting requests (from /metrics) plus floe's own in-flight count.
 *  - sticky: a rollout stays on the engine it started on, chosen by its prompt prefix (the
 *    task's group) for cache reuse; the failure mode the recipe reports: one engine piles up
 *    while others idle, and work stuck behind it goes stale.
 *  - round-robin: engines in turn, blind to load. */

export type RouterPolicy = 'least-loaded' | 'sticky' | 'round-robin';

export interface EngineLoad {
  id: string;
  healthy: boolean;
  running: number;
  waiting: number;
  /** Requests floe has sent and not yet seen answered. */
  inflight: number;
}

export interface RouteRequest {
  rolloutId: string;
  /** Requests that share a prompt prefix (a task's group) share this key: sticky placement
   *  sends them to the same engine, where their prefix is cached. */
  affinityKey?: string;
  exclude?: readonly string[];
}

/** A small stable string hash (FNV-1a), for affinity placement. */
export function hashKey(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export interface RouterState {
  /** sticky: rollout → engine */
  pins: Map<string, string>;
  /** round-robin cursor */
  next: number;
}

export const newRouterState = (): RouterState => ({ pins: new Map(), next: 0 });

export const outstanding = (e: EngineLoad): number => Math.max(e.running + e.waiting, 0) + e.inflight;

/** Pick an engine id, or null when none is healthy. Mutates state (pins, cursor). */
export function pickEngine(policy: RouterPolicy, engines: readonly EngineLoad[], req: RouteRequest, state: RouterState): string | null {
  const usable = engines.filter((e) => e.healthy && !req.exclude?.includes(e.id));
  if (usable.length === 0) return null;
  switch (policy) {
    case 'least-loaded': {
      // ties (idle engines are common on a fast, small model) rotate, so no engine is
      // favoured just for coming first in the list
      const least = Math.min(...usable.map(outstanding));
      const tied = usable.filter((e) => outstanding(e) === least);
      return tied[state.next++ % tied.length].id;
    }
    case 'sticky': {
      const pinned = state.pins.get(req.rolloutId);
      if (pinned && usable.some((e) => e.id === pinned)) return pinned;
      // first placement (or the pinned engine failed): the engine that holds this prefix
      const chosen = usable[hashKey(req.affinityKey ?? req.rolloutId) % usable.length].id;
      state.pins.set(req.rolloutId, chosen);
      return chosen;
    }
    case 'round-robin':
      return usable[state.next++ % usable.length].id;
  }
}

/** Forget a finished rollout's pin. */
export function releaseRollout(state: RouterState, rolloutId: string): void {
  state.pins.delete(rolloutId);
}

/** Health bookkeeping: an engine is taken out after `unhealthyAfter` consecutive failures
 *  and comes back when a health check succeeds. */
export interface Health { failures: number; healthy: boolean }

export function recordFailure(h: Health, unhealthyAfter: number): Health {
  const failures = h.failures + 1;
  return { failures, healthy: failures < unhealthyAfter };
}

export const recordSuccess = (): Health => ({ failures: 0, healthy: true });
