import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { parseRunConfig, type RunConfig } from '../core/config.js';
import { blindTask, curatedRow, scoreAgainstLabels, type DifferingCall } from '../core/dataAudit.js';
import type { Task } from '../core/taskModel.js';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import type { TaskLayout } from '../core/taskLayouts.js';
import { repoRoot, type Settings } from '../infra/settings.js';
import { FOLDER_SETS, selectTasks } from '../tasks/loaders.js';
import { temporalClient } from '../workers/connect.js';
import { startWorkers } from '../workers/worker.js';
import { closeDbPool, dbPool } from '../store/pool.js';
import { upsertTask } from '../store/tasks.js';
import { ensureAudit, listTaskAudits, type TaskAuditRow } from '../store/dataAudits.js';
import { insertRun, setRunStatus } from '../store/runs.js';
import { auditProgressQuery, auditRun, type AuditRunInput, type AuditSettings } from '../workflows/dataAudit.js';
import { rolloutSettings } from '../core/contracts.js';
import { loadRunConfig } from './config.js';
import { UsageError } from './args.js';

/** `floe audit <rows.jsonl|toy|real>`: the data audit of a dataset (workflows/dataAudit.ts), with
 *  progress. The audit id is a hash of the rows as the audit sees them, the settings and the audit's code,
 *  so running the same command again resumes the same audit: finished tasks are not redone.
 *  Writes runs/audits/<audit id>/summary.json, report.html (each flagged task with its wrong
 *  patch) and curated.jsonl (the rows that pass, original or with their stronger tests). */

export interface AuditOptions {
  source: string; layout: TaskLayout | 'auto'; include: string[]; limit: number; concurrency: number; maxCandidates: number;
  /** The auditor agent: a run config whose engines.endpoints serve the model, and rollouts per task. */
  auditor?: { config: string; attempts: number };
}

/** The same rows, settings and code: the same audit (a rerun resumes it). A row whose tests or
 *  patch changed is another audit: its old verdict says nothing about the new row. The rows are
 *  hashed as the audit sees them (blind), so the labels alone do not change the id. */
export function auditIdOf(dataset: string, tasks: readonly Task[], settings: AuditSettings): string {
  const rows = [...tasks].sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0)).map(blindTask);
  const h = crypto.createHash('sha256').update(JSON.stringify({ rows, settings }));
  // the audit's own code: an audit made by other candidates or checks is another audit
  for (const f of AUDIT_CODE) h.update(fs.readFileSync(new URL(`../${f}`, import.meta.url)));
  return `audit-${dataset.replace(/[^A-Za-z0-9_.-]/g, '_')}-${h.digest('hex').slice(0, 10)}`;
}

const AUDIT_CODE = ['harness/floe_harness/audit/candidates.py', 'harness/floe_harness/audit/agent_mistakes.py', 'harness/floe_harness/audit/diffcheck.py', 'harness/floe_harness/audit/strengthen.py', 'activities/auditSearch.ts'];

/** The settings of an audit run from the CLI: the run config's sandbox defaults; with an
 *  auditor, its rollouts as the auditor's run config makes them (engines, policy, budgets). */
export function auditSettings(maxCandidates: number, auditor?: { config: RunConfig; attempts: number }): AuditSettings {
  const base: AuditSettings = { sandbox: parseRunConfig({}).sandbox, maxCandidates, maxConfirmations: 3 };
  return auditor ? { ...base, auditor: { rollout: rolloutSettings(auditor.config), attempts: auditor.attempts, seed: auditor.config.seed } } : base;
}

/** The auditor's run config, read and checked before anything starts: it must name engines
 *  that are already serving (the audit starts no engine), and each must answer /health. */
export async function auditorConfig(file: string): Promise<RunConfig> {
  const config = loadRunConfig(file);
  if (!config.engines.endpoints.length) throw new UsageError(`--auditor ${file}: engines.endpoints is empty. The auditor agent runs on an engine that is already serving (vLLM, SGLang or floe's reference engine): list it under engines.endpoints (see configs/ for the form)`);
  for (const e of config.engines.endpoints) {
    const ok = await fetch(new URL('/health', e.url), { signal: AbortSignal.timeout(5000) }).then((r) => r.ok, () => false);
    if (!ok) throw new UsageError(`--auditor ${file}: engine ${e.id} at ${e.url} does not answer /health. Start it (or fix its url), then run the audit again; \`floe engine probe ${e.url}\` checks what it serves`);
  }
  return config;
}

