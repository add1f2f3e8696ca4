/** The control plane's cost per turn, at rising numbers of rollouts in flight:
 *
 *    flock /tmp/floe-vitest.lock npx tsx bench/scale.ts [--sizes 16,128] [--turns 10] [--engine-ms 500] [--tool-ms 500] [--out FILE]
 *
 *  Real rollout and rewardGate workflows on the real control worker (generation through
 *  activities/generate.ts and the router, every audit write to Postgres), with doubles where
 *  the machines would be: a scripted engine that answers each request `--engine-ms` after it
 *  arrives (test/helpers/scriptedEngine.ts) and a sandbox host whose tool calls take `--tool-ms`
 *  and grading `--grade-ms` (test/helpers/sandboxDouble.ts), so a turn takes engine + tool time
 *  (1 s by default) and nothing else on this machine works. Per size, one wave of that many
 *  rollouts started together, each `--turns` bash turns and a submit; measured: turns/s, CPU per
 *  turn by process (Temporal server, this process = workers + engine double, Postgres; /proc),
 *  Postgres rows and bytes per turn (pg_stat_database, pg_database_size: the services are shared,
 *  so run it under the lock), history events and bytes per rollout (rollout + its gate child, a
 *  sample), workflow-task latency (scheduled → started, from those histories), and the wall time
 *  a rollout takes against a plain in-process loop that drives the same doubles the same way at
 *  the same concurrency, measured right after. The training-run execution is not driven here
 *  (it needs a trainer): see docs/results.md. Writes bench/results/scale.json. */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Worker } from '@temporalio/worker';
import proto from '@temporalio/proto';
import { loadSettings, repoRoot } from '../infra/settings.js';
import { workerConnection, temporalClient } from '../workers/connect.js';
import { controlActivitySlots, workflowBundle } from '../workers/worker.js';
import { controlActivities } from '../workers/activities.js';
import { CONTROL_QUEUE, sandboxQueue } from '../core/taskQueues.js';
import { parseRunConfig } from '../core/config.js';
import { renderToolCall } from '../core/tools.js';
import { createTaskActivities } from '../activities/tasks.js';
import { insertRun } from '../store/runs.js';
import { closeDbPool } from '../store/pool.js';
import { loadToySuite } from '../tasks/loaders.js';
import type { RolloutInput, RolloutResult } from '../workflows/rollout.js';
import { scriptedRolloutSettings, startScriptedEngine } from '../test/helpers/scriptedEngine.js';
import { createSandboxDouble } from '../test/helpers/sandboxDouble.js';
import { parseArgs, flag } from '../cli/args.js';
import { round, startCpuSampler } from './procCpu.js';
import { Stats, timed } from './activityTiming.js';

