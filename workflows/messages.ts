import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { LoopRunState, LoopStatus } from '../core/runLoop.js';

/** Every message floe's workflows accept, in one place, shared by workflows and clients. */

/** The run's status as the state machine keeps it (core/runLoop.ts). */
export type RunState = LoopRunState;
export type RunStatus = LoopStatus;

export const pauseRun = defineUpdate<RunStatus>('pause');
export const resumeRun = defineUpdate<RunStatus>('resume');
export const stopRun = defineUpdate<RunStatus, [reason: string]>('stop');
export const runStatus = defineQuery<RunStatus>('status');
