import { defineQuery, executeChild, proxyActivities, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { auditStatus, discardedNote, standardValidation, type AuditRowSummary, type AuditStatus } from '../core/dataAudit.js';
import { CONTROL_QUEUE, sandboxQueue } from '../core/taskQueues.js';
import { FloeKind, FloeRunId, FloeTaskId } from '../core/searchAttributes.js';
import type { DataAuditActivities } from '../activities/dataAudit.js';
import type { GradingActivities } from '../activities/grading.js';
import type { AuditSearchActivities, CandidateOutcome, ExtraCandidate, Strengthened } from '../activities/auditSearch.js';
import type { Task } from '../core/taskModel.js';
import type { RolloutSettings, SandboxSettings } from '../core/contracts.js';
import { rollout } from './rollout.js';

/** The data audit of one task (`dataAudit`) and of a dataset (`auditRun`, many tasks at once
 *  under a concurrency limit). A task's audit: the row, blind to its labels; the standard
 *  validation (the empty diff and the gold patch graded in fresh containers, as a rollout's
 *  submission is); the search for wrong patches its tests accept (activities/auditSearch.ts);
 *  each wrong candidate confirmed by a fresh grading, the first confirmed one kept as
 *  evidence; one record in Postgres. With an auditor configured, rollouts of the auditor agent
 *  (core/auditorAgent.ts) come first, and their fixes join the search's candidates. */

export interface AuditSettings {
  sandbox: SandboxSettings;
  maxCandidates: number;
  /** Wrong candidates graded afresh before one is kept (each is one grading). */
  maxConfirmations: number;
  /** The auditor agent: `attempts` rollouts per task on these engines (absent: floe's own
   *  candidates only). */
  auditor?: { rollout: RolloutSettings; attempts: number; seed: number };
}

export interface DataAuditInput { auditId: string; taskId: string; settings: AuditSettings }

export interface DataAuditResult extends AuditRowSummary { candidates: number; wrongFound: number; evidence: string | null; problems: string[] }

const db = proxyActivities<DataAuditActivities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 10 } });

export async function dataAudit(input: DataAuditInput): Promise<DataAuditResult> {
  const started = Date.now();
  const { auditId, taskId, settings } = input;
  upsertSearchAttributes([{ key: FloeRunId, value: auditId }, { key: FloeKind, value: 'dataAudit' }, { key: FloeTaskId, value: taskId }]);
  const queue = sandboxQueue(settings.sandbox.host);
  const grading = proxyActivities<GradingActivities>({ taskQueue: queue, startToCloseTimeout: `${settings.sandbox.gradeTimeoutSeconds + 300} seconds`, heartbeatTimeout: '30 seconds', retry: { maximumAttempts: 3 } });
  const search = proxyActivities<AuditSearchActivities>({ taskQueue: queue, startToCloseTimeout: '2 hours', heartbeatTimeout: '30 seconds', retry: { maximumAttempts: 3 } });
  const limits = settings.sandbox;
  const timeoutSeconds = settings.sandbox.gradeTimeoutSeconds;

  const task = await db.getAuditTask(taskId);
  const grade = (diff: string, purpose: string) => grading.gradePatch({ task, diff, limits, timeoutSeconds, purpose, labels: { 'floe.run': auditId } });
  const [base, gold] = [await grade('', 'audit-base'), await grade(task.patch, 'audit-gold')];
  const validation = standardValidation(task, base, gold);

  let outcomes: CandidateOutcome[] = [];
  let note: string | null = null;
  let strengthened: Strengthened | null = null;
  let evidence: (CandidateOutcome & { confirmedBy: string }) | null = null;
  if (validation.ok) {
    const agent = settings.auditor ? await auditorFixes(auditId, task, settings.auditor) : null;
    const extra = agent?.fixes ?? [];
    const found = await search.searchWrongPatches({ task, limits, timeoutSeconds, maxCandidates: settings.maxCandidates, labels: { 'floe.run': auditId }, ...(extra.length ? { extra } : {}) });
    outcomes = found.outcomes;
    // an auditor that brought nothing says why (its rollouts' gates: a budget too small for the brief shows here)
    const agentNote = agent && !extra.length ? `the auditor agent submitted no fix (its rollouts ended: ${agent.gates.join(', ')})` : null;
    note = [found.note, agentNote, discardedNote(outcomes)].filter((n) => n !== null).join('; ') || null;
    strengthened = found.strengthened;
    for (const o of outcomes.filter((c) => c.difference !== null).slice(0, settings.maxConfirmations)) {
      const g = await grade(o.diff, 'audit-wrong');
      if (g.passed) {
        evidence = { ...o, confirmedBy: `a fresh grading by the ${g.harness} harness: every test passed` };
        break;
      }
    }
  }
  const status: AuditStatus = auditStatus(validation, evidence ? 1 : 0);
  // stronger tests count only for a task kept for its wrong patch
  if (status !== 'flagged') strengthened = null;
  await db.recordTaskAudit({ auditId, taskId, status, validation, candidates: outcomes, evidence, note, strengthened, durationMs: Date.now() - started });
  return {
    taskId, status, strengthened: !!strengthened?.testPatch, candidates: outcomes.length, wrongFound: outcomes.filter((o) => o.difference !== null).length,
    evidence: evidence ? evidence.description : null, problems: validation.problems,
  };
}