const a = parseArgs(process.argv.slice(2), { sizes: 'value', turns: 'value', 'engine-ms': 'value', 'tool-ms': 'value', 'grade-ms': 'value', 'turn-bytes': 'value', 'history-sample': 'value', out: 'value' });
const num = (name: string, d: number): number => {
  const v = Number(flag(a, name) ?? d);
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} takes a non-negative number, got ${flag(a, name)}`);
  return v;
};
const SIZES = (flag(a, 'sizes') ?? '16,128').split(',').map(Number);
const TURNS = num('turns', 10);
const ENGINE_MS = num('engine-ms', 500);
const TOOL_MS = num('tool-ms', 500);
const GRADE_MS = num('grade-ms', 1000);
const TURN_BYTES = num('turn-bytes', 300);
const SAMPLE = num('history-sample', 16);
const HOST = 'scale-bench';
const times = { createMs: 500, toolMs: TOOL_MS, diffMs: 200, gradeMs: GRADE_MS };

const s = loadSettings();
const db = new pg.Pool({ connectionString: s.postgres.url, max: 2 });
const runId = `bench-scale-${process.pid}-${Date.now()}`;
await insertRun(db, { runId, workflowId: runId, name: 'bench-scale', config: parseRunConfig({ name: 'bench-scale' }) });
await createTaskActivities(db).loadTaskPool({ source: 'toy', include: [], limit: 0, excludeLooseTests: false, onBadRow: 'fail' });
const taskIds = loadToySuite({ onBadRow: 'fail' }).tasks.map((t) => t.instanceId);

const engine = await startScriptedEngine({ delayMs: ENGINE_MS });
const sandbox = createSandboxDouble(times);
const client = await temporalClient(s);
const connection = await workerConnection(s);
const common = { connection, namespace: s.temporal.namespace };
/** The wave being measured: where each activity's time goes (the plain loop is not timed). */
let current: { activities: Stats; latency: Stats } | null = null;
// the workers floe runs (workers/worker.ts), with their default options
const workers: Worker[] = [
  await Worker.create({ ...common, taskQueue: CONTROL_QUEUE, workflowBundle: await workflowBundle(), activities: timed(controlActivities(s), () => current), maxConcurrentActivityTaskExecutions: controlActivitySlots() }),
  await Worker.create({ ...common, taskQueue: sandboxQueue(HOST), activities: timed(sandbox, () => current) }),
];
const running = Promise.all(workers.map((w) => w.run()));
const settings = scriptedRolloutSettings(engine.url, { host: HOST, maxTurns: TURNS + 1 });

/** A turn's output: a bash call padded to about TURN_BYTES (distinct per turn: a repeated call
 *  is gated as duplicate_call), then submit. */
function script(): { text: string }[] {
  const pad = (i: number) => `echo ${i} ${'x'.repeat(Math.max(0, TURN_BYTES - 60))}`;
  return [...Array.from({ length: TURNS }, (_, i) => ({ text: renderToolCall({ name: 'bash', arguments: { command: pad(i) } }) })), { text: renderToolCall({ name: 'submit', arguments: {} }) }];
}

let counter = 0;
async function floeRollout(): Promise<{ ms: number; r: RolloutResult; workflowId: string }> {
  const rolloutId = `${runId}-${counter++}`;
  engine.script(rolloutId, script());
  const input: RolloutInput = { runId, rolloutId, taskId: taskIds[counter % taskIds.length], groupId: `${runId}-g`, attempt: 0, purpose: 'test', settings };
  const workflowId = `floe-rollout-${rolloutId}`;
  const t0 = Date.now();
  const r = await client.workflow.execute('rollout', { taskQueue: CONTROL_QUEUE, workflowId, args: [input] });
  return { ms: Date.now() - t0, r, workflowId };
}

/** The same rollout without floe: the same engine double over HTTP, the same sandbox double,
 *  in a plain loop (no Temporal, no Postgres, no rendering or gating). */
async function plainRollout(): Promise<number> {
  const rolloutId = `plain-${counter++}`;
  engine.script(rolloutId, script());
  const t0 = Date.now();
  const { containerId } = await sandbox.createSandbox({ runId, rolloutId, task: undefined as never, limits: settings.sandbox });
  for (let i = 0; i <= TURNS; i++) {
    const res = await fetch(`${engine.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: [1, 2, 3], user: rolloutId, max_tokens: 4096 }) });
    await res.json();
    if (i < TURNS) await sandbox.execInSandbox({ containerId, command: `echo ${i}`, timeoutSeconds: 30, maxOutputBytes: 10_000 });
  }
  const d = await sandbox.takeDiffAndDestroy({ containerId, maxBytes: 100_000 });
  await sandbox.gradeSubmission({ runId, rolloutId, task: undefined as never, diff: d.diff, limits: settings.sandbox, timeoutSeconds: 60 });
  return Date.now() - t0;
}

