import type { RunConfig } from './config.js';

/** Who hosts a run's servers. A config that names no servers of the user's own (no engine
 *  endpoints, no trainer url) and asks for embedded engines is hosted by the command that
 *  starts it (`floe run start`, like `floe demo`): embedded engines, trainer and workers in that
 *  process, for the run's whole life. A config naming either kind of server is started on the
 *  cluster and returns at once; one that names only one of the two is refused by the preflight
 *  (cli/preflight.ts) with the missing half named. */
export function hostsItself(c: Pick<RunConfig, 'engines' | 'trainer'>): boolean {
  return c.engines.endpoints.length === 0 && !c.trainer.url && c.engines.count > 0;
}
