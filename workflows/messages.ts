import { defineQuery, defineUpdate } from '@temporalio/workflow';

/** Every message floe's workflows accept, in one place, shared by workflows and clients. */

export type RunState = 'running' | 'paused' | 'stopping' | 'stopped' | 'completed' | 'failed';

export interface RunStatus {
  runId: string;
  name: string;
  state: RunState;
  policyVersion: number;
  updatesDone: number;
  updatesTarget: number;
  rolloutsFinished: number;
  rolloutsInFlight: number;
  discardedStale: number;
  lastMeanReward: number | null;
  pool: { active: number; retiredMastered: number; retiredHopeless: number; revived: number };
  continuedAsNew: number;
  /** Frozen-weight evaluations so far (absent in runs recorded before them). */
  evaluations?: { label: 'start' | 'end'; version: number; k: number; tasks: number; pass1: number | null; passK: number | null; pool: number }[];
}

export const pauseRun = defineUpdate<RunStatus>('pause');
export const resumeRun = defineUpdate<RunStatus>('resume');
export const stopRun = defineUpdate<RunStatus, [reason: string]>('stop');
export const runStatus = defineQuery<RunStatus>('status');