async function pgCounters(): Promise<{ rows: number; bytes: number }> {
  // the stats collector publishes a backend's counts when its transaction ends, within ~0.5 s
  await new Promise((r) => setTimeout(r, 1500));
  const q = await db.query<{ rows: string; bytes: string }>('SELECT tup_inserted + tup_updated + tup_deleted AS rows, pg_database_size(current_database()) AS bytes FROM pg_stat_database WHERE datname = current_database()');
  return { rows: Number(q.rows[0].rows), bytes: Number(q.rows[0].bytes) };
}

const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): number => Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;

type EventBytes = Record<string, { events: number; bytes: number }>;
async function historyOf(workflowId: string): Promise<{ events: number; bytes: number; wftLatencyMs: number[]; byType: EventBytes }> {
  const h = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = h.events ?? [];
  const byType: EventBytes = {};
  for (const e of events) {
    // an activity's events are told apart by its type (generateTurn, execInSandbox, …)
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    const key = `${proto.temporal.api.enums.v1.EventType[e.eventType ?? 0].replace(/^EVENT_TYPE_/, '')}${name ? `:${name}` : ''}`;
    const b = (byType[key] ??= { events: 0, bytes: 0 });
    b.events++;
    b.bytes += proto.temporal.api.history.v1.HistoryEvent.encode(e).finish().length;
  }
  const lat: number[] = [];
  let scheduledAt: number | null = null;
  for (const e of events) {
    if (e.workflowTaskScheduledEventAttributes) scheduledAt = ms(e.eventTime);
    if (e.workflowTaskStartedEventAttributes && scheduledAt !== null) { lat.push(ms(e.eventTime) - scheduledAt); scheduledAt = null; }
  }
  return { events: events.length, bytes: proto.temporal.api.history.v1.History.encode(h).finish().length, wftLatencyMs: lat, byType };
}

const pct = (xs: number[], p: number): number => {
  if (!xs.length) return NaN;
  const v = [...xs].sort((x, y) => x - y);
  return v[Math.min(v.length - 1, Math.floor(p * v.length))];
};
const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;

async function measure(size: number) {
  const pg0 = await pgCounters();
  const cpu = startCpuSampler();
  current = { activities: new Stats(), latency: new Stats() };
  const timing = current;
  const t0 = Date.now();
  const rs = await Promise.all(Array.from({ length: size }, () => floeRollout()));
  const wallS = (Date.now() - t0) / 1000;
  current = null;
  const c = cpu.stop();
  const pg1 = await pgCounters();
  const turns = rs.reduce((x, r) => x + r.r.nTurns, 0);
  const gates: Record<string, number> = {};
  for (const r of rs) gates[r.r.gate] = (gates[r.r.gate] ?? 0) + 1;
  const sample = rs.slice(0, Math.min(SAMPLE, rs.length));
  const hist = await Promise.all(sample.map(async (r) => {
    const [w, g] = await Promise.all([historyOf(r.workflowId), historyOf(`${r.workflowId}-gate`)]);
    return { events: w.events + g.events, bytes: w.bytes + g.bytes, lat: [...w.wftLatencyMs, ...g.wftLatencyMs], byType: w.byType, turns: r.r.nTurns };
  }));
  // the rollout's own events by type, summed over the sample, per turn
  const sampledTurns = hist.reduce((x, h) => x + h.turns, 0);
  const byType: EventBytes = {};
  for (const h of hist) for (const [k, v] of Object.entries(h.byType)) { const b = (byType[k] ??= { events: 0, bytes: 0 }); b.events += v.events; b.bytes += v.bytes; }
  const perTurnByType = Object.fromEntries(Object.entries(byType).sort((x, y) => y[1].bytes - x[1].bytes).map(([k, v]) => [k, { events: round(v.events / sampledTurns, 2), bytes: round(v.bytes / sampledTurns, 0) }]));
  const lat = hist.flatMap((h) => h.lat);
  // the plain loop, same doubles, same concurrency, right after
  const p0 = Date.now();
  const plain = await Promise.all(Array.from({ length: size }, () => plainRollout()));
  const plainWallS = (Date.now() - p0) / 1000;
  const floeMs = mean(rs.map((r) => r.ms));
  const plainMs = mean(plain);
  const perTurn = (x: number) => round(x / turns, 4);
  return {
    inFlight: size, rollouts: size, turns, gates, wallSeconds: round(wallS, 1), turnsPerSecond: round(turns / wallS, 1),
    cpu: { coreSecondsByGroup: c.byGroupCoreSeconds, machineBusyCoreSeconds: c.machineBusyCoreSeconds, coreMsPerTurnByGroup: Object.fromEntries(Object.entries(c.byGroupCoreSeconds).map(([k, v]) => [k, round((v * 1000) / turns, 2)])) },
    postgres: { rowsWrittenPerTurn: perTurn(pg1.rows - pg0.rows), bytesGrownPerTurn: round((pg1.bytes - pg0.bytes) / turns, 0) },
    history: {
      sampled: sample.length, eventsPerRollout: round(mean(hist.map((h) => h.events)), 1), bytesPerRollout: round(mean(hist.map((h) => h.bytes)), 0), note: 'rollout workflow + its rewardGate child',
      eventsPerTurn: round(hist.reduce((x, h) => x + h.events, 0) / sampledTurns, 2), bytesPerTurn: round(hist.reduce((x, h) => x + h.bytes, 0) / sampledTurns, 0),
      rolloutEventsPerTurnByType: perTurnByType,
    },
    activityWallMsPerRollout: timing.activities.perRollout(size),
    activitySchedulingLatencyMsPerRollout: timing.latency.perRollout(size),
    workflowTaskLatencyMs: { p50: pct(lat, 0.5), p95: pct(lat, 0.95), max: pct(lat, 1), n: lat.length },
    rolloutWall: { floeMeanMs: round(floeMs, 0), plainMeanMs: round(plainMs, 0), addedMs: round(floeMs - plainMs, 0), addedShare: round((floeMs - plainMs) / plainMs, 4), plainWallSeconds: round(plainWallS, 1) },
  };
}

