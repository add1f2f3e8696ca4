import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { parseRunConfig } from '../core/config.js';
import { curatedRow, scoreAgainstLabels } from '../core/dataAudit.js';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import type { TaskLayout } from '../core/taskLayouts.js';
import { repoRoot, type Settings } from '../infra/settings.js';
import { selectTasks } from '../tasks/loaders.js';
import { temporalClient } from '../workers/connect.js';
import { startWorkers } from '../workers/worker.js';
import { closeDbPool, dbPool } from '../store/pool.js';
import { upsertTask } from '../store/tasks.js';
import { ensureAudit, listTaskAudits, type TaskAuditRow } from '../store/dataAudits.js';
import { auditProgressQuery, auditRun, type AuditRunInput, type AuditSettings } from '../workflows/dataAudit.js';

/** `floe audit <rows.jsonl|toy>`: the data audit of a dataset (workflows/dataAudit.ts), with
 *  progress. The audit id is a hash of the dataset's task ids, the settings and the audit's code,
 *  so running the same command again resumes the same audit: finished tasks are not redone.
 *  Writes runs/audits/<audit id>/summary.json, report.html (each flagged task with its wrong
 *  patch) and curated.jsonl (the rows that pass, original or with their stronger tests). */

export interface AuditOptions { source: string; layout: TaskLayout | 'auto'; include: string[]; limit: number; concurrency: number; maxCandidates: number }

/** The same dataset, tasks and settings: the same audit (a rerun resumes it). */
export function auditIdOf(dataset: string, taskIds: string[], settings: AuditSettings): string {
  const h = crypto.createHash('sha256').update(JSON.stringify({ taskIds: [...taskIds].sort(), settings }));
  // the audit's own code: an audit made by other candidates or checks is another audit
  for (const f of AUDIT_CODE) h.update(fs.readFileSync(new URL(`../${f}`, import.meta.url)));
  return `audit-${dataset.replace(/[^A-Za-z0-9_.-]/g, '_')}-${h.digest('hex').slice(0, 10)}`;
}

const AUDIT_CODE = ['harness/floe_harness/audit_candidates.py', 'harness/floe_harness/diffcheck.py', 'harness/floe_harness/strengthen.py', 'activities/auditSearch.ts'];

/** The settings of an audit run from the CLI: the run config's sandbox defaults. */
export function auditSettings(maxCandidates: number): AuditSettings {
  return { sandbox: parseRunConfig({}).sandbox, maxCandidates, maxConfirmations: 3 };
}

const say = (m: string) => process.stderr.write(`[floe audit] ${m}\n`);

export async function runAudit(s: Settings, o: AuditOptions): Promise<number> {
  const { tasks, errors } = selectTasks({ source: o.source, layout: o.layout, include: o.include, limit: o.limit, excludeLooseTests: false, onBadRow: 'skip' });
  for (const e of errors) say(`bad row skipped: ${e.message}`);
  if (!tasks.length) {
    say(`no tasks to audit in ${o.source}${o.include.length ? ` (--tasks ${o.include.join(',')})` : ''}`);
    return 1;
  }
  const settings = auditSettings(o.maxCandidates);
  const taskIds = tasks.map((t) => t.instanceId);
  const dataset = o.source === 'toy' ? 'toy' : path.basename(o.source);
  const auditId = auditIdOf(dataset, taskIds, settings);
  const pool = dbPool(s.postgres.url);
  const client = await temporalClient(s);
  const workers = await startWorkers(s, ['control', 'sandbox']);
  try {
    for (const t of tasks) await upsertTask(pool, t);
    const { created } = await ensureAudit(pool, { auditId, dataset, config: settings, taskIds });
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

/** The dataset's rows as published, by instance id (the toy suite's task.json files). */
function rawRows(source: string): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  const add = (text: string) => {
    try {
      const row = JSON.parse(text) as Record<string, unknown>;
      if (typeof row.instance_id === 'string') out.set(row.instance_id, row);
    } catch { /* a bad row was reported when the tasks were loaded */ }
  };
  if (source === 'toy') {
    const toyDir = path.join(repoRoot, 'tasks', 'toy');
    for (const d of fs.readdirSync(toyDir)) if (fs.existsSync(path.join(toyDir, d, 'task.json'))) add(fs.readFileSync(path.join(toyDir, d, 'task.json'), 'utf8'));
  } else {
    for (const line of fs.readFileSync(source, 'utf8').split('\n')) if (line.trim()) add(line);
  }
  return out;
}

const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function reportHtml(auditId: string, dataset: string, table: Record<string, number>, score: ReturnType<typeof scoreAgainstLabels> | null, rows: TaskAuditRow[]): string {
  const flagged = rows.filter((r) => r.status === 'flagged');
  const invalid = rows.filter((r) => r.status === 'invalid');
  const head = Object.entries(table).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join('');
  const section = (r: TaskAuditRow) => {
    const e = r.evidence!;
    return `<h3>${esc(r.taskId)}</h3><p>${esc(e.kind)}: ${esc(e.description)}<br>${esc(e.confirmedBy)}</p>
<pre>${esc(e.diff)}</pre><p>Behaves differently from the gold patch on <code>${esc(e.difference?.variant ?? '')}</code>:</p>
<pre>gold:      ${esc(JSON.stringify(e.difference?.gold))}\ncandidate: ${esc(JSON.stringify(e.difference?.candidate))}</pre>`;
  };
  return `<!doctype html><meta charset="utf-8"><title>floe audit ${esc(auditId)}</title>
<style>body{font:14px system-ui;margin:2em;max-width:70em}pre{background:#f5f5f5;padding:.6em;overflow:auto}td{padding:0 1em}</style>
<h1>Data audit ${esc(auditId)}</h1><p>dataset ${esc(dataset)}</p><table>${head}</table>
${score ? `<p>Against the labels the audit never saw: loose tasks flagged ${score.looseFlagged}/${score.loose}; sound tasks flagged ${score.soundFlagged}/${score.sound}.</p>` : ''}
<h2>Tasks whose tests accept a wrong patch (${flagged.length})</h2>${flagged.map(section).join('\n')}
<h2>Tasks that fail the standard validation (${invalid.length})</h2><ul>${invalid.map((r) => `<li>${esc(r.taskId)}: ${esc(r.validation.problems.join('; '))}</li>`).join('')}</ul>
`;
}
