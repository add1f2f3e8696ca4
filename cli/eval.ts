import fs from 'node:fs';
import path from 'node:path';
import { parseRunConfig, type RunConfig } from '../core/config.js';
import { listPass, parseTaskList, unionOfLists, TaskListError } from '../core/evalTasks.js';
import { poolPass, type TaskScore } from '../core/passAtK.js';
import type { Task } from '../core/taskModel.js';
import { repoRoot, type Settings } from '../infra/settings.js';
import { dockerFromSettings } from '../infra/docker.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { selectTasks } from '../tasks/loaders.js';
import { temporalClient } from '../workers/connect.js';
import { startWorkers } from '../workers/worker.js';
import { closeDbPool, dbPool } from '../store/pool.js';
import { getRun, insertRun, setRunStatus } from '../store/runs.js';
import { listPolicyVersions } from '../store/batches.js';
import { upsertTask } from '../store/tasks.js';
import { setEngineServing } from '../store/engines.js';
import {
  evaluationProgress, evaluationVersions, finishCheckpointEvaluation, insertCheckpointEvaluation, listEvaluations, type TaskList,
} from '../store/evaluations.js';
import { newRunId } from '../client/runs.js';
import { evaluationWorkflowId, startEvaluation } from '../client/evaluations.js';
import { rolloutSettings } from '../core/contracts.js';
import { loadRunConfig } from './config.js';
import { UsageError } from './args.js';

/** `floe eval <run id | checkpoint folder>… --tasks LIST… --k 4`: frozen-weight pass@1 / pass@k
 *  of one or more policies on named task lists, side by side. For each policy the command
 *  starts inference engines of its own on the checkpoint (no trainer: nothing can publish
 *  weights to them), records a runs row for the evaluation (its rollouts are audited like any
 *  other), and runs the `evaluation` workflow with the same harness, budgets and sandboxes as
 *  training (the run's config, or --config). Every generated id must carry the checkpoint's
 *  version (settings.frozenVersion); the versions the rollouts were generated with are read
 *  back from Postgres and shown. Prints a table, writes JSON. */

export interface EvalOptions {
  policies: string[];
  tasks: string[];
  k: number;
  /** Run config for checkpoint folders (default configs/stress-test.yaml) and --set overrides. */
  config?: string;
  sets: string[];
  /** Task source for file lists and `toy` (default: the first run's tasks.source, else toy). */
  source?: string;
  out?: string;
  seed?: number;
}

/** One column of the table: a checkpoint with the config its rollouts use. */
export interface Policy { label: string; checkpoint: string; version: number; sourceRunId: string | null; config: RunConfig }

const say = (m: string) => process.stderr.write(`[floe eval] ${m}\n`);

/** The version a checkpoint folder's sidecar records (engine/floe_engine/checkpoint.py). */
export function checkpointVersion(dir: string): number {
  const side = path.join(dir, 'checkpoint.json');
  if (!fs.existsSync(side)) throw new UsageError(`${dir} has no checkpoint.json: not a floe checkpoint folder (a run's are runs/<run id>/weights/v<N>, the demo's warm start .floe/warmstart/<hash>/v0); or give a run id (see \`floe run list\`)`);
  const v = (JSON.parse(fs.readFileSync(side, 'utf8')) as { version?: unknown }).version;
  if (!Number.isInteger(v) || (v as number) < 0) throw new UsageError(`${side} records no version (got ${JSON.stringify(v)}); is it a floe checkpoint?`);
  return v as number;
}

/** A run's start and final checkpoints: the start is its config's policy.checkpoint, or the
 *  warm start the demo made (runs/<id>/demo.json); the final one its newest published version. */
