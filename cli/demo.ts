import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import type { RunConfig } from '../core/config.js';
import type { Settings } from '../infra/settings.js';
import { repoRoot } from '../infra/settings.js';
import { dockerFromSettings } from '../infra/docker.js';
import { ROLES, startWorkers } from '../workers/worker.js';
import { temporalClient } from '../workers/connect.js';
import { getRunStatus, newRunId, startRun, webUiLink, runWorkflowId } from '../client/runs.js';
import { selectTasks } from '../tasks/loaders.js';
import { buildWarmStart, policySetup, solvablePool } from '../infra/warmstart.js';
import { newestPublished, serverRecords, startEmbeddedGpu, stopLeftoverServers, type EmbeddedGpu, type RestartEvent, type ServerRecord } from '../infra/engines.js';
import { dbPool, closeDbPool } from '../store/pool.js';
import { listPolicyVersions } from '../store/batches.js';
import { markEngineUnknown } from '../store/engines.js';
import { getRun, setRunStatus } from '../store/runs.js';
import { writeReport } from '../report/write.js';
import { stressVerdict } from '../core/stress.js';
import { poolPass } from '../core/passAtK.js';
import { listEvaluations } from '../store/evaluations.js';

/** The demo remembers its run in runs/<run id>/demo.json, so that a demo killed at any moment
 *  (kill -9, a closed terminal, OOM) is resumed by the next `floe demo` of the same config:
 *  the same run, driven to completion, with the engines and the trainer back at its version.
 *
 *  - Which run: the newest demo file of this config's name whose workflow is still Running in
 *    Temporal. A run that completed, failed or was ended (Ctrl-C terminates it) is not resumed:
 *    the demo starts a new one. A Running run of the same name started from a different config
 *    (the file or --set changed: configHash differs) is an error, and so is a Running demo run
 *    of another name: this demo's workers poll the same task queues and would drive that run
 *    against engines that are gone. Both errors name the run and `floe run stop`.
 *  - Leftovers: the killed demo's engines and trainer keep running (reparented to init) and
 *    hold the ports the run's config names. Their pids are in the file; each is stopped only
 *    while its /proc command line is still that server on that port. Sandbox and grader
 *    containers of the dead worker are removed by the sandbox reaper the workers start.
 *  - Versions: the engines start from the newest policy_versions row's checkpoint (the run's
 *    current version N; checkpoints carry their version in the sidecar, so the engines label
 *    tokens N). The trainer starts from the newest complete folder it published (v<N> or
 *    v<N+1>: a step that finished while the weight update recording it was lost), so the
 *    retried trainStep activity of that update finds the trainer at N+1 and answers without
 *    stepping again; the batch itself is claimed once in Postgres (claimBatch). The engines'
 *    records (engine_weights) are marked unknown: the first generation on each reloads the
 *    version floe recorded for it (generate's resync), whatever the restarted process holds.
 *    Not carried over: the trainer's optimizer moments (AdamW restarts from zero at N).
 *  - Ports: the running workflow's config holds the engine and trainer URLs, so they come
 *    back on the same ports; a port taken by another process is an error naming it. */

interface DemoFile {
  format: 1;
  runId: string;
  configName: string;
  /** sha256 of the config as loaded (file + --set), before the pool and the warm start. */
  configHash: string;
  startedAt: string;
  /** The process that hosts the run's workers now (the last demo that started or resumed it). */
  demoPid: number;
  /** The starting policy (version 0). */
  checkpoint: string;
  publishDir: string;
  /** The config the run was started with (the pool chosen, the engine and trainer URLs). */
  config: RunConfig;
  /** The embedded engines and trainer the hosting process started. */
  servers: ServerRecord[];
  resumes: number;
}

const DEMO_FILE = 'demo.json';
const runsDir = path.join(repoRoot, 'runs');

function stable(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stable);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, stable((v as Record<string, unknown>)[k])]));
  return v;
}
export const configHash = (cfg: RunConfig): string => crypto.createHash('sha256').update(JSON.stringify(stable(cfg))).digest('hex').slice(0, 16);