const say = (m: string) => process.stderr.write(`[floe audit] ${m}\n`);

export async function runAudit(s: Settings, o: AuditOptions): Promise<number> {
  const { tasks, errors } = selectTasks({ source: o.source, layout: o.layout, include: o.include, limit: o.limit, excludeLooseTests: false, onBadRow: 'skip' });
  for (const e of errors) say(`bad row skipped: ${e.message}`);
  if (!tasks.length) {
    say(`no tasks to audit in ${o.source}${o.include.length ? ` (--tasks ${o.include.join(',')})` : ''}`);
    return 1;
  }
  const auditor = o.auditor ? { config: await auditorConfig(o.auditor.config), attempts: o.auditor.attempts } : undefined;
  const settings = auditSettings(o.maxCandidates, auditor);
  const taskIds = tasks.map((t) => t.instanceId);
  const dataset = o.source in FOLDER_SETS ? o.source : path.basename(o.source);
  const auditId = auditIdOf(dataset, tasks, settings);
  const pool = dbPool(s.postgres.url);
  const client = await temporalClient(s);
  const workers = await startWorkers(s, ['control', 'sandbox']);
  try {
    for (const t of tasks) await upsertTask(pool, t);
    const { created } = await ensureAudit(pool, { auditId, dataset, config: settings, taskIds });
    // the auditor's rollouts are rollouts: their runs row is the audit's
    if (auditor) await insertRun(pool, { runId: auditId, workflowId: `floe-${auditId}`, name: `audit of ${dataset} (auditor agent)`, config: auditor.config });
    say(`${created ? 'starting' : 'resuming'} audit ${auditId}: ${tasks.length} task(s), ${o.concurrency} at a time`);
    const input: AuditRunInput = { auditId, taskIds, concurrency: o.concurrency, settings };
    const workflowId = `floe-${auditId}`;
    let handle;
    try {
      handle = await client.workflow.start(auditRun, { workflowId, taskQueue: CONTROL_QUEUE, args: [input] });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      handle = client.workflow.getHandle(workflowId); // still running: this process's workers take it on
    }
    const started = Date.now();
    let last = '';
    const result = handle.result();
    for (;;) {
      const done = await Promise.race([result.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 2000))]);
      if (done) break;
      const p = await handle.query(auditProgressQuery).catch(() => null);
      if (!p) continue;
      const line = `${p.skipped + p.done}/${p.total} done (${p.skipped} from before), ${p.flagged} flagged, ${p.invalid} invalid; running ${p.running.join(', ') || '–'}`;
      if (line !== last) say(`${line}; ${Math.round((Date.now() - started) / 1000)} s`);
      last = line;
    }
    const { table } = await result;
    if (auditor) await setRunStatus(pool, { runId: auditId, status: 'completed', summary: table });
    const rows = await listTaskAudits(pool, auditId);
    const labels = new Map(tasks.map((t) => [t.instanceId, t.looseTests]));
    const score = tasks.some((t) => t.looseTests !== null) ? scoreAgainstLabels(rows.map((r) => ({ taskId: r.taskId, status: r.status, strengthened: r.strengthened !== null })), (id) => labels.get(id) ?? null) : null;
    const dir = path.join(repoRoot, 'runs', 'audits', auditId);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'summary.json'), `${JSON.stringify({ auditId, dataset, table, score, rows }, null, 2)}\n`);
    fs.writeFileSync(path.join(dir, 'report.html'), reportHtml(auditId, dataset, table, score, rows));
    const raw = rawRows(o.source);
    const curated = rows.flatMap((r) => {
      const row = raw.get(r.taskId);
      const out = row ? curatedRow(row, r) : null;
      return out ? [JSON.stringify(out)] : [];
    });
    fs.writeFileSync(path.join(dir, 'curated.jsonl'), curated.length ? `${curated.join('\n')}\n` : '');
    say(`audited ${table.audited}: ${table.valid} pass the standard validation, ${table.acceptWrongPatch} accept a wrong patch, ${table.strengthened} strengthened, ${table.curated} curated`);
    if (score) say(`against the labels it never saw: loose tasks flagged ${score.looseFlagged}/${score.loose}${score.missed.length ? ` (missed ${score.missed.join(', ')})` : ''}; sound tasks flagged ${score.soundFlagged}/${score.sound}${score.falseAlarms.length ? ` (${score.falseAlarms.join(', ')})` : ''}`);
    say(`report ${path.relative(process.cwd(), path.join(dir, 'report.html'))}`);
    return 0;
  } finally {
    await workers.shutdown();
    await closeDbPool();
  }
}