async function runPolicies(db: ReturnType<typeof dbPool>, runId: string, base: RunConfig): Promise<Policy[] | null> {
  const run = await getRun(db, runId);
  if (!run) return null;
  let config: RunConfig;
  try {
    config = parseRunConfig(run.config);
  } catch {
    say(`run ${runId}'s recorded config does not parse with this floe version: its rollouts use ${base.name}'s config instead`);
    config = base;
  }
  const demoFile = path.join(repoRoot, 'runs', runId, 'demo.json');
  const start = config.policy.checkpoint || (fs.existsSync(demoFile) ? (JSON.parse(fs.readFileSync(demoFile, 'utf8')) as { checkpoint?: string }).checkpoint ?? '' : '');
  const out: Policy[] = [];
  if (start && fs.existsSync(start)) out.push({ label: 'start', checkpoint: start, version: checkpointVersion(start), sourceRunId: runId, config });
  else say(`run ${runId}: its starting checkpoint is not known here (no policy.checkpoint in its config, no runs/${runId}/demo.json): give the folder it started from to compare with it`);
  const last = (await listPolicyVersions(db, runId)).filter((v) => v.checkpointPath).at(-1);
  // (the trainer records its weights file; the checkpoint is the folder holding it)
  const folder = last?.checkpointPath && fs.existsSync(last.checkpointPath) ? (fs.statSync(last.checkpointPath).isDirectory() ? last.checkpointPath : path.dirname(last.checkpointPath)) : null;
  if (last && folder) out.push({ label: `v${last.version}`, checkpoint: folder, version: checkpointVersion(folder), sourceRunId: runId, config });
  else if (last) say(`run ${runId}: its newest checkpoint ${last.checkpointPath} (v${last.version}) is not on this machine`);
  else say(`run ${runId} has published no weight update yet: only its start is evaluated`);
  if (!out.length) throw new UsageError(`run ${runId} has no checkpoint on this machine to evaluate; give a checkpoint folder instead`);
  return out;
}

/** A `--tasks` value as a named list: a file (one id per line, or a JSON array), `toy` (every
 *  sound toy task), `pool:RUN` (the tasks the run trained on) or `heldout:RUN` (sound toy tasks
 *  that neither the run's training nor its warm start saw: not among its candidates). */
async function taskList(db: ReturnType<typeof dbPool>, spec: string, known: Map<string, Task>, source: string): Promise<TaskList> {
  const m = /^(pool|heldout):(.+)$/.exec(spec);
  if (m) {
    const [, kind, runId] = m;
    const run = await getRun(db, runId);
    if (!run) throw new UsageError(`--tasks ${spec}: no run ${runId} in Postgres (see \`floe run list\`)`);
    const config = parseRunConfig(run.config);
    const candidates = selectTasks({ ...config.tasks }).tasks.map((t) => t.instanceId);
    if (kind === 'pool') {
      const evals = (await listEvaluations(db, runId)).filter((e) => e.label === 'start');
      const pool = evals.length && config.evaluation.poolFromStart ? evals.filter((e) => e.inPool).map((e) => e.taskId) : candidates;
      return { name: spec, taskIds: pool };
    }
    if (config.tasks.source !== 'toy') throw new UsageError(`--tasks ${spec}: held-out lists are made from the toy suite, and run ${runId} trained on ${config.tasks.source}; give a file of held-out ids instead`);
    const seen = new Set(candidates);
    return { name: spec, taskIds: selectTasks({ source: 'toy', include: [], limit: 0, excludeLooseTests: true, onBadRow: 'skip' }).tasks.map((t) => t.instanceId).filter((id) => !seen.has(id)) };
  }
  if (spec === 'toy') {
    if (source !== 'toy') throw new UsageError(`--tasks toy lists the toy suite, but --source is ${source}; give a file of ids from it`);
    return { name: 'toy', taskIds: [...known.values()].filter((t) => t.looseTests !== true).map((t) => t.instanceId) };
  }
  if (!fs.existsSync(spec)) throw new UsageError(`--tasks ${spec}: no such file. Give a file with one task id per line (or a JSON array), \`toy\`, \`pool:RUN_ID\` or \`heldout:RUN_ID\``);
  try {
    return { name: path.basename(spec), taskIds: parseTaskList(fs.readFileSync(spec, 'utf8'), spec) };
  } catch (err) {
    if (err instanceof TaskListError) throw new UsageError(err.message);
    throw err;
  }
}

/** Column results for the table and the JSON. */
interface Column { policy: Policy; evalId: string; scores: TaskScore[]; versionsSeen: number[]; seconds: number }