function readDemoFiles(): DemoFile[] {
  if (!fs.existsSync(runsDir)) return [];
  const out: DemoFile[] = [];
  for (const d of fs.readdirSync(runsDir)) {
    const f = path.join(runsDir, d, DEMO_FILE);
    if (!fs.existsSync(f)) continue;
    try {
      const df = JSON.parse(fs.readFileSync(f, 'utf8')) as DemoFile;
      if (df.format === 1 && df.runId) out.push(df);
    } catch { /* a file cut short by a kill between write and rename cannot happen (see writeDemoFile); others are not ours */ }
  }
  return out.sort((a, b) => b.startedAt.localeCompare(a.startedAt));
}

function writeDemoFile(df: DemoFile): void {
  const f = path.join(runsDir, df.runId, DEMO_FILE);
  fs.mkdirSync(path.dirname(f), { recursive: true });
  fs.writeFileSync(`${f}.tmp`, `${JSON.stringify(df, null, 2)}\n`);
  fs.renameSync(`${f}.tmp`, f); // a kill at any moment leaves the old file or the new one
}

/** Is `pid` a live `floe demo` process other than this one? */
function isOtherDemo(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return argv.some((a) => a.endsWith('floe.ts') || a.endsWith('bin/floe')) && argv.includes('demo');
  } catch {
    return false;
  }
}

async function workflowState(client: Client, runId: string): Promise<string | null> {
  try {
    return (await client.workflow.getHandle(runWorkflowId(runId)).describe()).status.name;
  } catch {
    return null; // unknown to this Temporal server (its state was reset)
  }
}

/** The Running demo run this demo must resume, or null for a new one; errors for a Running
 *  run it must not drive (see the top of this file). */
async function findRunToResume(client: Client, base: RunConfig, hash: string): Promise<DemoFile | null> {
  for (const df of readDemoFiles()) {
    if ((await workflowState(client, df.runId)) !== 'RUNNING') {
      // a demo killed before its run started, or whose run was ended from elsewhere: its
      // servers may still be running (each is checked to still be that server first)
      if (!isOtherDemo(df.demoPid)) await stopLeftoverServers(df.servers);
      continue;
    }
    if (isOtherDemo(df.demoPid)) {
      throw new Error(`run ${df.runId} is hosted by another floe demo (pid ${df.demoPid}); wait for it to finish, or end it (Ctrl-C in its terminal ends the run; \`kill -9 ${df.demoPid}\` leaves the run for the next \`floe demo\` to resume)`);
    }
    if (df.configName !== base.name) {
      throw new Error(`run ${df.runId} of an earlier demo (config '${df.configName}') is still running with no process hosting it; this demo's workers would drive it against engines that are gone. Resume it with \`floe demo\` and its config, or end it with \`floe run stop ${df.runId}\``);
    }
    if (df.configHash !== hash) {
      throw new Error(`run ${df.runId} of config '${base.name}' is still running, started from a different config (the file or --set changed since: hash ${df.configHash}, now ${hash}); rerun \`floe demo\` with the config it started from to resume it, or end it with \`floe run stop ${df.runId}\` to start a new run`);
    }
    return df;
  }
  return null;
}

/** The run's workflows still open (train rollouts carry FloeRunId from their start). */
function openWorkflowsOf(client: Client, runId: string): AsyncIterable<WorkflowExecutionInfo> {
  return client.workflow.list({ query: `FloeRunId = '${runId}' AND ExecutionStatus = 'Running'` }) as AsyncIterable<WorkflowExecutionInfo>;
}

/** Fail the activity attempts that a dead worker was running (the killed demo's), so that they
 *  are retried now instead of after their heartbeat timeout (30 s to 2 min). Only attempts
 *  whose last worker identity is the dead process are touched; Temporal's retry policy then
 *  schedules the next attempt as it would after a timeout. Best effort. */
