import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Worker } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { workflowsPath } from '../workers/worker.js';
import { installRuntimeLogger } from '../workers/logging.js';

/** Determinism guard: histories recorded from real runs (test/fixtures/histories, written with
 *  FLOE_RECORD_HISTORIES=1 by test/rollout.test.ts, test/runLifecycle.test.ts,
 *  test/continueAsNew.test.ts and test/trainingLoop.test.ts; a training run and one of its rollouts
 *  from bench/scale_run.ts, recorded with `temporal workflow show`: rollouts started together,
 *  generation settings by reference) must replay with the current
 *  workflow code. A change that breaks one needs patching (workflow.patched, then
 *  deprecatePatch, then removal, as Temporal's patching guide says) or, when the histories it
 *  breaks can no longer be running anywhere, a deliberate re-recording named in CHANGELOG.md. */
const dir = path.join(import.meta.dirname, 'fixtures', 'histories');
// the SDK's messages at WARN and above, one line each (the negative controls' nondeterminism warnings among them)
installRuntimeLogger();

// file name = workflow id (child workflow ids derive from it)
const load = (f: string) => ({ workflowId: f.replace(/\.json$/, ''), history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'))) });
const changed = (name: string) => path.join(import.meta.dirname, 'fixtures', 'changed-workflows', `${name}.ts`);
/** The training runs recorded with a weight update, an eviction and a continue-as-new. */
/** An audit of 4 toy tasks (`floe audit`, test/dataAudit.test.ts) and its flagged task. */
const AUDIT_FIXTURES = ['floe-audit-toy-ab71bc4a51.json', 'floe-audit-toy-ab71bc4a51-toy__c_to_f.json'];
const RUN_FIXTURES = ['floe-run-loop-test-20261207T015037Z-47ne.json', 'floe-run-continue-as-new-test-20261207T014436Z-o9jr.json'];
/** Rollouts that earned 1 (tool calls, a submission, a grading), ran out of turns, and failed the format gate. */
const ROLLOUT_FIXTURES = ['floe-rollout-rollout-test-22288-1796607674652-0.json', 'floe-rollout-rollout-test-22288-1796607674652-60.json', 'floe-rollout-rollout-test-22288-1796607674652-62.json'];

async function replay(workflowsPath: string, files: string[]): Promise<{ workflowId: string; error: unknown }[]> {
  const out: { workflowId: string; error: unknown }[] = [];
  for await (const r of Worker.runReplayHistories({ workflowsPath }, files.map(load))) out.push({ workflowId: r.workflowId, error: r.error });
  return out;
}

describe('workflow determinism', () => {
  it('replays every recorded history', async () => {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(0);
    const results = await replay(workflowsPath, files);
    for (const r of results) expect(r.error, `${r.workflowId}: ${String(r.error)}`).toBeUndefined();
    expect(results).toHaveLength(files.length);
  }, 120_000);

  it('the training-run fixtures cover a weight update, an eviction and a continue-as-new', () => {
    const children = RUN_FIXTURES.flatMap((f) => (JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { events: { eventType: string; startChildWorkflowExecutionInitiatedEventAttributes?: { workflowType: { name: string } } }[] }).events)
      .map((e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType.name ?? e.eventType);
    expect(children).toEqual(expect.arrayContaining(['weightUpdate', 'eviction', 'rollout', 'EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW']));
  });

  it('the rollout fixtures cover a passed, a budget-ended and a format-gated rollout', () => {
    const gates = ROLLOUT_FIXTURES.map((f) => {
      const done = (JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { events: { workflowExecutionCompletedEventAttributes?: { result: { payloads: { data: string }[] } } }[] }).events
        .find((e) => e.workflowExecutionCompletedEventAttributes)!.workflowExecutionCompletedEventAttributes!;
      return (JSON.parse(Buffer.from(done.result.payloads[0].data, 'base64').toString('utf8')) as { gate: string }).gate;
    });
    expect(gates).toEqual(['passed', 'budget_turns', 'format']);
  });

  it('the data audit fixtures cover an audit run and a flagged task: validation, search, confirmation, record', () => {
    const types = (f: string) => (JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { events: { activityTaskScheduledEventAttributes?: { activityType: { name: string } }; startChildWorkflowExecutionInitiatedEventAttributes?: { workflowType: { name: string } } }[] }).events
      .map((e) => e.activityTaskScheduledEventAttributes?.activityType.name ?? e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType.name).filter(Boolean);
    expect(types(AUDIT_FIXTURES[0])).toEqual(expect.arrayContaining(['finishedTaskAudits', 'dataAudit', 'finishAudit']));
    // base, gold, the search, the wrong patch graded afresh, then the record
    expect(types(AUDIT_FIXTURES[1])).toEqual(['getAuditTask', 'gradePatch', 'gradePatch', 'searchWrongPatches', 'gradePatch', 'recordTaskAudit']);
  });

  it('negative control: a deliberately changed trainingRun fails replay; the same change behind workflow.patched replays', async () => {
    const broken = await replay(changed('unpatched'), RUN_FIXTURES);
    expect(broken).toHaveLength(RUN_FIXTURES.length);
    for (const r of broken) expect(String(r.error), r.workflowId).toMatch(/Nondeterminism|DeterminismViolation|nondeterminism/i);
    const guarded = await replay(changed('patched'), RUN_FIXTURES);
    for (const r of guarded) expect(r.error, `${r.workflowId}: ${String(r.error)}`).toBeUndefined();
  }, 180_000);
});
