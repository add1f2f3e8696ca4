import type { Worker } from '@temporalio/worker';
import type { Client } from '@temporalio/client';
import { loadSettings, type Settings } from '../../infra/settings.js';
import { createWorker, type Role } from '../../workers/worker.js';
import { temporalClient } from '../../workers/connect.js';
import { closeDbPool } from '../../store/pool.js';

/** Real services for integration tests: the Temporal server, Postgres and podman that
 *  `floe up` started (npm test runs it first), and in-process workers of the given roles. */

export const settings = loadSettings();

export interface Platform { client: Client; close(): Promise<void> }

export async function withWorkers(roles: Role[], s: Settings = settings): Promise<Platform> {
  const client = await temporalClient(s);
  const workers = (await Promise.all(roles.map((r) => createWorker(s, r)))).filter((w): w is Worker => w !== null);
  const running = workers.map((w) => w.run());
  return {
    client,
    async close() {
      workers.forEach((w) => w.shutdown());
      await Promise.all(running);
      await client.connection.close();
      await closeDbPool();
    },
  };
}