async function failOrphanedActivities(client: Client, runId: string, deadPid: number): Promise<number> {
  const dead = `${deadPid}@${os.hostname()}`;
  let n = 0;
  const open = openWorkflowsOf(client, runId);
  for await (const wf of open) {
    const desc = await client.workflow.getHandle(wf.workflowId, wf.runId).describe().catch(() => null);
    for (const a of desc?.raw.pendingActivities ?? []) {
      // state 2 = PENDING_ACTIVITY_STATE_STARTED: an attempt a worker holds (a scheduled one is not failed)
      if (Number(a.state) !== 2 || a.lastWorkerIdentity !== dead || !a.activityId) continue;
      try {
        await client.activity.fail({ workflowId: wf.workflowId, runId: wf.runId, activityId: a.activityId }, new Error(`the worker running this attempt (${dead}) was killed with its demo; retrying on the resumed demo's workers`));
        n++;
      } catch { /* completed or timed out meanwhile */ }
    }
  }
  return n;
}

/** The run completed, but rollouts it no longer needed were abandoned in flight (they finish on
 *  their own: trainingRun's parent-close policy). They need this process's engines and
 *  sandboxes to finish, so the demo waits for every workflow of the run to close before it
 *  stops them (at most `ms`; the ones still open then are terminated, and named). */
async function drainRun(client: Client, runId: string, say: (m: string) => void, ms: number): Promise<void> {
  const open = async () => {
    const out: WorkflowExecutionInfo[] = [];
    for await (const wf of openWorkflowsOf(client, runId)) out.push(wf);
    return out;
  };
  const deadline = Date.now() + ms;
  let left = await open();
  if (left.length) say(`  waiting for ${left.length} rollout workflow(s) the run abandoned in flight to finish…`);
  while (left.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2000));
    left = await open();
  }
  for (const wf of left) {
    say(`  ${wf.workflowId} did not finish within ${ms / 1000} s: terminated`);
    await client.workflow.getHandle(wf.workflowId, wf.runId).terminate('its run completed and the demo hosting its engines is ending').catch(() => undefined);
  }
}

/** Does `p` settle within `ms`? (It is not cancelled when it does not.) */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((r) => { timer = setTimeout(() => r(false), ms); });
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Terminate every open workflow of a run (its train rollouts carry FloeRunId from their start;
 *  their reward gates end with them: parent-close policy TERMINATE). Returns how many. */
async function terminateOpenWorkflows(client: Client, runId: string, reason: string): Promise<number> {
  let n = 0;
  for await (const wf of openWorkflowsOf(client, runId)) {
    await client.workflow.getHandle(wf.workflowId, wf.runId).terminate(reason).then(() => { n++; }, () => undefined);
  }
  return n;
}

/** The sandbox and grader containers of a run (label floe.run), removed: a terminated
 *  rollout runs none of its own clean-up. Returns how many. */
