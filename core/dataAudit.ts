import type { Task } from './taskModel.js';
import type { GradeResult } from './sandboxPolicy.js';

/** The data audit's rules (workflows/dataAudit.ts runs them): a task is audited blind to its
 *  labels; it must pass the standard validation (FAIL_TO_PASS fail and PASS_TO_PASS pass before
 *  the gold patch, everything passes after it); it fails the audit when a candidate patch that
 *  behaves differently from the gold patch passes all its tests. */

/** The row as the audit may see it: the toy suite's `floe.loose_tests` and `floe.wrong_patch`
 *  (and the gold trajectory) exist to score the audit, never to feed it. */
export function blindTask(task: Task): Task {
  return { ...task, looseTests: null, wrongPatch: null, solution: null };
}

export interface Validation { ok: boolean; problems: string[] }

/** FAIL_TO_PASS fail and PASS_TO_PASS pass before the gold patch (`base`: the empty diff
 *  graded); all pass after it (`gold`). */
export function standardValidation(task: Pick<Task, 'failToPass' | 'passToPass'>, base: GradeResult, gold: GradeResult): Validation {
  const problems: string[] = [];
  const outcome = (g: GradeResult, id: string) => g.tests.find((t) => t.id === id)?.outcome ?? 'missing';
  if (base.applyError) problems.push(`before the gold patch: ${base.applyError}`);
  if (gold.applyError) problems.push(`the gold patch: ${gold.applyError}`);
  if (base.timedOut || gold.timedOut) problems.push('the tests timed out');
  const passedAtBase = task.failToPass.filter((id) => outcome(base, id) === 'passed');
  if (passedAtBase.length) problems.push(`FAIL_TO_PASS tests already pass before the gold patch: ${passedAtBase.join(', ')}`);
  const failedAtBase = task.passToPass.filter((id) => outcome(base, id) !== 'passed');
  if (failedAtBase.length) problems.push(`PASS_TO_PASS tests do not pass before the gold patch: ${failedAtBase.map((id) => `${id} (${outcome(base, id)})`).join(', ')}`);
  const failedWithGold = [...task.failToPass, ...task.passToPass].filter((id) => outcome(gold, id) !== 'passed');
  if (failedWithGold.length) problems.push(`tests do not pass with the gold patch: ${failedWithGold.map((id) => `${id} (${outcome(gold, id)})`).join(', ')}`);
  else if (!gold.passed) problems.push("the harness does not count the gold patch as resolved");
  return { ok: problems.length === 0, problems };
}

/** What diffcheck.py prints for one tree: per variant of a test (key), the calls it made into the
 *  changed code, with results. */
export interface BehaviourTrace { variants: Record<string, unknown[]>; importError: string | null }

/** The evidence of a wrong patch: the variant (a test's perturbed run `path::test#n`, a pytest
 *  run `nodeid#pytest`, or a replayed call `replay::module:function#hash`), the events of both
 *  trees there, and the first call where they part: its function, inputs and both outcomes. */
export interface BehaviourDifference { variant: string; gold: unknown[]; candidate: unknown[] | null; call?: DifferingCall | null }

/** One call logged by diffcheck.py on which gold and candidate disagree. */
export interface DifferingCall { function: string; args: string; kwargs: string; gold: string; candidate: string }

const isCall = (e: unknown): e is [string, string, string, string, unknown, unknown] => Array.isArray(e) && e.length === 6 && typeof e[0] === 'string';

/** The first call event where the two event lists disagree (same function and inputs, another
 *  outcome; or a call only one of them made). */
export function differingCall(gold: unknown[], candidate: unknown[] | null): DifferingCall | null {
  const g = gold.filter(isCall);
  const c = (candidate ?? []).filter(isCall);
  const shown = (e: unknown[] | undefined) => (e ? `${String(e[3])} ${String(e[4])}${e[5] !== null && e[5] !== undefined ? ` (state ${String(e[5])})` : ''}` : 'no such call');
  for (let i = 0; i < Math.max(g.length, c.length); i++) {
    const a = g[i];
    const b = c[i];
    if (JSON.stringify(a) === JSON.stringify(b)) continue;
    const e = (a ?? b)!;
    return { function: e[0], args: e[1], kwargs: e[2], gold: shown(a), candidate: shown(b) };
  }
  return null;
}

