/** Rollout throughput of floe's rollout pipeline: N rollouts with a fixed number in flight,
 *  in rounds, and where each rollout's time and the machine's CPU go.
 *
 *    flock /tmp/floe-vitest.lock npx tsx bench/throughput.ts [--n 48] [--concurrency 16] [--rounds 1]
 *
 *  Real Temporal workflows (rollout → rewardGate), real podman sandboxes and graders, Postgres,
 *  in-process workers of this process; the policy is a scripted engine double that replays each
 *  toy task's gold trajectory (its bash calls, then submit), so every rollout runs real tool
 *  calls, takes a real diff and is really graded while generation costs ~0: the benchmark
 *  isolates the pipeline. Measured per round: rollouts per minute, the wall time of each
 *  activity (and its scheduling latency: start minus scheduled time), container-engine API calls
 *  per rollout by kind and their time, CPU by process group (/proc, every second), and the CPU
 *  of podman's cgroups (containers; conmon with its runc and clean-up processes) as totals.
 *  After each round the machine settles (settle()): podman runs an exec session's clean-up
 *  process exit_command_delay (5 s) after the exec ends, and that tail's CPU is measured and
 *  counted against its round in `coreSecondsPerRolloutWithTail` (what a CPU-bound steady state
 *  pays per rollout). To compare two versions of floe, run it on each, one after the other, on
 *  a quiet machine: docs/results.md keeps the figures (and the 2026-12 comparison with the
 *  retired step-by-step pipeline). Writes bench/results/throughput.json. */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Worker } from '@temporalio/worker';
import type Docker from 'dockerode';
import { loadSettings, repoRoot } from '../infra/settings.js';
import { dockerFromSettings } from '../infra/docker.js';
import { sandboxImageTag } from '../infra/components/image.js';
import { workerConnection, temporalClient } from '../workers/connect.js';
import { workflowBundle } from '../workers/worker.js';
import { controlActivities } from '../workers/activities.js';
import { CONTROL_QUEUE, sandboxQueue } from '../core/taskQueues.js';
import { parseRunConfig } from '../core/config.js';
import { renderToolCall, type ToolCall } from '../core/tools.js';
import { createSandboxActivities, workerIdentity } from '../activities/sandbox/index.js';
import { createGradingActivities } from '../activities/grading.js';
import { createTaskActivities } from '../activities/tasks.js';
import { insertRun } from '../store/runs.js';
import { closeDbPool } from '../store/pool.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { RolloutInput, RolloutResult } from '../workflows/rollout.js';
import type { RolloutSettings } from '../core/contracts.js';
import { scriptedRolloutSettings, startScriptedEngine } from '../test/helpers/scriptedEngine.js';
import { round, startCpuSampler, totalBusyTicks } from './procCpu.js';
import { Stats, timed } from './activityTiming.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}
const N = Number(arg('n', '48'));
const CONCURRENCY = Number(arg('concurrency', '16'));
const ROUNDS = Number(arg('rounds', '1'));

// ---------- measurement ----------

/** The stats the activities and docker calls go to (the round being measured now). */
let current: { activities: Stats; latency: Stats; docker: Stats } | null = null;