export async function runEval(s: Settings, o: EvalOptions): Promise<number> {
  if (!o.policies.length) throw new UsageError('floe eval needs at least one run id or checkpoint folder');
  if (!o.tasks.length) throw new UsageError('floe eval needs --tasks: a file with one task id per line (or a JSON array), `toy`, `pool:RUN_ID` or `heldout:RUN_ID`');
  if (!Number.isInteger(o.k) || o.k < 1 || o.k > 64) throw new UsageError(`--k must be a whole number from 1 to 64 (got ${o.k})`);
  const base = loadRunConfig(o.config ?? path.join(repoRoot, 'configs', 'stress-test.yaml'), o.sets);
  const db = dbPool(s.postgres.url);
  let gpu: EmbeddedGpu | null = null;
  let workers: Awaited<ReturnType<typeof startWorkers>> | null = null;
  let client: Awaited<ReturnType<typeof temporalClient>> | null = null;
  let current: string | null = null;
  let interrupted = false;
  const onInterrupt = () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    say('interrupted: ending the evaluation…');
    if (client && current) void client.workflow.getHandle(evaluationWorkflowId(current)).terminate('interrupted (Ctrl-C)').catch(() => undefined);
  };
  try {
    // ---- what to evaluate, on what: everything checked before an engine starts ----
    const policies: Policy[] = [];
    for (const p of o.policies) {
      if (fs.existsSync(p) && fs.statSync(p).isDirectory()) {
        const dir = path.resolve(p);
        policies.push({ label: path.relative(process.cwd(), dir) || dir, checkpoint: dir, version: checkpointVersion(dir), sourceRunId: null, config: base });
        continue;
      }
      const fromRun = await runPolicies(db, p, base);
      if (!fromRun) throw new UsageError(`'${p}' is neither a checkpoint folder nor a run id known to Postgres (see \`floe run list\`; a checkpoint folder holds checkpoint.json, e.g. runs/<run id>/weights/v<N>)`);
      policies.push(...fromRun);
    }
    // a run's columns are 'start' and 'v<N>'; with several runs, each says whose
    if (new Set(policies.map((p) => p.sourceRunId).filter(Boolean)).size > 1) for (const p of policies) if (p.sourceRunId) p.label = `${p.sourceRunId}:${p.label}`;
    const source = o.source ?? policies.find((p) => p.sourceRunId)?.config.tasks.source ?? 'toy';
    const loaded = selectTasks({ source, include: [], limit: 0, excludeLooseTests: false, onBadRow: 'skip' });
    const known = new Map(loaded.tasks.map((t) => [t.instanceId, t]));
    const lists: TaskList[] = [];
    for (const spec of o.tasks) lists.push(await taskList(db, spec, known, source));
    for (const l of lists) {
      if (!l.taskIds.length) throw new UsageError(`--tasks ${l.name}: the list is empty`);
      const unknown = l.taskIds.filter((id) => !known.has(id));
      if (unknown.length) throw new UsageError(`--tasks ${l.name}: ${unknown.length} task id(s) not in ${source}: ${unknown.slice(0, 8).join(', ')}${unknown.length > 8 ? ', …' : ''} (\`floe tasks check ${source}\` lists the ids; --source picks another dataset)`);
    }
    const taskIds = unionOfLists(lists);
    for (const id of taskIds) await upsertTask(db, known.get(id)!);

    const sessionId = newRunId('eval');
    const out = o.out ?? path.join(repoRoot, 'runs', 'evals', sessionId, 'eval.json');
    say(`session ${sessionId}: ${policies.length} polic${policies.length === 1 ? 'y' : 'ies'} × ${taskIds.length} task(s) × k=${o.k} = ${policies.length * taskIds.length * o.k} attempts`);
    client = await temporalClient(s);
    workers = await startWorkers(s, ['control', 'sandbox']);
    process.on('SIGINT', onInterrupt);
    const columns: Column[] = [];
    for (const [i, policy] of policies.entries()) {
      if (interrupted) break;
      const evalId = `${sessionId}-${i}`;
      current = evalId;
      const cfg = policy.config;
      const started = Date.now();
      say(`${policy.label} (v${policy.version}, ${path.relative(process.cwd(), policy.checkpoint)}): starting ${cfg.engines.count} engine(s)…`);
      gpu = await startEmbeddedGpu(s, { count: cfg.engines.count, checkpoint: policy.checkpoint, publishDir: policy.checkpoint, trainer: false, model: cfg.policy.model, tokenizer: cfg.policy.tokenizer, seed: o.seed ?? cfg.seed });
      const endpoints = gpu.engines.map((e, j) => ({ id: `engine-${j}`, url: e.url, node: 'local', kind: 'reference' as const }));
      const config: RunConfig = { ...cfg, name: `eval ${policy.label}`, policy: { ...cfg.policy, checkpoint: policy.checkpoint }, engines: { ...cfg.engines, endpoints }, trainer: { ...cfg.trainer, url: '' } };
      await insertRun(db, { runId: evalId, workflowId: evaluationWorkflowId(evalId), name: `eval: ${policy.label}`, config });
      await insertCheckpointEvaluation(db, { evalId, sessionId, policy: policy.label, checkpointPath: policy.checkpoint, version: policy.version, sourceRunId: policy.sourceRunId, taskLists: lists, k: o.k });
      // what each engine serves, as floe records it: a generation whose ids another version
      // made is dropped and the engine is loaded with this checkpoint again (activities/generate.ts)
      for (const e of endpoints) await setEngineServing(db, evalId, e, policy.version, policy.checkpoint);
      try {
        const handle = await startEvaluation(client, {
          runId: evalId, label: 'checkpoint', version: policy.version, taskIds, attempts: o.k, maxInFlight: cfg.rollout.maxInFlight,
          settings: rolloutSettings(config), seed: o.seed ?? cfg.seed, pool: 'all',
        });
        const result = handle.result() as Promise<unknown>;
        let last = '';
        for (;;) {
          const done = await Promise.race([result.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 3000))]);
          if (done) break;
          const p = await evaluationProgress(db, evalId);
          const line = `${p.done}/${taskIds.length * o.k} attempts done (${p.solved} solved), ${p.started - p.done} running`;
          if (line !== last) say(`  ${line}; ${Math.round((Date.now() - started) / 1000)} s`);
          last = line;
        }
        await result;
        const scores = (await listEvaluations(db, evalId)).filter((e) => e.label === 'checkpoint');
        const ordered = taskIds.map((id) => scores.find((x) => x.taskId === id)!).map(({ taskId, attempts, solved, failed, pass1, passK }) => ({ taskId, attempts, solved, failed, pass1, passK }));
        const versionsSeen = await evaluationVersions(db, evalId);
        const all = poolPass(ordered);
        const failed = ordered.reduce((a, x) => a + x.failed, 0);
        await finishCheckpointEvaluation(db, { evalId, state: 'completed', pass1: all.pass1, passK: all.passK, failedAttempts: failed, versionsSeen });
        await setRunStatus(db, { runId: evalId, status: 'completed', summary: { kind: 'evaluation', sessionId, policy: policy.label, version: policy.version, k: o.k, ...all, failedAttempts: failed, versionsSeen, lists: listPass(ordered, lists) } });
        columns.push({ policy, evalId, scores: ordered, versionsSeen, seconds: (Date.now() - started) / 1000 });
        say(`  done in ${Math.round((Date.now() - started) / 1000)} s: pass@1 ${fmt(all.pass1)}, pass@${o.k} ${fmt(all.passK)}; tokens generated by version(s) ${versionsSeen.join(', ') || '–'}`);
      } catch (err) {
        const msg = interrupted ? 'interrupted (Ctrl-C)' : (err as Error).message;
        await finishCheckpointEvaluation(db, { evalId, state: 'failed', error: msg }).catch(() => undefined);
        await setRunStatus(db, { runId: evalId, status: 'failed', summary: { error: msg } }).catch(() => undefined);
        await removeContainers(s, evalId);
        throw interrupted ? new Error('interrupted: the evaluation was ended; its partial rollouts stay in Postgres') : err;
      } finally {
        await gpu.stop();
        gpu = null;
        current = null;
      }
    }
    const json = evalJson(sessionId, o.k, lists, columns);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, `${JSON.stringify(json, null, 2)}\n`);
    console.log(formatTable(o.k, lists, columns));
    console.log(`\njson ${path.relative(process.cwd(), out)}\nsql  select * from checkpoint_evaluations where session_id = '${sessionId}';`);
    // a column whose ids carried another version would not be the checkpoint's score
    const drifted = columns.filter((c) => c.versionsSeen.some((v) => v !== c.policy.version));
    if (drifted.length) {
      say(`tokens of another version than the checkpoint's in: ${drifted.map((c) => c.policy.label).join(', ')}; those numbers are not frozen-weight scores`);
      return 1;
    }
    return 0;
  } finally {
    process.off('SIGINT', onInterrupt);
    await gpu?.stop();
    await workers?.shutdown();
    await client?.connection.close().catch(() => undefined);
    await closeDbPool();
  }
}

