import { Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Settings } from '../infra/settings.js';
import { CONTROL_QUEUE, gpuQueue, sandboxQueue } from '../core/taskQueues.js';
import { controlActivities, gpuActivities, sandboxActivities, startReaper } from './activities.js';
import { workerConnection } from './connect.js';

/** Worker roles:
 *  - control: every workflow, plus the db / task / router activities;
 *  - sandbox: containers on one host (task queue floe-sandbox@<host>);
 *  - gpu: the trainer and engines on one node (task queue floe-gpu@<node>). */

export type Role = 'control' | 'sandbox' | 'gpu';
export const ROLES: Role[] = ['control', 'sandbox', 'gpu'];

export const workflowsPath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'workflows', 'index.ts');

let bundle: Promise<WorkflowBundleWithSourceMap> | null = null;
/** Bundle workflow code once per process (several control workers share it). */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath, logger: { info() {}, warn() {}, error: console.error, debug() {}, trace() {}, log() {} } as never });
  return bundle;
}

/** Activities a control worker runs at once. Its activities wait on the network (a generate
 *  activity holds its slot for the whole of an engine's answer, seconds to minutes), so the
 *  SDK's default of 100 capped generation at 100 turns at once however many rollouts were in
 *  flight (bench/scale_run.ts with 90 s turns: 1,024 rollouts running, 100 generating).
 *  FLOE_CONTROL_ACTIVITY_SLOTS overrides it. */
export function controlActivitySlots(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.FLOE_CONTROL_ACTIVITY_SLOTS;
  if (raw === undefined || raw === '') return 2048;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`FLOE_CONTROL_ACTIVITY_SLOTS must be a positive integer, got ${JSON.stringify(raw)}; unset it for the default (2048)`);
  return n;
}

export async function createWorker(s: Settings, role: Role, node = 'local'): Promise<Worker | null> {
  const connection = await workerConnection(s);
  const common = { connection, namespace: s.temporal.namespace };
  switch (role) {
    case 'control':
      return Worker.create({ ...common, taskQueue: CONTROL_QUEUE, workflowBundle: await workflowBundle(), activities: controlActivities(s), maxConcurrentActivityTaskExecutions: controlActivitySlots() });
    case 'sandbox':
    case 'gpu': {
      const activities = role === 'sandbox' ? sandboxActivities(s, node) : gpuActivities(s, node);
      if (Object.keys(activities).length === 0) return null; // this checkout has no activities of that role
      return Worker.create({ ...common, taskQueue: role === 'sandbox' ? sandboxQueue(node) : gpuQueue(node), activities });
    }
  }
}

/** Workers of the given roles, started the same way wherever they run (`floe worker`, the
 *  demo): a sandbox role brings the sandbox reaper with it, which removes at once, and every
 *  five minutes after, the containers of workers that died (a kill -9 leaves its sandboxes and
 *  graders running; their floe.worker label names a pid that is gone). */
export interface StartedWorkers { workers: Worker[]; running: Promise<void>; shutdown(): Promise<void> }

export async function startWorkers(s: Settings, roles: Role[], node = 'local'): Promise<StartedWorkers> {
  const workers = (await Promise.all(roles.map((r) => createWorker(s, r, node)))).filter((w): w is Worker => w !== null);
  const reaper = roles.includes('sandbox') ? startReaper(s, node) : null;
  const running = Promise.all(workers.map((w) => w.run())).then(() => undefined);
  void running.catch(() => undefined); // handled: whoever awaits `running` sees the failure
  return {
    workers,
    running,
    async shutdown() {
      reaper?.stop();
      // Ctrl-C may already have stopped them (the Temporal runtime handles SIGINT)
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await running.catch(() => undefined); // a worker's failure is reported by `running`
    },
  };
}

/** Run workers until a signal arrives; the embedded default runs all roles in one process. */
export async function runWorkers(s: Settings, roles: Role[], node = 'local'): Promise<void> {
  const started = await startWorkers(s, roles, node);
  process.stderr.write(`[floe] workers running on ${started.workers.map((w) => w.options.taskQueue).join(', ')}\n`);
  const stop = () => { void started.shutdown(); };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await started.running;
}