const results: Awaited<ReturnType<typeof measure>>[] = [];
try {
  await measure(Math.min(4, SIZES[0])); // warm-up: the workflow bundle, connections, caches
  for (const size of SIZES) {
    const m = await measure(size);
    process.stderr.write(`[scale] ${size} in flight: ${m.turnsPerSecond} turns/s, ${JSON.stringify(m.cpu.coreMsPerTurnByGroup)} core-ms/turn, pg ${m.postgres.rowsWrittenPerTurn} rows ${m.postgres.bytesGrownPerTurn} B /turn, history ${m.history.eventsPerRollout} ev ${m.history.bytesPerRollout} B /rollout (${m.history.bytesPerTurn} B /turn), wft p50/p95 ${m.workflowTaskLatencyMs.p50}/${m.workflowTaskLatencyMs.p95} ms, rollout ${m.rolloutWall.floeMeanMs} vs plain ${m.rolloutWall.plainMeanMs} ms (+${(m.rolloutWall.addedShare * 100).toFixed(1)}%)\n`);
    results.push(m);
  }
} finally {
  for (const w of workers) w.shutdown();
  await running;
  await connection.close();
  await engine.close();
  await client.connection.close();
  await db.end();
  await closeDbPool();
}

const out = {
  bench: 'scale', when: new Date().toISOString(),
  command: `npx tsx bench/scale.ts ${process.argv.slice(2).join(' ')}`.trim(),
  machine: { cpus: (await import('node:os')).cpus().length, note: 'shared; the engine double runs in this process, so its CPU is in "bench+workers"' },
  params: { turns: TURNS, engineMs: ENGINE_MS, sandbox: times, turnBytes: TURN_BYTES },
  results,
};
const file = path.resolve(repoRoot, flag(a, 'out') ?? path.join('bench', 'results', 'scale.json'));
fs.writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
process.stderr.write(`[scale] wrote ${path.relative(repoRoot, file)}\n`);