/** Count and time the container engine's API calls (each is one round trip to podman). */
function countingDocker(docker: Docker): Docker {
  const timeCall = (key: string, p: unknown): unknown => {
    const t0 = Date.now();
    const stats = current;
    if (p && typeof (p as Promise<unknown>).then === 'function') {
      return (p as Promise<unknown>).finally(() => stats?.docker.add(key, Date.now() - t0));
    }
    stats?.docker.add(key, 0);
    return p;
  };
  const wrapExec = (e: Docker.Exec): Docker.Exec => new Proxy(e, {
    get(t, prop, r) {
      const v = Reflect.get(t, prop, r) as unknown;
      if (prop === 'start' || prop === 'inspect') return (...a: unknown[]) => timeCall(`exec.${prop}`, (v as (...x: unknown[]) => unknown).apply(t, a));
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(t) : v;
    },
  });
  const wrapContainer = (c: Docker.Container): Docker.Container => new Proxy(c, {
    get(t, prop, r) {
      const v = Reflect.get(t, prop, r) as unknown;
      if (prop === 'exec') {
        return async (...a: unknown[]) => wrapExec(await (timeCall('exec.create', (v as (...x: unknown[]) => Promise<Docker.Exec>).apply(t, a)) as Promise<Docker.Exec>));
      }
      if (typeof prop === 'string' && ['start', 'remove', 'putArchive', 'getArchive', 'inspect', 'kill', 'wait', 'attach'].includes(prop)) {
        return (...a: unknown[]) => timeCall(`container.${prop}`, (v as (...x: unknown[]) => unknown).apply(t, a));
      }
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(t) : v;
    },
  });
  return new Proxy(docker, {
    get(t, prop, r) {
      const v = Reflect.get(t, prop, r) as unknown;
      if (prop === 'getContainer') return (id: string) => wrapContainer(t.getContainer(id));
      if (prop === 'createContainer') {
        return async (...a: unknown[]) => wrapContainer(await (timeCall('createContainer', (v as (...x: unknown[]) => Promise<Docker.Container>).apply(t, a)) as Promise<Docker.Container>));
      }
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(t) : v;
    },
  });
}

// ---------- the run ----------

const s = loadSettings();
const db = new pg.Pool({ connectionString: s.postgres.url, max: 2 });
const runId = `bench-throughput-${process.pid}-${Date.now()}`;
await insertRun(db, { runId, workflowId: runId, name: 'bench-throughput', config: parseRunConfig({ name: 'bench-throughput' }) });
await createTaskActivities(db).loadTaskPool({ source: 'toy', include: [], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
const tasks = loadToySuite({ onBadRow: 'fail' }).tasks.filter((t) => t.solution && t.solution.length > 0);

const engine = await startScriptedEngine();
const client = await temporalClient(s);
const connection = await workerConnection(s);
const docker = countingDocker(dockerFromSettings(s));
const common = { connection, namespace: s.temporal.namespace };
const workers: Worker[] = [
  await Worker.create({ ...common, taskQueue: CONTROL_QUEUE, workflowBundle: await workflowBundle(), activities: timed(controlActivities(s), () => current) }),
];
const opts = { host: 'bench', image: sandboxImageTag(s), workerId: workerIdentity(), harnessPython: s.harness.bin };
workers.push(await Worker.create({ ...common, taskQueue: sandboxQueue(opts.host), activities: timed({ ...createSandboxActivities(docker, opts), ...createGradingActivities(docker, opts) }, () => current) }));
const running = Promise.all(workers.map((w) => w.run()));
const settings: RolloutSettings = scriptedRolloutSettings(engine.url, { host: opts.host });

let counter = 0;
async function oneRollout(i: number): Promise<RolloutResult> {
  const t = tasks[i % tasks.length];
  const rolloutId = `${runId}-${counter++}`;
  engine.script(rolloutId, t.solution!.map((c) => ({ text: renderToolCall(c as ToolCall) })));
  const input: RolloutInput = { runId, rolloutId, taskId: t.instanceId, groupId: `${runId}-${t.instanceId}`, attempt: 0, purpose: 'test', settings };
  return client.workflow.execute('rollout', { taskQueue: CONTROL_QUEUE, workflowId: `floe-rollout-${rolloutId}`, args: [input] });
}

/** Wait until the machine is quiet: at least the exec clean-up delay (infra/components/podman.ts,
 *  exit_command_delay = 5 s) plus 2 s, then until a second passes with under a fifth of one core
 *  busy (at most 60 s in all). Returns the seconds waited. */
async function settle(): Promise<number> {
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, 7000));
  for (;;) {
    const b0 = totalBusyTicks();
    await new Promise((r) => setTimeout(r, 1000));
    if (totalBusyTicks() - b0 < 20 || Date.now() - t0 > 60_000) return round((Date.now() - t0) / 1000, 1);
  }
}

