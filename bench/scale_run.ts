/** One whole training run on the control plane at a given number of rollouts in flight:
 *
 *    flock /tmp/floe-vitest.lock npx tsx bench/scale_run.ts [--in-flight 1024] [--turns 3] [--updates 2] [--out FILE]
 *
 *  The real trainingRun workflow (started as `floe run start` starts it: client/runs.ts
 *  startRun) with its rollout, rewardGate and weightUpdate children on floe's control worker:
 *  the run loop, the router, generation through activities/generate.ts, every audit write to
 *  Postgres. Doubles stand where the machines would be: a scripted engine answering each request
 *  `--engine-ms` after it arrives (test/helpers/scriptedEngine.ts; it reports the version the
 *  last load gave it), a sandbox host whose tool calls take `--tool-ms` and grading `--grade-ms`
 *  (test/helpers/sandboxDouble.ts), and a GPU node whose train step reads the batch's token
 *  sequences from Postgres and takes `--train-ms`, and whose load takes `--load-ms`
 *  (test/helpers/gpuDouble.ts). Every rollout runs `--turns` bash turns and a submit.
 *  The run asks for `--updates` weight updates of `--groups-per-update` groups of
 *  `--group-size`; once the last lands the run completes and the rollouts still in flight
 *  finish on their own (ParentClosePolicy ABANDON), which the bench waits for. Then it checks
 *  the accounting: every rollout the run started (its executions' histories) has exactly one
 *  rollouts row, finished; batch members are distinct and as many as the policy_versions rows
 *  declare; every rollout is trained, discarded as stale, or left over, once. Measured: turns/s,
 *  CPU per turn by process (/proc), Postgres rows and bytes per turn, the run execution's
 *  history (events, bytes, per execution; Temporal warns at 10,240 events / 10 MB) and any
 *  history warning in Temporal's log. Writes bench/results/scale-run.json. */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Worker } from '@temporalio/worker';
import proto from '@temporalio/proto';
import { loadSettings, repoRoot } from '../infra/settings.js';
import { workerConnection, temporalClient } from '../workers/connect.js';
import { controlActivitySlots, workflowBundle } from '../workers/worker.js';
import { controlActivities } from '../workers/activities.js';
import { CONTROL_QUEUE, gpuQueue, sandboxQueue } from '../core/taskQueues.js';
import { parseRunConfig } from '../core/config.js';
import { renderToolCall } from '../core/tools.js';
import { closeDbPool } from '../store/pool.js';
import { startRun } from '../client/runs.js';
import { startScriptedEngine, type ScriptedOutput } from '../test/helpers/scriptedEngine.js';
import { createSandboxDouble } from '../test/helpers/sandboxDouble.js';
import { createGpuDouble } from '../test/helpers/gpuDouble.js';
import { startTrainerDouble } from '../test/helpers/trainerDouble.js';
import { parseArgs, flag } from '../cli/args.js';
import { round, startCpuSampler } from './procCpu.js';