async function removeRunContainers(s: Settings, runId: string): Promise<number> {
  const docker = dockerFromSettings(s);
  let n = 0;
  for (const c of await docker.listContainers({ all: true, filters: { label: [`floe.run=${runId}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true }).then(() => { n++; }, () => undefined);
  }
  return n;
}

const portOf = (url: string): number => Number(new URL(url).port);

/** The main job on the embedded default: the stress test. Warm-started tiny policy, a pool of
 *  toy tasks, embedded engines and trainer on this machine's CPU, all workers in this
 *  process, one asynchronous training run; progress on the terminal, a report at the end.
 *  A demo that was killed is resumed by the next one (see the top of this file). */
/** `startedAtMs`: where the run's minutes start (default: this process's start; `floe stress`
 *  gives each layer its own start). */
export async function runDemo(s: Settings, base: RunConfig, opts: { label?: string; startedAtMs?: number; verdict?: boolean } = {}): Promise<{ runId: string; dir: string; ok: boolean }> {
  const say = (m: string) => process.stdout.write(`${m}\n`);
  const hash = configHash(base);
  const client = await temporalClient(s);
  const db = dbPool(s.postgres.url);
  let gpu: EmbeddedGpu | null = null;
  let workers: Awaited<ReturnType<typeof startWorkers>> | null = null;
  let runId = '';
  let dir = '';
  let ok = false;
  let hosting = false; // this process drives the run: its end (Ctrl-C, an error) ends the run
  let interrupt: (() => void) | null = null;
  try {
    const prior = await findRunToResume(client, base, hash);
    let df: DemoFile | null = null;
    // A server the supervisor restarted has a new pid: the demo file names it, so that a later
    // demo can stop it if this one is killed.
    const onRestart = (e: RestartEvent) => {
      if (e.gaveUp) return say(`floe demo: ${e.gaveUp}`);
      say(`floe demo: ${e.server.name} exited (${e.exit.signal ?? `code ${e.exit.code}`}); started again on port ${e.server.port} from ${path.relative(repoRoot, e.checkpoint)}`);
      if (df && gpu) writeDemoFile(df = { ...df, servers: serverRecords(gpu) });
    };
    if (prior) {
      df = prior;
      runId = df.runId;
      dir = path.join(runsDir, runId);
      say(`floe demo: resuming run ${runId} (started ${df.startedAt}; its demo, pid ${df.demoPid}, is gone)`);
      const stopped = await stopLeftoverServers(df.servers);
      for (const r of stopped) say(`  stopped the left-over ${r.name} (pid ${r.pid}, port ${r.port})`);
      // The run's current version, and the newest the trainer published (at most one ahead).
      const versions = await listPolicyVersions(db, runId);
      const current = versions.filter((v) => v.checkpointPath).at(-1);
      const engineCkpt = current?.checkpointPath ?? df.checkpoint;
      const engineVersion = current?.version ?? 0;
      const trainerVersion = Math.max(engineVersion, newestPublished(df.publishDir)?.version ?? 0);
      const trainerCkpt = trainerVersion === engineVersion ? engineCkpt : path.join(df.publishDir, `v${trainerVersion}`);
      const cfg = df.config;
      const byName = new Map(df.servers.map((r) => [r.name, r.port]));
      const enginePorts = Array.from({ length: cfg.engines.count }, (_, i) => byName.get(`engine-${i}`) ?? portOf(cfg.engines.endpoints[i]?.url ?? 'http://x:0'));
      gpu = await startEmbeddedGpu(s, { count: cfg.engines.count, checkpoint: engineCkpt, trainerCheckpoint: trainerCkpt, publishDir: df.publishDir, seed: cfg.seed, model: cfg.policy.model, tokenizer: cfg.policy.tokenizer, ports: { engines: enginePorts, trainer: byName.get('trainer') ?? portOf(cfg.trainer.url) }, onRestart });
      say(`  engines back at v${engineVersion} (${path.relative(repoRoot, engineCkpt)}), trainer at v${trainerVersion}${trainerVersion > engineVersion ? ' (a step the run had not recorded: its weight update answers it without training again)' : ''}`);
      // What each engine serves is floe's record, not the restarted process's: reload on first use.
      for (const e of cfg.engines.endpoints) await markEngineUnknown(db, e);
      df = { ...df, demoPid: process.pid, servers: serverRecords(gpu), resumes: df.resumes + 1 };
      writeDemoFile(df);
      const failed = await failOrphanedActivities(client, runId, prior.demoPid).catch(() => 0);
      if (failed) say(`  ${failed} activity attempt(s) of the killed demo's workers retried now`);
    } else {
      // The pool: the first tasks.limit selected tasks that the policy can solve at all (whose
      // gold trajectory, rendered by its own tokenizer and template, fits its context and reply
      // budget); they are named in the run's config, so the run trains on exactly the tasks the
      // warm start saw.
      const { tasks: candidates } = selectTasks({ ...base.tasks, limit: 0 });
      const setup = policySetup(base);
      const pool = await solvablePool(s, candidates, base.tasks.limit, base.policy.maxTokensPerTurn, setup);
      const tasks = pool.tasks;
      const named: RunConfig = { ...base, tasks: { ...base.tasks, include: tasks.map((t) => t.instanceId), limit: 0 } };
      runId = newRunId(base.name);
      dir = path.join(runsDir, runId);
      fs.mkdirSync(dir, { recursive: true });
      const checkpoint = named.policy.checkpoint || (await buildWarmStart(s, pool.trajectories, { model: named.policy.model, steps: named.policy.warmStartSteps, lr: named.policy.warmStartLr, seed: named.seed }, setup));
      say(`floe demo: ${tasks.length} tasks, ${named.engines.count} engine(s) (${named.engines.router}), G=${named.rollout.groupSize}, ${named.training.updates} updates; starting policy ${path.relative(repoRoot, checkpoint)}`);
      const publishDir = path.join(dir, 'weights');
      gpu = await startEmbeddedGpu(s, { count: named.engines.count, checkpoint, publishDir, seed: named.seed, model: named.policy.model, tokenizer: named.policy.tokenizer, onRestart });
      const config: RunConfig = {
        ...named,
        engines: { ...named.engines, endpoints: named.engines.endpoints.length ? named.engines.endpoints : gpu.engines.map((e, i) => ({ id: `engine-${i}`, url: e.url, node: 'local', kind: 'reference' as const })) },
        trainer: { ...named.trainer, url: named.trainer.url || gpu.trainer!.url },
      };
      df = { format: 1, runId, configName: base.name, configHash: hash, startedAt: new Date().toISOString(), demoPid: process.pid, checkpoint, publishDir, config, servers: serverRecords(gpu), resumes: 0 };
      // Written before the workflow starts: a kill between the two leaves a file whose run
      // Temporal does not know, which the next demo skips.
      writeDemoFile(df);
    }

    workers = await startWorkers(s, ROLES);
    hosting = true;
    // A terminal's Ctrl-C reaches the whole process group, and a wrapper that relays it (the
    // tsx CLI, npx) sends a second copy: that copy, within a second, must not kill the ending
    // half-way (the run's row, the engines and the trainer would be left as they are). A later
    // Ctrl-C forces the exit. (bin/floe runs this process directly: see there.)
    let interruptedAt = 0;
    interrupt = () => {
      if (interruptedAt) {
        if (Date.now() - interruptedAt < 1000) return;
        say('\ninterrupted again: exiting now'); process.exit(130);
      }
      interruptedAt = Date.now();
      say('\ninterrupted: ending the run and stopping the engines…');
      void client.workflow.getHandle(runWorkflowId(runId)).terminate('interrupted (Ctrl-C)').catch(() => undefined);
    };
    process.on('SIGINT', interrupt);
    if (!prior) await startRun(client, df.config, { runId });
    say(`run ${runId}\n  Web UI  ${webUiLink(s, runWorkflowId(runId))}\n  folder  ${path.relative(process.cwd(), dir)}`);
    const started = Date.parse(df.startedAt);
    let seen = -1;
    let evalsSeen = 0;
    for (;;) {
      const st = await getRunStatus(client, runId);
      if (st.updatesDone !== seen) {
        seen = st.updatesDone;
        const el = (Date.now() - started) / 1000;
        say(`  update ${String(st.updatesDone).padStart(3)}/${st.updatesTarget}  reward ${st.lastMeanReward === null ? '  –  ' : st.lastMeanReward.toFixed(3)}  rollouts ${st.rolloutsFinished} (+${st.rolloutsInFlight} in flight)  stale ${st.discardedStale}  pool ${st.pool.active} active/${st.pool.retiredMastered + st.pool.retiredHopeless} retired  ${st.updatesDone ? (el / st.updatesDone).toFixed(1) : '–'} s/update  ${Math.round(el)} s`);
      }
      for (const e of (st.evaluations ?? []).slice(evalsSeen)) {
        evalsSeen++;
        say(`  evaluation (${e.label}, v${e.version}, frozen, k=${e.k}): pass@1 ${e.pass1?.toFixed(3) ?? '–'}, pass@${e.k} ${e.passK?.toFixed(3) ?? '–'} over ${e.tasks} tasks${e.label === 'start' && df.config.evaluation.poolFromStart ? `; the pool: ${e.pool} solved at least once` : ''}`);
      }
      if (st.state === 'completed' || st.state === 'stopped' || st.state === 'failed') break;
      await new Promise((r) => setTimeout(r, 2000));
    }
    await client.workflow.getHandle(runWorkflowId(runId)).result();
    await drainRun(client, runId, say, 180_000);
    const { html, json } = await writeReport(db, runId, dir);
    const summary = JSON.parse(fs.readFileSync(json, 'utf8')) as { updates: { meanReward: number | null }[]; epochs?: number | null };
    if (opts.verdict === false) {
      // `floe run start` hosting the run: the stress test's rules are the main job's, not this run's
      const st = await getRunStatus(client, runId);
      ok = st.state === 'completed';
      say(`\nrun ${runId} ${st.state}: ${st.updatesDone} updates, ${summary.updates.map((u) => u.meanReward?.toFixed(3) ?? '–').join(' ')} batch reward`);
      say(`  report  ${path.relative(process.cwd(), html)}\n  summary ${path.relative(process.cwd(), json)}`);
      return { runId, dir, ok };
    }
    const evals = await listEvaluations(db, runId);
    const poolPass1 = (label: 'start' | 'end') => poolPass(evals.filter((e) => e.label === label && e.inPool)).pass1;
    // minutes of this process (the one-time bootstrap before it is not counted; a resumed run
    // counts only the demo that finished it: `resumes` says so), or of this stress layer
    const minutes = opts.startedAtMs === undefined ? process.uptime() / 60 : (Date.now() - opts.startedAtMs) / 60000;
    const verdict = stressVerdict({ rewards: summary.updates.map((u) => u.meanReward ?? 0), startPass1: poolPass1('start'), endPass1: poolPass1('end'), epochs: summary.epochs ?? 0, minutes });
    fs.writeFileSync(path.join(dir, 'stress.json'), `${JSON.stringify({ runId, label: opts.label ?? null, ...verdict, resumes: df.resumes, minutes, startPass1: poolPass1('start'), endPass1: poolPass1('end'), epochs: summary.epochs ?? null }, null, 2)}\n`);
    ok = verdict.pass;
    say(`\n${verdict.pass ? 'PASS' : 'FAIL'} stress test (${verdict.updates} updates, ${minutes.toFixed(1)} min)`);
    for (const c of verdict.checks) say(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.rule}: ${c.value === null ? 'not measured' : c.value.toFixed(3)}`);
    say(`  report  ${path.relative(process.cwd(), html)}\n  summary ${path.relative(process.cwd(), json)}`);
  } finally {
    try {
      // Ctrl-C or an error of this process ends the run it hosts (its history stays in
      // Temporal): a run left running would be driven by any later workers against engines that
      // are gone. Only a hard kill, which runs none of this, leaves it for the next demo.
      let ended = false;
      if (hosting) {
        const handle = client.workflow.getHandle(runWorkflowId(runId));
        if ((await handle.describe().catch(() => null))?.status.name === 'RUNNING') {
          await handle.terminate('the demo process that hosted its engines ended').catch(() => undefined);
        }
        const final = (await handle.describe().catch(() => null))?.status.name;
        ended = final !== undefined && final !== 'RUNNING' && final !== 'COMPLETED';
        // a terminated workflow writes nothing more: its runs row says so here, not 'running'
        if (ended) {
          const row = await getRun(db, runId).catch(() => null);
          const status = final === 'FAILED' || final === 'TIMED_OUT' ? 'failed' : 'stopped';
          if (row && !['stopped', 'completed', 'failed'].includes(row.status)) await setRunStatus(db, { runId, status }).catch(() => undefined);
        }
      }
      // The workers stop first (their in-flight attempts end with them), so that nothing drives
      // the run's rollouts while they are ended below.
      if (workers && !(await within(workers.shutdown(), 60_000))) say('  the workers did not stop within 60 s (an activity ignored its cancellation); going on');
      // An ended run's train rollouts were abandoned in flight (trainingRun's parent-close
      // policy): left open, the next worker on the control queue would drive them against
      // engines that are gone. They end with it, and their containers go.
      if (ended) {
        const n = await terminateOpenWorkflows(client, runId, 'its run ended (Ctrl-C, or an error of the demo that hosted it)').catch(() => 0);
        const c = await removeRunContainers(s, runId).catch(() => 0);
        if (n || c) say(`  ended ${n} rollout workflow(s) the run abandoned in flight; removed ${c} container(s)`);
      }
      await client.connection.close().catch(() => undefined);
    } finally {
      await gpu?.stop();
      await closeDbPool();
      if (interrupt) process.off('SIGINT', interrupt);
    }
  }
  return { runId, dir, ok };
}