/** N rollouts with CONCURRENCY in flight (a new one starts as soon as one ends). */
async function measure(n: number) {
  current = { activities: new Stats(), latency: new Stats(), docker: new Stats() };
  const cpu = startCpuSampler();
  const started = Date.now();
  const results: RolloutResult[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, n) }, async () => {
    while (next < n) results.push(await oneRollout(next++));
  }));
  const wallS = (Date.now() - started) / 1000;
  const c = cpu.stop();
  // the round's tail: what it left running, until the machine is quiet again
  const tail0 = totalBusyTicks();
  const settledSeconds = await settle();
  const tailCoreSeconds = round((totalBusyTicks() - tail0) / 100, 1);
  const m = current;
  current = null;
  const gates: Record<string, number> = {};
  for (const r of results) gates[r.gate] = (gates[r.gate] ?? 0) + 1;
  const turns = results.reduce((a, r) => a + r.nTurns, 0);
  return {
    settledSeconds, rollouts: n, concurrency: CONCURRENCY, wallSeconds: round(wallS, 1), rolloutsPerMinute: round((n / wallS) * 60, 1),
    turnsPerRollout: round(turns / n, 2), gates, passed: results.filter((r) => r.reward === 1).length,
    activityWallMsPerRollout: m.activities.perRollout(n),
    activitySchedulingLatencyMs: m.latency.perRollout(n),
    dockerApiCallsPerRollout: m.docker.perRollout(n),
    cpu: { ...c, coreSecondsPerRollout: round(c.machineBusyCoreSeconds / n, 2), tailCoreSeconds, coreSecondsPerRolloutWithTail: round((c.machineBusyCoreSeconds + tailCoreSeconds) / n, 2) },
  };
}

type Measured = Awaited<ReturnType<typeof measure>>;
const measured: Measured[] = [];
try {
  // warm-up: image layers, the workflow bundle, the harness, and one rollout of every task the
  // rounds use — what a training run pays once per task (the repository made on the host, the
  // harness's plan) and then amortises over hundreds of rollouts of the same pool; the rounds
  // measure that steady state
  await measure(Math.min(N, tasks.length));
  for (let r = 0; r < ROUNDS; r++) {
    const m = await measure(N);
    process.stderr.write(`[bench] round ${r + 1}: ${m.rolloutsPerMinute} rollouts/min (${m.rollouts} in ${m.wallSeconds} s, passed ${m.passed}, ${m.cpu.coreSecondsPerRollout} core-s/rollout, ${m.cpu.coreSecondsPerRolloutWithTail} with its tail)\n`);
    measured.push(m);
  }
} finally {
  for (const w of workers) w.shutdown();
  await running;
  await connection.close(); // the workers' native connection: open, it keeps the process alive
  await engine.close();
  await client.connection.close();
  await db.end();
  await closeDbPool();
}

const rollouts = measured.reduce((a, m) => a + m.rollouts, 0);
const wall = measured.reduce((a, m) => a + m.wallSeconds, 0);
const cpu = measured.reduce((a, m) => a + m.cpu.machineBusyCoreSeconds, 0);
const tail = measured.reduce((a, m) => a + m.cpu.tailCoreSeconds, 0);
const summary = {
  rollouts, wallSeconds: round(wall, 1), rolloutsPerMinute: round((rollouts / wall) * 60, 1),
  coreSecondsPerRollout: round(cpu / rollouts, 2), coreSecondsPerRolloutWithTail: round((cpu + tail) / rollouts, 2),
};
const out = {
  when: new Date().toISOString(),
  command: `npx tsx bench/throughput.ts ${process.argv.slice(2).join(' ')}`.trim(),
  machine: { cpus: (await import('node:os')).cpus().length, note: 'shared with other work: CPU by group includes it ("other")' },
  n: N, concurrency: CONCURRENCY, rounds: ROUNDS, tasks: tasks.length,
  summary,
  runs: measured,
};
const file = path.join(repoRoot, 'bench', 'results', 'throughput.json');
fs.mkdirSync(path.dirname(file), { recursive: true });
fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
process.stderr.write(`[bench] ${JSON.stringify(summary)}\n[bench] wrote ${path.relative(repoRoot, file)}\n`);
