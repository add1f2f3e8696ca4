/** Placement of generation requests across inference engines (pure policy).
 *  - least-loaded (default): per request, the healthy engine with the least outstanding
 *    work: its running + waiting requests (from /metrics) plus floe's own in-flight count.
 *  - sticky: a rollout stays on the engine it started on, chosen by its prompt prefix (the
 *    task's group) for cache reuse; the failure mode the recipe reports: one engine piles up
 *    while others idle, and work stuck behind it goes stale.
 *  - round-robin: engines in turn, blind to load.
 *  - cache-aware: least-loaded with a home. A rollout's next turn returns to the engine that
 *    served its last one (where its whole conversation so far is a cached prefix, so only the
 *    new observation is prefilled) unless that engine's outstanding work exceeds the least
 *    loaded engine's by more than `cacheSlack`; then it moves to the least loaded one, which
 *    becomes its home. Sticky's cache reuse without sticky's pile-up (bench/placement_sim.ts
 *    measures the four policies at the published scale). */

export type RouterPolicy = 'least-loaded' | 'sticky' | 'round-robin' | 'cache-aware';
export const ROUTER_POLICIES = ['least-loaded', 'sticky', 'round-robin', 'cache-aware'] as const satisfies readonly RouterPolicy[];

/** cache-aware: how much more outstanding work (running + waiting + floe's in-flight, the
 *  `outstanding` measure) a rollout's home engine may carry than the least loaded engine before
 *  the rollout moves. A move costs one full prefill of its conversation; staying behind a longer
 *  queue costs the wait. `outstanding` counts a request about twice (the engine's running/waiting
 *  and floe's in-flight), so 32 is about 16 requests. 32 was the fastest of 0–64 in
 *  bench/placement_sim.ts at the published scale (docs/results.md, "Placement at the published
 *  scale"); 0 is least-loaded with a tie-break for home. */
export const CACHE_SLACK = 32;

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
  /** sticky and cache-aware: rollout → engine (sticky: where it started; cache-aware: where
   *  its last turn ran) */
  pins: Map<string, string>;
  /** round-robin cursor */
  next: number;
  /** The most pins kept: the least recently placed rollouts are forgotten beyond it. */
  maxPins: number;
}

/** Pins kept per control worker: far above any window of rollouts in flight (each placement
 *  refreshes its rollout's pin), so only finished rollouts are forgotten, and the map stays
 *  bounded even though nothing tells the router when a rollout ends. */
export const MAX_PINS = 65_536;

export const newRouterState = (maxPins = MAX_PINS): RouterState => ({ pins: new Map(), next: 0, maxPins });

/** Pin a rollout to an engine as its most recent placement; the least recent beyond maxPins go. */
function pin(state: RouterState, rolloutId: string, engineId: string): void {
  state.pins.delete(rolloutId);
  state.pins.set(rolloutId, engineId);
  while (state.pins.size > state.maxPins) state.pins.delete(state.pins.keys().next().value as string);
}

export const outstanding = (e: EngineLoad): number => Math.max(e.running + e.waiting, 0) + e.inflight;

/** The least loaded of `usable` (non-empty); ties (idle engines are common on a fast, small
 *  model) rotate, so no engine is favoured just for coming first in the list. */
function leastLoaded(usable: readonly EngineLoad[], state: RouterState): EngineLoad {
  const least = Math.min(...usable.map(outstanding));
  const tied = usable.filter((e) => outstanding(e) === least);
  return tied[state.next++ % tied.length];
}

/** Pick an engine id, or null when none is healthy. Mutates state (pins, cursor).
 *  `cacheSlack` tunes cache-aware only (see CACHE_SLACK). */
export function pickEngine(policy: RouterPolicy, engines: readonly EngineLoad[], req: RouteRequest, state: RouterState, cacheSlack = CACHE_SLACK): string | null {
  const usable = engines.filter((e) => e.healthy && !req.exclude?.includes(e.id));
  if (usable.length === 0) return null;
  switch (policy) {
    case 'least-loaded':
      return leastLoaded(usable, state).id;
    case 'cache-aware': {
      const home = usable.find((e) => e.id === state.pins.get(req.rolloutId));
      const least = leastLoaded(usable, state);
      const chosen = home && outstanding(home) <= outstanding(least) + cacheSlack ? home : least;
      pin(state, req.rolloutId, chosen.id);
      return chosen.id;
    }
    case 'sticky': {
      const pinned = state.pins.get(req.rolloutId);
      if (pinned && usable.some((e) => e.id === pinned)) {
        pin(state, req.rolloutId, pinned);
        return pinned;
      }
      // first placement (or the pinned engine failed): the engine that holds this prefix
      const chosen = usable[hashKey(req.affinityKey ?? req.rolloutId) % usable.length].id;
      pin(state, req.rolloutId, chosen);
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
