import fs from 'node:fs';
import path from 'node:path';
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { temporalBin } from '../../infra/components/temporal.js';
import { run } from '../../infra/proc.js';
import type { Settings } from '../../infra/settings.js';
import { settings } from './platform.js';

/** Replay fixtures: with FLOE_RECORD_HISTORIES=1, tests that ran a workflow worth guarding
 *  save its history under test/fixtures/histories (by `temporal workflow show`, the JSON that
 *  test/replay.test.ts reads). The file name is the workflow id, which replay needs (child
 *  workflow ids derive from it); `suffix` tells apart several runs of one workflow id. */

export const recording = (): boolean => Boolean(process.env.FLOE_RECORD_HISTORIES);
export const FIXTURE_DIR = path.join(import.meta.dirname, '..', 'fixtures', 'histories');

export function saveHistory(workflowId: string, opts: { runId?: string; file?: string; settings?: Settings } = {}): string {
  fs.mkdirSync(FIXTURE_DIR, { recursive: true });
  const s = opts.settings ?? settings;
  const args = ['workflow', 'show', '--address', s.temporal.address, '--workflow-id', workflowId, '--output', 'json', ...(opts.runId ? ['--run-id', opts.runId] : [])];
  const out = path.join(FIXTURE_DIR, `${opts.file ?? workflowId}.json`);
  fs.writeFileSync(out, run(temporalBin(s), args).stdout);
  return out;
}

/** The run of `workflowId` that ended by continuing as new (the first, when there are several). */
export async function continuedRunId(client: Client, workflowId: string): Promise<string> {
  const runs: WorkflowExecutionInfo[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(wf);
  const continued = runs.filter((r) => r.status.name === 'CONTINUED_AS_NEW').sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  if (!continued.length) throw new Error(`${workflowId} has no run that continued as new`);
  return continued[0].runId;
}
