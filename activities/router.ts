import { newRouterState, outstanding, pickEngine, recordFailure, recordSuccess, releaseRollout, type EngineLoad, type Health, type RouterPolicy } from '../core/router.js';
import { adapterFor, answersHealth, EngineHttpError, type EngineEndpoint } from './engines/index.js';

/** The live side of the router, one per control worker process: scrapes engine load (cached
 *  briefly), counts floe's own in-flight requests, tracks health, and applies the pure
 *  placement policy of core/router.ts. */

const LOAD_TTL_MS = 250;

interface Live { load: { running: number; waiting: number; at: number }; inflight: number; health: Health }

export class LiveRouter {
  private live = new Map<string, Live>();
  private state = newRouterState();

  /** Called when an engine stops answering (it may come back with other weights). */
  onUnreachable: ((e: EngineEndpoint) => Promise<void>) | null = null;

  constructor(private readonly unhealthyAfter = 2) {}

  private entry(id: string): Live {
    let l = this.live.get(id);
    if (!l) {
      l = { load: { running: 0, waiting: 0, at: 0 }, inflight: 0, health: recordSuccess() };
      this.live.set(id, l);
    }
    return l;
  }

  async loads(engines: readonly EngineEndpoint[]): Promise<EngineLoad[]> {
    const now = Date.now();
    await Promise.all(engines.map(async (e) => {
      const l = this.entry(e.id);
      if (now - l.load.at < LOAD_TTL_MS) return;
      try {
        l.load = { ...(await (await adapterFor(e)).load()), at: now };
        if (!l.health.healthy) l.health = recordSuccess(); // answered again: back in rotation
      } catch (err) {
        l.load = { running: 0, waiting: 0, at: now };
        l.health = recordFailure(l.health, this.unhealthyAfter);
        // a scrape that timed out on a server that still answers its health route is a busy
        // server, not one that went away: only the latter is resynced (its weights may be others)
        if (err instanceof EngineHttpError && err.unreachable && !(err.timedOut && await answersHealth(await adapterFor(e)))) await this.onUnreachable?.(e);
      }
    }));
    return engines.map((e) => {
      const l = this.entry(e.id);
      return { id: e.id, healthy: l.health.healthy, running: l.load.running, waiting: l.load.waiting, inflight: l.inflight };
    });
  }

  /** Place a request; the caller must call done() when it is answered or failed. */
  async place(policy: RouterPolicy, engines: readonly EngineEndpoint[], rolloutId: string, exclude: string[] = [], affinityKey?: string): Promise<{ engine: EngineEndpoint; load: EngineLoad; done(ok: boolean): void } | null> {
    const loads = await this.loads(engines);
    const id = pickEngine(policy, loads, { rolloutId, exclude, affinityKey }, this.state);
    if (id === null) return null;
    const l = this.entry(id);
    const load = loads.find((x) => x.id === id)!;
    l.inflight++;
    let finished = false;
    return {
      engine: engines.find((e) => e.id === id)!,
      load: { ...load, inflight: outstanding(load) },
      done: (ok: boolean) => {
        if (finished) return;
        finished = true;
        l.inflight--;
        l.health = ok ? recordSuccess() : recordFailure(l.health, this.unhealthyAfter);
      },
    };
  }

  release(rolloutId: string): void {
    releaseRollout(this.state, rolloutId);
  }
}