/** The dataset's rows as published, by instance id (a folder set's task.json files). */
function rawRows(source: string): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  const add = (text: string) => {
    try {
      const row = JSON.parse(text) as Record<string, unknown>;
      if (typeof row.instance_id === 'string') out.set(row.instance_id, row);
    } catch { /* a bad row was reported when the tasks were loaded */ }
  };
  const set = FOLDER_SETS[source];
  if (set) {
    for (const d of fs.readdirSync(set.dir)) if (fs.existsSync(path.join(set.dir, d, 'task.json'))) add(fs.readFileSync(path.join(set.dir, d, 'task.json'), 'utf8'));
  } else {
    for (const line of fs.readFileSync(source, 'utf8').split('\n')) if (line.trim()) add(line);
  }
  return out;
}

/** The first call where the wrong patch parts from gold: the inputs that show it. */
const callLine = (c: DifferingCall | null | undefined) => (c ? `<p>First differing call: <code>${esc(c.function)}${esc(c.args)}${c.kwargs !== '{}' ? ` ${esc(c.kwargs)}` : ''}</code>: gold ${esc(c.gold)}, candidate ${esc(c.candidate)}</p>` : '');

const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function reportHtml(auditId: string, dataset: string, table: Record<string, number>, score: ReturnType<typeof scoreAgainstLabels> | null, rows: TaskAuditRow[]): string {
  const flagged = rows.filter((r) => r.status === 'flagged');
  const invalid = rows.filter((r) => r.status === 'invalid');
  const head = Object.entries(table).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join('');
  const section = (r: TaskAuditRow) => {
    const e = r.evidence!;
    return `<h3>${esc(r.taskId)}</h3><p>${esc(e.kind)}: ${esc(e.description)}<br>${esc(e.confirmedBy)}</p>
<pre>${esc(e.diff)}</pre><p>Behaves differently from the gold patch on <code>${esc(e.difference?.variant ?? '')}</code>:</p>
<pre>gold:      ${esc(JSON.stringify(e.difference?.gold))}\ncandidate: ${esc(JSON.stringify(e.difference?.candidate))}</pre>${callLine(e.difference?.call)}`;
  };
  const passed = rows.filter((r) => r.status === 'passed');
  return `<!doctype html><meta charset="utf-8"><title>floe audit ${esc(auditId)}</title>
<style>body{font:14px system-ui;margin:2em;max-width:70em}pre{background:#f5f5f5;padding:.6em;overflow:auto}td{padding:0 1em}</style>
<h1>Data audit ${esc(auditId)}</h1><p>dataset ${esc(dataset)}</p><table>${head}</table>
${score ? `<p>Against the labels the audit never saw: loose tasks flagged ${score.looseFlagged}/${score.loose}; sound tasks flagged ${score.soundFlagged}/${score.sound}.</p>` : ''}
<h2>Tasks whose tests accept a wrong patch (${flagged.length})</h2>${flagged.map(section).join('\n')}
<h2>Tasks that passed (${passed.length}): the candidates that passed every test, and why each was discarded</h2><ul>${passed.map((r) => `<li>${esc(r.taskId)}: ${esc(r.note ?? 'no candidate passed every test')}</li>`).join('')}</ul>
<h2>Tasks that fail the standard validation (${invalid.length})</h2><ul>${invalid.map((r) => `<li>${esc(r.taskId)}: ${esc(r.validation.problems.join('; '))}</li>`).join('')}</ul>
`;
}
