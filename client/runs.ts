import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { CONTROL_QUEUE } from '../core/taskQueues.js';
import { ConfigError, parseRunConfig, type RunConfig } from '../core/config.js';
import { trainingWindowProblem } from '../core/runLoop.js';
import { FloeKind, FloeRunId } from '../core/searchAttributes.js';
import { pauseRun, resumeRun, runStatus, stopRun, type RunStatus } from '../workflows/messages.js';
import type { Settings } from '../infra/settings.js';

/** Typed client functions for scripts: the `floe run …` commands call exactly these. */

export const runWorkflowId = (runId: string): string => `floe-run-${runId}`;

export function webUiLink(s: Settings, workflowId: string): string {
  return `${s.temporal.uiUrl}/namespaces/${encodeURIComponent(s.temporal.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

export function newRunId(name: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 40) || 'run';
  return `${slug}-${stamp}-${Math.random().toString(36).slice(2, 6)}`;
}

export async function startRun(client: Client, config: RunConfig | unknown, opts: { runId?: string } = {}): Promise<{ runId: string; workflowId: string }> {
  const cfg = parseRunConfig(config);
  const problem = trainingWindowProblem(cfg);
  if (problem) throw new ConfigError([problem], 'config');
  const runId = opts.runId ?? newRunId(cfg.name);
  const workflowId = runWorkflowId(runId);
  await client.workflow.start('trainingRun', {
    taskQueue: CONTROL_QUEUE,
    workflowId,
    args: [{ runId, config: cfg }],
    typedSearchAttributes: [
      { key: FloeRunId, value: runId },
      { key: FloeKind, value: 'trainingRun' },
    ],
  });
  return { runId, workflowId };
}

export interface RunListing { runId: string; workflowId: string; status: string; startTime: Date }

export async function listRuns(client: Client, limit = 50): Promise<RunListing[]> {
  const out: RunListing[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowType = 'trainingRun'` }) as AsyncIterable<WorkflowExecutionInfo>) {
    out.push({ runId: wf.workflowId.replace(/^floe-run-/, ''), workflowId: wf.workflowId, status: wf.status.name, startTime: wf.startTime });
    if (out.length >= limit) break;
  }
  return out;
}

const handle = (client: Client, runId: string) => client.workflow.getHandle(runWorkflowId(runId));

export async function getRunStatus(client: Client, runId: string): Promise<RunStatus> {
  const h = handle(client, runId);
  const desc = await h.describe();
  if (desc.status.name === 'RUNNING') {
    try {
      return await h.query(runStatus);
    } catch (err) {
      throw new Error(`run ${runId} is running but did not answer its status query (${(err as Error).message}); is a control worker up? Start one with \`floe worker control\` (or \`floe worker all\`)`);
    }
  }
  return (await h.result()) as RunStatus;
}

export const pause = (client: Client, runId: string): Promise<RunStatus> => handle(client, runId).executeUpdate(pauseRun);
export const resume = (client: Client, runId: string): Promise<RunStatus> => handle(client, runId).executeUpdate(resumeRun);
export const stop = (client: Client, runId: string, reason = 'stopped by user'): Promise<RunStatus> => handle(client, runId).executeUpdate(stopRun, { args: [reason] });
