import fs from 'node:fs';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import type { RunConfig } from '../core/config.js';
import type { Settings } from '../infra/settings.js';
import { repoRoot } from '../infra/settings.js';
import { ROLES, createWorker } from '../workers/worker.js';
import { temporalClient } from '../workers/connect.js';
import { getRunStatus, newRunId, startRun, webUiLink, runWorkflowId } from '../client/runs.js';
import { selectTasks } from '../tasks/loaders.js';
import { buildWarmStart, DEFAULT_WARM_START, policySetup, solvablePool } from '../infra/warmstart.js';
import { startEmbeddedGpu } from '../infra/engines.js';
import { dbPool, closeDbPool } from '../store/pool.js';
import { writeReport } from '../report/write.js';
import { stressVerdict } from '../core/stress.js';

/** The main job on the embedded default: the stress test. Warm-started tiny policy, a pool of
 *  toy tasks, embedded engines and trainer on this machine's CPU, all workers in this
 *  process, one asynchronous training run; progress on the terminal, a report at the end. */
export async function runDemo(s: Settings, base: RunConfig, opts: { label?: string } = {}): Promise<{ runId: string; dir: string; ok: boolean }> {
  const say = (m: string) => process.stdout.write(`${m}\n`);
  // The pool: the first tasks.limit selected tasks that the policy can solve at all (whose
  // gold trajectory, rendered by its own tokenizer and template, fits its context and reply budget); they are named in the run's config, so the run trains on
  // exactly the tasks the warm start saw.
  const { tasks: candidates } = selectTasks({ ...base.tasks, limit: 0 });
  const setup = policySetup(base);
  const pool = await solvablePool(s, candidates, base.tasks.limit, base.policy.maxTokensPerTurn, setup);
  const tasks = pool.tasks;
  base = { ...base, tasks: { ...base.tasks, include: tasks.map((t) => t.instanceId), limit: 0 } };
  const runId = newRunId(base.name);
  const dir = path.join(repoRoot, 'runs', runId);
  fs.mkdirSync(dir, { recursive: true });

  const checkpoint = base.policy.checkpoint || (await buildWarmStart(s, pool.trajectories, { ...DEFAULT_WARM_START, model: base.policy.model, steps: base.policy.warmStartSteps, lr: base.policy.warmStartLr, seed: base.seed }, setup));
  say(`floe demo: ${tasks.length} tasks, ${base.engines.count} engine(s) (${base.engines.router}), G=${base.rollout.groupSize}, ${base.training.updates} updates; starting policy ${path.relative(repoRoot, checkpoint)}`);
  const gpu = await startEmbeddedGpu(s, { count: base.engines.count, checkpoint, publishDir: path.join(dir, 'weights'), lr: base.trainer.lr, seed: base.seed, model: base.policy.model, tokenizer: base.policy.tokenizer });
  const config: RunConfig = {
    ...base,
    engines: { ...base.engines, endpoints: base.engines.endpoints.length ? base.engines.endpoints : gpu.engines.map((e, i) => ({ id: `engine-${i}`, url: e.url, node: 'local', kind: 'reference' as const })) },
    trainer: { ...base.trainer, url: base.trainer.url || gpu.trainer!.url },
  };

  const workers = (await Promise.all(ROLES.map((r) => createWorker(s, r)))).filter((w): w is Worker => w !== null);
  const running = Promise.all(workers.map((w) => w.run()));
  const client = await temporalClient(s);
  const started = Date.now();
  let ok = false;
  const interrupt = () => { say('\ninterrupted: ending the run and stopping the engines…'); void client.workflow.getHandle(runWorkflowId(runId)).terminate('interrupted (Ctrl-C)').catch(() => undefined); };
  process.once('SIGINT', interrupt);
  try {
    await startRun(client, config, { runId });
    say(`run ${runId}\n  Web UI  ${webUiLink(s, runWorkflowId(runId))}\n  folder  ${path.relative(process.cwd(), dir)}`);
    let seen = -1;
    for (;;) {
      const st = await getRunStatus(client, runId);
      if (st.updatesDone !== seen) {
        seen = st.updatesDone;
        const el = (Date.now() - started) / 1000;
        say(`  update ${String(st.updatesDone).padStart(3)}/${st.updatesTarget}  reward ${st.lastMeanReward === null ? '  –  ' : st.lastMeanReward.toFixed(3)}  rollouts ${st.rolloutsFinished} (+${st.rolloutsInFlight} in flight)  stale ${st.discardedStale}  pool ${st.pool.active} active/${st.pool.retiredMastered + st.pool.retiredHopeless} retired  ${st.updatesDone ? (el / st.updatesDone).toFixed(1) : '–'} s/update  ${Math.round(el)} s`);
      }
      if (st.state === 'completed' || st.state === 'stopped' || st.state === 'failed') break;
      await new Promise((r) => setTimeout(r, 2000));
    }
    await client.workflow.getHandle(runWorkflowId(runId)).result();
    const { html, json } = await writeReport(dbPool(s.postgres.url), runId, dir);
    const summary = JSON.parse(fs.readFileSync(json, 'utf8')) as { updates: { meanReward: number | null }[] };
    const verdict = stressVerdict(summary.updates.map((u) => u.meanReward ?? 0));
    fs.writeFileSync(path.join(dir, 'stress.json'), `${JSON.stringify({ runId, label: opts.label ?? null, ...verdict, minutes: (Date.now() - started) / 60000 }, null, 2)}\n`);
    ok = verdict.pass;
    say(`\n${verdict.pass ? 'PASS' : 'FAIL'} stress test: start ${verdict.start.toFixed(2)}, peak ${verdict.peak.toFixed(2)}, last fifth min ${verdict.lastFifthMin.toFixed(2)} (must reach ≥ 0.90 and stay within 0.10 of the peak)\n  report  ${path.relative(process.cwd(), html)}\n  summary ${path.relative(process.cwd(), json)}`);
  } finally {
    try {
      // The embedded engines die with this process: a run left running would resume, with no
      // engines, under the next demo's workers. End it here (its history stays in Temporal).
      const handle = client.workflow.getHandle(runWorkflowId(runId));
      if ((await handle.describe().catch(() => null))?.status.name === 'RUNNING') {
        await handle.terminate('the demo process that hosted its engines ended').catch(() => undefined);
      }
      await client.connection.close().catch(() => undefined);
      // Ctrl-C has already stopped the workers (the Temporal runtime handles SIGINT)
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await running.catch(() => undefined);
    } finally {
      await gpu.stop();
      await closeDbPool();
    }
  }
  return { runId, dir, ok };
}
