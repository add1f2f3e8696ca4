import type { Settings } from '../infra/settings.js';
import { createDbActivities, dbPool } from '../activities/db.js';
import { createTaskActivities } from '../activities/tasks.js';

/** Activities by worker role. Each role's worker registers only what runs where it runs. */

export function controlActivities(s: Settings) {
  const pool = dbPool(s.postgres.url);
  return { ...createDbActivities(pool), ...createTaskActivities(pool) };
}

export function sandboxActivities(_s: Settings, _host: string) {
  return {};
}

export function gpuActivities(_s: Settings, _node: string) {
  return {};
}
