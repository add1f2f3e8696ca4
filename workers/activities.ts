import type { Settings } from '../infra/settings.js';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { createDbActivities, dbPool } from '../activities/db.js';
import { createTaskActivities } from '../activities/tasks.js';
import { createAuditActivities } from '../activities/audit.js';
import { createGenerateActivities } from '../activities/generate.js';
import { LiveRouter } from '../activities/router.js';
import { Renderers } from '../activities/renderer.js';
import { repoRoot } from '../infra/settings.js';
import { createSandboxActivities, startSandboxReaper, workerIdentity } from '../activities/sandbox/index.js';
import { createGradingActivities } from '../activities/grading.js';
import { createAuditSearchActivities } from '../activities/auditSearch.js';
import { createDataAuditActivities } from '../activities/dataAudit.js';
import { createTrainingActivities } from '../activities/training.js';
import { createGpuActivities } from '../activities/gpu.js';
import path from 'node:path';

/** Activities by worker role. Each role's worker registers only what runs where it runs. */

/** One renderer process per tokenizer + template, shared by every control worker of this process. */
let shared: Renderers | null = null;
export function renderers(s: Settings): Renderers {
  shared ??= new Renderers({ python: s.python.bin, home: s.home, repoRoot });
  return shared;
}

/** control: Postgres audit, the task pool, and generation (the router lives here, so that
 *  one process sees every engine's load and its own in-flight requests). */
export function controlActivities(s: Settings) {
  const pool = dbPool(s.postgres.url);
  return {
    ...createDbActivities(pool),
    ...createTaskActivities(pool),
    ...createAuditActivities(pool),
    ...createGenerateActivities(pool, new LiveRouter(), renderers(s)),
    ...createTrainingActivities(pool),
    ...createDataAuditActivities(pool),
  };
}

/** sandbox@<host>: the containers on this host, and grading in fresh containers. */
export function sandboxActivities(s: Settings, host: string) {
  const docker = dockerFromSettings(s);
  const opts = { host, image: sandboxImageTag(s), workerId: workerIdentity(), harnessPython: s.harness.bin };
  return { ...createSandboxActivities(docker, opts), ...createGradingActivities(docker, opts), ...createAuditSearchActivities(docker, opts) };
}

/** Remove containers that crashed workers left behind, now and every few minutes. */
export function startReaper(s: Settings, host: string): { stop(): void } {
  const acts = sandboxActivities(s, host);
  return startSandboxReaper(acts, {
    intervalSeconds: 300,
    maxAgeSeconds: 6 * 3600,
    onError: (err) => process.stderr.write(`[floe] sandbox reaper: ${(err as Error).message}\n`),
    onRemoved: (ids) => process.stderr.write(`[floe] sandbox reaper removed ${ids.length} container(s) left by a dead worker\n`),
  });
}

/** gpu@<node>: the trainer and engines on this node (batches are read from Postgres and
 *  handed to the trainer as files under FLOE_HOME/batches). */
export function gpuActivities(s: Settings, _node: string) {
  return createGpuActivities(dbPool(s.postgres.url), { batchDir: path.join(s.home, 'batches') });
}