/** The auditor agent's rollouts of one task (run id: the audit id; purpose 'audit'), at once;
 *  the fixes they submitted, as candidates. A rollout that fails adds no candidate. */
async function auditorFixes(auditId: string, task: Task, auditor: NonNullable<AuditSettings['auditor']>): Promise<{ fixes: ExtraCandidate[]; gates: string[] }> {
  const taskId = await db.prepareAuditorTask(task.instanceId);
  const groupId = `${auditId}-${taskId}`;
  const rolloutIds = Array.from({ length: auditor.attempts }, (_, i) => `${groupId}-${i}`);
  const results = await Promise.all(rolloutIds.map((rolloutId, attempt) => executeChild(rollout, {
    workflowId: `${workflowInfo().workflowId}-auditor-${attempt}`,
    taskQueue: CONTROL_QUEUE,
    args: [{ runId: auditId, rolloutId, taskId, groupId, attempt, purpose: 'audit' as const, settings: auditor.rollout, seed: auditor.seed + attempt }],
  }).then((r) => r.gate, () => 'workflow_failed')));
  const fixes = await db.auditorCandidates({ rolloutIds, testPatch: task.testPatch });
  return {
    fixes: fixes.map((f) => ({ id: `agent-${f.rolloutId.slice(groupId.length + 1)}`, kind: 'auditor', description: `the auditor agent's fix (rollout ${f.rolloutId})`, diff: f.diff })),
    gates: results,
  };
}

export interface AuditRunInput { auditId: string; taskIds: string[]; concurrency: number; settings: AuditSettings }
export interface AuditRunProgress { total: number; skipped: number; done: number; running: string[]; flagged: number; invalid: number }

export const auditProgressQuery = defineQuery<AuditRunProgress>('auditProgress');

/** Every task of an audit, `concurrency` at a time; tasks whose audit already ended (an
 *  earlier, interrupted run of this audit) are not redone. */
export async function auditRun(input: AuditRunInput): Promise<{ table: Awaited<ReturnType<DataAuditActivities['finishAudit']>>; results: DataAuditResult[] }> {
  upsertSearchAttributes([{ key: FloeRunId, value: input.auditId }, { key: FloeKind, value: 'auditRun' }]);
  const finished = new Set(await db.finishedTaskAudits(input.auditId));
  const pending = input.taskIds.filter((id) => !finished.has(id));
  const progress: AuditRunProgress = { total: input.taskIds.length, skipped: input.taskIds.length - pending.length, done: 0, running: [], flagged: 0, invalid: 0 };
  setHandler(auditProgressQuery, () => progress);
  const results: DataAuditResult[] = [];
  const worker = async (): Promise<void> => {
    for (let taskId = pending.shift(); taskId !== undefined; taskId = pending.shift()) {
      progress.running.push(taskId);
      const r = await executeChild(dataAudit, {
        workflowId: `${workflowInfo().workflowId}-${taskId}`,
        taskQueue: CONTROL_QUEUE,
        args: [{ auditId: input.auditId, taskId, settings: input.settings }],
      });
      progress.running = progress.running.filter((id) => id !== taskId);
      progress.done++;
      if (r.status === 'flagged') progress.flagged++;
      if (r.status === 'invalid') progress.invalid++;
      results.push(r);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(input.concurrency, pending.length)) }, worker));
  const table = await db.finishAudit({ auditId: input.auditId });
  return { table, results };
}