/** The sandbox and grader containers of an evaluation that was ended (its rollouts run none of their own clean-up). */
async function removeContainers(s: Settings, evalId: string): Promise<void> {
  const docker = dockerFromSettings(s);
  const left = await docker.listContainers({ all: true, filters: { label: [`floe.run=${evalId}`] } }).catch(() => []);
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
}

const fmt = (x: number | null | undefined): string => (x === null || x === undefined ? '–' : x.toFixed(3));

function evalJson(sessionId: string, k: number, lists: TaskList[], columns: Column[]) {
  return {
    sessionId, k, frozen: true,
    taskLists: lists,
    columns: columns.map((c) => ({
      policy: c.policy.label, evalId: c.evalId, checkpoint: c.policy.checkpoint, version: c.policy.version, sourceRunId: c.policy.sourceRunId,
      versionsSeen: c.versionsSeen, seconds: Math.round(c.seconds), ...poolPass(c.scores), failedAttempts: c.scores.reduce((a, x) => a + x.failed, 0),
      lists: listPass(c.scores, lists), tasks: c.scores,
    })),
  };
}

/** Per task, solved/attempts of each policy; then pass@1 and pass@k of each list, one column per policy. */
export function formatTable(k: number, lists: TaskList[], columns: Column[]): string {
  const heads = columns.map((c) => c.policy.label === `v${c.policy.version}` ? c.policy.label : `${c.policy.label} (v${c.policy.version})`);
  const cell = (x: TaskScore) => `${x.solved}/${x.attempts}${x.failed ? ` (+${x.failed} failed)` : ''}`;
  const w = Math.max(12, ...heads.map((h) => h.length), ...columns.flatMap((c) => c.scores.map((x) => cell(x).length)));
  const taskIds = unionOfLists(lists);
  const rowNames = [...taskIds, ...lists.map((l) => `${l.name} (${l.taskIds.length} tasks)`), 'failed attempts (not in n)', 'versions of the tokens'];
  const idW = Math.max(...rowNames.map((t) => t.length)) + 2;
  const row = (name: string, cells: string[]) => `${name.padEnd(idW)}${cells.map((c) => c.padStart(w + 2)).join('')}`;
  const lines: string[] = [];
  const runs = [...new Set(columns.map((c) => c.policy.sourceRunId).filter((r): r is string => r !== null))];
  lines.push(`floe eval: frozen weights, k=${k}${runs.length === 1 ? `, run ${runs[0]}` : ''}`);
  lines.push(row('solved/attempts', heads));
  for (const id of taskIds) {
    lines.push(row(id, columns.map((c) => {
      const x = c.scores.find((s) => s.taskId === id);
      return x ? cell(x) : '–';
    })));
  }
  for (const [what, pick] of [['pass@1', (l: ReturnType<typeof listPass>[number]) => l.pass1], [`pass@${k}`, (l: ReturnType<typeof listPass>[number]) => l.passK]] as const) {
    lines.push('', row(what, heads));
    for (const [i, l] of lists.entries()) lines.push(row(`${l.name} (${l.taskIds.length} tasks)`, columns.map((c) => fmt(pick(listPass(c.scores, lists)[i])))));
  }
  lines.push('', row('failed attempts (not in n)', columns.map((c) => String(c.scores.reduce((a, x) => a + x.failed, 0)))));
  lines.push(row('versions of the tokens', columns.map((c) => (c.versionsSeen.length ? c.versionsSeen.map((v) => `v${v}`).join(',') : '–'))));
  return lines.join('\n');
}