/** Why a candidate that passed every test was not counted as a wrong patch: no variant where
 *  two gold runs agree logged a call into the changed code (nothing was seen, so nothing can
 *  be said), or it behaved as gold on every call that was. */
export function discardReason(gold: [BehaviourTrace, BehaviourTrace] | null, untraced: string | null): string {
  if (untraced) return `no call observed: ${untraced}`;
  if (!gold) return 'no call observed: the gold patch could not be traced';
  const [g1, g2] = gold;
  if (g1.importError !== null) return `no call observed: importing the changed code failed (${g1.importError})`;
  let variants = 0;
  let calls = 0;
  for (const [k, events] of Object.entries(g1.variants)) {
    if (JSON.stringify(g2.variants[k]) !== JSON.stringify(events)) continue;
    const n = events.filter(isCall).length;
    if (n) { variants++; calls += n; }
  }
  if (!calls) return "no call observed: the tests made no call into the functions the gold patch changes";
  return `equivalent on every observed call (${calls} calls in ${variants} variants where two gold runs agree)`;
}

/** The first variant on which the candidate's calls differ from the gold patch's, among the
 *  variants where two runs of the gold patch agree (what is not deterministic is no evidence).
 *  null: no difference seen — the candidate may be an equivalent change. */
/** Events of a differing variant kept as evidence (around the first that differs). */
const SHOWN_EVENTS = 50;

export function behaviourDifference(gold1: BehaviourTrace, gold2: BehaviourTrace, candidate: BehaviourTrace): BehaviourDifference | null {
  if (gold1.importError !== null || gold2.importError !== null) return null;
  for (const [variant, events] of Object.entries(gold1.variants)) {
    const again = gold2.variants[variant];
    if (again === undefined || JSON.stringify(again) !== JSON.stringify(events) || events.length === 0) continue;
    const cand = candidate.variants[variant];
    // a replayed call the candidate's trace lacks was cut by its time budget or its timeout, or
    // never kept: no evidence (a candidate that changes which calls the tests make differs on
    // their own variants)
    if (cand === undefined && candidate.importError === null && variant.startsWith('replay::')) continue;
    if (candidate.importError !== null || cand === undefined || JSON.stringify(cand) !== JSON.stringify(events)) {
      // a test of thousands of calls: the events around the first that differs, so the evidence
      // stays small enough for a workflow's history
      let first = 0;
      while (cand && first < events.length && JSON.stringify(events[first]) === JSON.stringify(cand[first])) first++;
      const from = Math.max(0, first - 5);
      const clip = (xs: unknown[]) => (xs.length > SHOWN_EVENTS ? xs.slice(from, from + SHOWN_EVENTS) : xs);
      return { variant, gold: clip(events), candidate: cand ? clip(cand) : null, call: differingCall(events, cand ?? null) };
    }
  }
  return null;
}

/** The audit note's line on the candidates that passed every test and were discarded, each
 *  with its reason (null: none), so the report tells "sound" from "not seen". */
export function discardedNote(outcomes: readonly { id: string; kind: string; discarded?: string | null }[]): string | null {
  const d = outcomes.filter((o) => o.discarded);
  if (!d.length) return null;
  return `test-passing candidates discarded (${d.length}): ${d.map((o) => `${o.id} [${o.kind}] ${o.discarded!}`).join('; ')}`;
}

export type AuditStatus = 'invalid' | 'flagged' | 'passed';

/** A task's audit outcome: invalid (fails the standard validation), flagged (a wrong patch
 *  passes its tests), passed. */
export function auditStatus(validation: Validation, wrongPatchesFound: number): AuditStatus {
  if (!validation.ok) return 'invalid';
  return wrongPatchesFound > 0 ? 'flagged' : 'passed';
}

export interface AuditRowSummary { taskId: string; status: AuditStatus; strengthened: boolean }

/** The published table: audited, passing the standard validation, accepting a wrong patch,
 *  strengthened, curated (kept: passed, or flagged and strengthened). */