const a = parseArgs(process.argv.slice(2), {
  'in-flight': 'value', turns: 'value', updates: 'value', 'group-size': 'value', 'groups-per-update': 'value', 'engine-ms': 'value', 'tool-ms': 'value',
  'grade-ms': 'value', 'train-ms': 'value', 'load-ms': 'value', 'turn-bytes': 'value', 'timeout-s': 'value', out: 'value',
});
const num = (name: string, d: number): number => {
  const v = Number(flag(a, name) ?? d);
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} takes a non-negative number, got ${flag(a, name)}`);
  return v;
};
const IN_FLIGHT = num('in-flight', 1024);
const TURNS = num('turns', 3);
const UPDATES = num('updates', 2);
const GROUP = num('group-size', 8);
const GROUPS_PER_UPDATE = num('groups-per-update', 16);
const ENGINE_MS = num('engine-ms', 500);
const TOOL_MS = num('tool-ms', 500);
const GRADE_MS = num('grade-ms', 1000);
const TRAIN_MS = num('train-ms', 2000);
const LOAD_MS = num('load-ms', 500);
const TURN_BYTES = num('turn-bytes', 300);
const TIMEOUT_S = num('timeout-s', 480);
const HOST = 'scale-run-bench';
const NODE = 'scale-run-gpu';
const sandboxTimes = { createMs: 500, toolMs: TOOL_MS, diffMs: 200, gradeMs: GRADE_MS };

const s = loadSettings();
const db = new pg.Pool({ connectionString: s.postgres.url, max: 2 });

/** A rollout's outputs: TURNS bash calls padded to about TURN_BYTES (distinct per turn: a
 *  repeated call is gated as duplicate_call), then submit. */
function script(rolloutId: string): ScriptedOutput[] {
  const pad = (i: number) => `echo ${rolloutId} ${i} ${'x'.repeat(Math.max(0, TURN_BYTES - 60 - rolloutId.length))}`;
  return [...Array.from({ length: TURNS }, (_, i) => ({ text: renderToolCall({ name: 'bash', arguments: { command: pad(i) } }) })), { text: renderToolCall({ name: 'submit', arguments: {} }) }];
}

const engine = await startScriptedEngine({ delayMs: ENGINE_MS, scriptFor: script });
const trainer = await startTrainerDouble();
const sandbox = createSandboxDouble(sandboxTimes);
const gpu = createGpuDouble(db, { scripted: engine }, { trainMs: TRAIN_MS, loadMs: LOAD_MS });
const client = await temporalClient(s);
const connection = await workerConnection(s);
const common = { connection, namespace: s.temporal.namespace };
const workers: Worker[] = [
  await Worker.create({ ...common, taskQueue: CONTROL_QUEUE, workflowBundle: await workflowBundle(), activities: controlActivities(s), maxConcurrentActivityTaskExecutions: controlActivitySlots() }),
  await Worker.create({ ...common, taskQueue: sandboxQueue(HOST), activities: sandbox }),
  await Worker.create({ ...common, taskQueue: gpuQueue(NODE), activities: gpu }),
];
const running = Promise.all(workers.map((w) => w.run()));

const config = parseRunConfig({
  name: 'bench-scale-run',
  tasks: { source: 'toy' },
  engines: { endpoints: [{ id: 'scripted', url: engine.url, node: NODE, kind: 'reference' }] },
  trainer: { url: trainer.url, node: NODE },
  sandbox: { host: HOST },
  // turns of TURN_BYTES byte tokens fit one request, and a rollout fits its token budget
  policy: { maxTokensPerTurn: 4096, contextTokens: 65536 },
  // the wall budget leaves twice a scripted rollout's own time, so rollouts end by their submit
  rollout: {
    groupSize: GROUP, maxInFlight: IN_FLIGHT, maxTurns: TURNS + 1, maxTotalTokens: 65536,
    maxWallSeconds: Math.max(120, Math.ceil((2 * ((TURNS + 1) * ENGINE_MS + TURNS * TOOL_MS + GRADE_MS)) / 1000)),
  },
  training: { groupsPerUpdate: GROUPS_PER_UPDATE, updates: UPDATES },
  evaluation: { atStart: false, atEnd: false },
  eviction: { enabled: false },
});

async function pgCounters(): Promise<{ rows: number; bytes: number }> {
  await new Promise((r) => setTimeout(r, 1500)); // the stats collector publishes within ~0.5 s
  const q = await db.query<{ rows: string; bytes: string }>('SELECT tup_inserted + tup_updated + tup_deleted AS rows, pg_database_size(current_database()) AS bytes FROM pg_stat_database WHERE datname = current_database()');
  return { rows: Number(q.rows[0].rows), bytes: Number(q.rows[0].bytes) };
}

const temporalLog = path.join(s.home, 'logs', 'temporal.log');
const logSize = (): number => (fs.existsSync(temporalLog) ? fs.statSync(temporalLog).size : 0);
/** Lines Temporal logged from byte `from` on that speak of history limits (its warnings name the
 *  history size or count limit). */
function historyWarnings(from: number): string[] {
  if (!fs.existsSync(temporalLog)) return [];
  const fd = fs.openSync(temporalLog, 'r');
  const len = fs.fstatSync(fd).size - from;
  const buf = Buffer.alloc(Math.max(0, len));
  fs.readSync(fd, buf, 0, buf.length, from);
  fs.closeSync(fd);
  return buf.toString('utf8').split('\n').filter((l) => /history (size|count)|exceeds? (the )?(warn|limit)|HistorySize|HistoryCount/i.test(l));
}

let result: Record<string, unknown> | null = null;
let failure: unknown = null;
const timers: NodeJS.Timeout[] = [];
let started: { runId: string; workflowId: string } | null = null;
/** Rollouts in flight over time: rows of the run recorded as started and not yet ended (a
 *  child the server has not started yet, or whose first task has not run, is not counted). */
const inFlightSamples: { s: number; running: number; rows: number }[] = [];
try {
  const pg0 = await pgCounters();
  const log0 = logSize();
  const cpu = startCpuSampler();
  const t0 = Date.now();
  started = await startRun(client, config);
  const { runId, workflowId } = started;
  timers.push(setInterval(() => {
    void db.query<{ running: number; rows: number }>(`select count(*) filter (where status = 'running')::int as running, count(*)::int as rows from rollouts where run_id = $1`, [runId]).then(
      (q) => {
        // progress from Postgres, not by querying the run: a query of a run whose history the
        // worker no longer caches replays all of it
        const x = { s: Math.round((Date.now() - t0) / 1000), ...q.rows[0] };
        inFlightSamples.push(x);
        if (x.s % 30 < 5) process.stderr.write(`[scale-run] ${x.s} s: ${x.rows} rollouts started, ${x.running} running\n`);
      },
      () => undefined,
    );
  }, 5000));
  process.stderr.write(`[scale-run] run ${runId}: ${IN_FLIGHT} in flight, ${UPDATES} updates of ${GROUPS_PER_UPDATE}×${GROUP}\n`);
  const handle = client.workflow.getHandle(workflowId);
  const deadline = t0 + TIMEOUT_S * 1000;
  const final = await Promise.race([
    handle.result() as Promise<{ state: string; updatesDone: number; policyVersion: number; rolloutsFinished: number; discardedStale: number; continuedAsNew: number }>,
    new Promise<never>((_, rej) => { timers.push(setTimeout(() => rej(new Error(`the run did not complete in --timeout-s ${TIMEOUT_S}`)), TIMEOUT_S * 1000)); }),
  ]);
  const runWallS = (Date.now() - t0) / 1000;
  // the rollouts still in flight when the last update landed finish on their own: wait until
  // Temporal runs none of the run's rollouts and Postgres holds none open
  const rolloutQuery = `FloeRunId = '${runId}' AND FloeKind = 'rollout'`;
  const stillRunning = async () => (await client.workflow.count(`${rolloutQuery} AND ExecutionStatus = 'Running'`)).count
    + (await db.query<{ n: number }>(`select count(*)::int as n from rollouts where run_id = $1 and status = 'running'`, [runId])).rows[0].n;
  while ((await stillRunning()) > 0) {
    if (Date.now() > deadline) throw new Error(`rollouts still running after --timeout-s ${TIMEOUT_S}`);
    await new Promise((r) => setTimeout(r, 2000));
  }
  const wallS = (Date.now() - t0) / 1000;
  const c = cpu.stop();
  const pg1 = await pgCounters();

  // every execution of the run (continue-as-new makes several): its history, and the rollouts it started
  const executions: { runId: string; events: number; bytes: number; rolloutsStarted: number; childEvents: number; workflowTaskFailures: Record<string, number>; workflowTaskTimeouts: number; continueAsNewSuggestedAtEvent: number | null }[] = [];
  /** Rollouts the run asked the server to start (its start commands), and those the server
   *  started (their started events): a start still queued when the run completes is dropped by
   *  the server and never runs. */
  const initiatedIds: string[] = [];
  const startedIds: string[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const h = await client.workflow.getHandle(workflowId, wf.runId).fetchHistory();
    const events = h.events ?? [];
    const byEvent = new Map<string, string>();
    let n = 0;
    let childEvents = 0;
    const workflowTaskFailures: Record<string, number> = {};
    let workflowTaskTimeouts = 0;
    let suggestedAt: number | null = null;
    for (const e of events) {
      const failed = e.workflowTaskFailedEventAttributes;
      if (failed) { const k = proto.temporal.api.enums.v1.WorkflowTaskFailedCause[failed.cause ?? 0] ?? String(failed.cause); workflowTaskFailures[k] = (workflowTaskFailures[k] ?? 0) + 1; }
      if (e.workflowTaskTimedOutEventAttributes) workflowTaskTimeouts++;
      if (suggestedAt === null && e.workflowTaskStartedEventAttributes?.suggestContinueAsNew) suggestedAt = Number(e.eventId);
      if (e.startChildWorkflowExecutionInitiatedEventAttributes || e.childWorkflowExecutionStartedEventAttributes || e.childWorkflowExecutionCompletedEventAttributes || e.childWorkflowExecutionFailedEventAttributes) childEvents++;
      const init = e.startChildWorkflowExecutionInitiatedEventAttributes;
      if (init?.workflowType?.name === 'rollout') {
        const arg = JSON.parse(Buffer.from(init.input!.payloads![0].data!).toString('utf8')) as { rolloutId: string };
        initiatedIds.push(arg.rolloutId);
        byEvent.set(String(e.eventId), arg.rolloutId);
      }
      const st = e.childWorkflowExecutionStartedEventAttributes;
      const id = st ? byEvent.get(String(st.initiatedEventId)) : undefined;
      if (id !== undefined) { startedIds.push(id); n++; }
    }
    executions.push({ runId: wf.runId, events: events.length, bytes: proto.temporal.api.history.v1.History.encode(h).finish().length, rolloutsStarted: n, childEvents, workflowTaskFailures, workflowTaskTimeouts, continueAsNewSuggestedAtEvent: suggestedAt });
  }
  const temporalRollouts = (await client.workflow.count(rolloutQuery)).count;

  // the accounting, in Postgres
  const rows = (await db.query<{ rollout_id: string; status: string; gate: string | null; n_turns: number | null }>(`select rollout_id, status, gate, n_turns from rollouts where run_id = $1 and purpose = 'train'`, [runId])).rows;
  const members = (await db.query<{ rollout_id: string; version: number }>('select rollout_id, version from batch_members where run_id = $1', [runId])).rows;
  const versions = (await db.query<{ version: number; batch_rollouts: number | null; discarded_stale: number | null }>('select version, batch_rollouts, discarded_stale from policy_versions where run_id = $1 order by version', [runId])).rows;
  const turns = (await db.query<{ n: number }>('select count(*)::int as n from turns t join rollouts r using (rollout_id) where r.run_id = $1', [runId])).rows[0].n;
  const rowIds = new Set(rows.map((r) => r.rollout_id));
  const startedSet = new Set(startedIds);
  const memberIds = new Set(members.map((m) => m.rollout_id));
  const byStatus: Record<string, number> = {};
  const byGate: Record<string, number> = {};
  for (const r of rows) { byStatus[r.status] = (byStatus[r.status] ?? 0) + 1; byGate[r.gate ?? 'none'] = (byGate[r.gate ?? 'none'] ?? 0) + 1; }
  const discarded = rows.filter((r) => r.status === 'discarded').map((r) => r.rollout_id);
  const accounting = {
    rolloutsInitiated: initiatedIds.length,
    initiatedNeverStarted: initiatedIds.length - startedSet.size,
    rolloutsStarted: startedIds.length,
    rolloutExecutionsInTemporal: temporalRollouts,
    startedTwice: startedIds.length - startedSet.size,
    rolloutRows: rows.length,
    startedWithoutRow: [...startedSet].filter((id) => !rowIds.has(id)).length,
    rowsNotStarted: [...rowIds].filter((id) => !startedSet.has(id)).length,
    byStatus, byGate,
    trained: memberIds.size,
    trainedTwice: members.length - memberIds.size,
    declaredByPolicyVersions: versions.reduce((n, v) => n + (v.batch_rollouts ?? 0), 0),
    discardedStale: discarded.length,
    trainedAndDiscarded: discarded.filter((id) => memberIds.has(id)).length,
    leftOver: rows.length - memberIds.size - discarded.filter((id) => !memberIds.has(id)).length,
    policyVersions: versions,
  };
  const ok = accounting.startedTwice === 0 && temporalRollouts === startedSet.size && accounting.startedWithoutRow === 0 && accounting.rowsNotStarted === 0 && accounting.trainedTwice === 0
    && accounting.trainedAndDiscarded === 0 && accounting.trained === accounting.declaredByPolicyVersions && (byStatus.running ?? 0) === 0 && (byStatus.failed ?? 0) === 0
    && final.updatesDone >= UPDATES;
  const warnings = historyWarnings(log0);
  const maxEvents = Math.max(...executions.map((e) => e.events));
  const maxBytes = Math.max(...executions.map((e) => e.bytes));
  result = {
    maxInFlight: IN_FLIGHT, final, runId,
    accountedOnce: ok, accounting,
    runWallSeconds: round(runWallS, 1), wallSeconds: round(wallS, 1), turns, turnsPerSecond: round(turns / wallS, 1),
    cpu: { coreSecondsByGroup: c.byGroupCoreSeconds, machineBusyCoreSeconds: c.machineBusyCoreSeconds, coreMsPerTurnByGroup: Object.fromEntries(Object.entries(c.byGroupCoreSeconds).map(([k, v]) => [k, round((v * 1000) / turns, 2)])) },
    postgres: { rowsWrittenPerTurn: round((pg1.rows - pg0.rows) / turns, 2), bytesGrownPerTurn: round((pg1.bytes - pg0.bytes) / turns, 0) },
    runHistory: { executions, maxEvents, maxBytes, warnAt: { events: 10_240, bytes: 10 * 1024 * 1024 }, underWarning: maxEvents < 10_240 && maxBytes < 10 * 1024 * 1024, temporalLogHistoryLines: warnings.slice(0, 20), temporalLogHistoryLineCount: warnings.length },
    trainSteps: gpu.steps,
    measuredInFlight: { peak: Math.max(0, ...inFlightSamples.map((x) => x.running)), samples: inFlightSamples, note: 'rows recorded as started and not ended, every 5 s' },
  };
  process.stderr.write(`[scale-run] ${JSON.stringify({ accountedOnce: ok, initiated: initiatedIds.length, started: startedIds.length, peakInFlight: Math.max(0, ...inFlightSamples.map((x) => x.running)), trained: accounting.trained, turnsPerSecond: result.turnsPerSecond, wallS: result.wallSeconds, executions: executions.map((e) => [e.events, e.bytes]), logLines: warnings.length })}\n`);
} catch (err) {
  failure = err;
  // the run and its rollouts would wait on queues nobody serves once this process ends
  if (started) {
    const wid = started.workflowId;
    await client.workflow.getHandle(wid).terminate('bench/scale_run.ts ended early').catch(() => undefined);
    for await (const wf of client.workflow.list({ query: `FloeRunId = '${started.runId}' AND ExecutionStatus = 'Running'` })) {
      await client.workflow.getHandle(wf.workflowId).terminate('bench/scale_run.ts ended early').catch(() => undefined);
    }
  }
} finally {
  timers.forEach((t) => clearTimeout(t));
  for (const w of workers) w.shutdown();
  await running;
  await connection.close();
  await engine.close();
  await trainer.close();
  await client.connection.close();
  await db.end();
  await closeDbPool();
}
const out = {
  bench: 'scale-run', when: new Date().toISOString(),
  command: `npx tsx bench/scale_run.ts ${process.argv.slice(2).join(' ')}`.trim(),
  machine: { cpus: (await import('node:os')).cpus().length, note: 'shared; the engine, sandbox and GPU doubles run in this process, so their CPU is in "bench+workers"' },
  params: { inFlight: IN_FLIGHT, turns: TURNS, updates: UPDATES, groupSize: GROUP, groupsPerUpdate: GROUPS_PER_UPDATE, engineMs: ENGINE_MS, sandbox: sandboxTimes, trainMs: TRAIN_MS, loadMs: LOAD_MS, turnBytes: TURN_BYTES },
  result, error: failure ? String((failure as Error).stack ?? failure) : null, inFlightSamples: result ? undefined : inFlightSamples,
};
const file = path.resolve(repoRoot, flag(a, 'out') ?? path.join('bench', 'results', 'scale-run.json'));
fs.writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
process.stderr.write(`[scale-run] wrote ${path.relative(repoRoot, file)}\n`);
if (failure) process.stderr.write(`${String((failure as Error).stack ?? failure)}\n`);
// the SDK's runtime can hold the process open after its workers shut down
process.exit(failure ? 1 : 0);
