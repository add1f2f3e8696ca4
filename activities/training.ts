import type pg from 'pg';
import type { EvictionDecision, TaskRecord } from '../core/eviction.js';
import { claimBatch, upsertPolicyVersion, type NewPolicyVersion } from '../store/batches.js';
import { discardRollouts, setRolloutStaleness } from '../store/rollouts.js';
import { insertEvictions, upsertTaskStats } from '../store/evictions.js';
import { recordEvaluation, type EvaluationLabel } from '../store/evaluations.js';
import type { TaskScore } from '../core/passAtK.js';

/** Audit rows of the training loop: batches (exactly once), policy versions, discards,
 *  eviction decisions and task state, frozen-weight evaluations (store/batches.ts, rollouts.ts,
 *  evictions.ts, evaluations.ts). */

export type PolicyVersionRow = NewPolicyVersion;

export function createTrainingActivities(pool: pg.Pool) {
  return {
    /** Claim rollouts for the batch that produces `version`. A rollout can belong to one
     *  batch only (primary key); a retry returns the same claim. Returns the claimed ids. */
    async claimBatch(input: { runId: string; version: number; advantages: Record<string, number> }): Promise<string[]> {
      return claimBatch(pool, input);
    },

    async recordPolicyVersion(r: PolicyVersionRow): Promise<void> {
      await upsertPolicyVersion(pool, r);
    },

    async markDiscarded(input: { rolloutIds: string[]; reason: string; staleness: Record<string, number> }): Promise<void> {
      await discardRollouts(pool, input);
    },

    async recordStaleness(input: { staleness: Record<string, number> }): Promise<void> {
      await setRolloutStaleness(pool, input.staleness);
    },

    async recordEvaluation(input: { runId: string; label: EvaluationLabel; version: number; k: number; scores: TaskScore[]; pool: string[] }): Promise<void> {
      await recordEvaluation(pool, input);
    },

    async recordEvictions(input: { runId: string; version: number; decisions: EvictionDecision[]; tasks: Record<string, TaskRecord> }): Promise<void> {
      await insertEvictions(pool, input.runId, input.version, input.decisions);
      await upsertTaskStats(pool, input.runId, input.tasks);
    },
  };
}

export type TrainingActivities = ReturnType<typeof createTrainingActivities>;