export function auditTable(rows: readonly AuditRowSummary[]): { audited: number; valid: number; acceptWrongPatch: number; strengthened: number; curated: number } {
  const valid = rows.filter((r) => r.status !== 'invalid');
  const flagged = valid.filter((r) => r.status === 'flagged');
  const strengthened = flagged.filter((r) => r.strengthened);
  return { audited: rows.length, valid: valid.length, acceptWrongPatch: flagged.length, strengthened: strengthened.length, curated: valid.length - flagged.length + strengthened.length };
}

/** The audit scored against labels it never saw (the toy suite's `floe.loose_tests`): loose
 *  tasks flagged, sound tasks flagged (false alarms). */
export function scoreAgainstLabels(rows: readonly AuditRowSummary[], looseOf: (taskId: string) => boolean | null): { loose: number; looseFlagged: number; sound: number; soundFlagged: number; missed: string[]; falseAlarms: string[] } {
  const labelled = rows.filter((r) => looseOf(r.taskId) !== null && r.status !== 'invalid');
  const loose = labelled.filter((r) => looseOf(r.taskId) === true);
  const sound = labelled.filter((r) => looseOf(r.taskId) === false);
  return {
    loose: loose.length,
    looseFlagged: loose.filter((r) => r.status === 'flagged').length,
    sound: sound.length,
    soundFlagged: sound.filter((r) => r.status === 'flagged').length,
    missed: loose.filter((r) => r.status !== 'flagged').map((r) => r.taskId),
    falseAlarms: sound.filter((r) => r.status === 'flagged').map((r) => r.taskId),
  };
}

/** Which version of an audited dataset a run trains on (run config tasks.audit.use):
 *  'original' — every task as its row has it; 'curated' — only tasks that passed the audit;
 *  'strengthened' — those, plus the tasks that accepted a wrong patch, with the stronger tests
 *  the audit kept for them (as tasks of their own: `<id>@<audit id>`). Tasks that fail the
 *  standard validation are dropped by the last two. */
export type AuditedVersion = 'original' | 'curated' | 'strengthened';

export interface AuditedTask { status: AuditStatus; strengthened: { testPatch: string; failToPass: string[] } | null }

/** The id of a task with an audit's stronger tests. */
export const strengthenedId = (taskId: string, auditId: string): string => `${taskId}@${auditId}`;

export function applyAudit(tasks: readonly Task[], audited: ReadonlyMap<string, AuditedTask>, use: AuditedVersion, auditId: string): Task[] {
  const missing = tasks.filter((t) => !audited.has(t.instanceId)).map((t) => t.instanceId);
  if (missing.length) throw new Error(`tasks.audit: audit ${auditId} has no result for ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ` and ${missing.length - 5} more` : ''}; run \`floe audit\` on this dataset to the end first`);
  if (use === 'original') return [...tasks];
  return tasks.flatMap((t) => {
    const a = audited.get(t.instanceId)!;
    if (a.status === 'passed') return [t];
    // another task (other tests): its own id, so the original row is never overwritten
    if (a.status === 'flagged' && use === 'strengthened' && a.strengthened) return [{ ...t, instanceId: strengthenedId(t.instanceId, auditId), testPatch: a.strengthened.testPatch, failToPass: a.strengthened.failToPass }];
    return [];
  });
}

/** A dataset row as the curated export writes it (`floe audit`: runs/audits/<id>/curated.jsonl,
 *  "the tasks that pass, original or strengthened"): a task that passed the audit as its row
 *  is; a flagged one with its stronger tests (test_patch, and FAIL_TO_PASS in the row's own
 *  encoding: a list, or a JSON string of one); null for the rest. */
export function curatedRow(row: Record<string, unknown>, a: AuditedTask): Record<string, unknown> | null {
  if (a.status === 'passed') return row;
  if (a.status !== 'flagged' || !a.strengthened) return null;
  const f2p = typeof row.FAIL_TO_PASS === 'string' ? JSON.stringify(a.strengthened.failToPass) : a.strengthened.failToPass;
  return { ...row, test_patch: a.strengthened.testPatch, FAIL_TO_PASS: f2p };
}
