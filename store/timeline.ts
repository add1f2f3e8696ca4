import { SHORTCUT_FLAGS, type ShortcutFlag } from '../core/shortcuts.js';
import type { EvaluationLabel } from './evaluations.js';
import type { Queryable } from './pool.js';

/** Read-only queries for the run report's timeline: frozen-weight evaluations per label, train
 *  rollouts and turns bucketed by update window, and where a train rollout's wall time goes.
 *  Tables: rollouts, turns, gate_decisions, submissions, policy_versions; view v_evaluations
 *  (db/migrations/001, 002, 007). Nothing here writes.
 *
 *  Update windows are bucketed as store/engines.ts countPlacementsPerUpdate does: with the
 *  creation times t1 < t2 < … of versions ≥ 1, bucket 0 holds what happened before t1 (it fed
 *  update 1), bucket k what happened in [t_k, t_{k+1}) (it fed update k+1), and bucket N (the
 *  number of updates) what came after the last update. */

const BUCKET_OF = (column: string) => `coalesce(width_bucket(${column}, (select array_agg(created_at order by created_at)
  from policy_versions where run_id = $1 and version >= 1)), 0)`;

/** One line of v_evaluations: the mean scores of one frozen-weight evaluation of a run. */
export interface EvaluationSummaryRow {
  label: EvaluationLabel;
  version: number;
  k: number;
  tasks: number;
  poolTasks: number;
  pass1: number | null;
  passK: number | null;
  poolPass1: number | null;
  failedAttempts: number;
}

export async function listEvaluationSummaries(db: Queryable, runId: string): Promise<EvaluationSummaryRow[]> {
  const r = await db.query<{ label: EvaluationLabel; version: number; k: number; tasks: number; pool_tasks: number; pass_at_1: number | null; pass_at_k: number | null; pool_pass_at_1: number | null; failed_attempts: number | null }>(
    `select label, version, k, tasks::int as tasks, pool_tasks::int as pool_tasks, pass_at_1, pass_at_k, pool_pass_at_1, failed_attempts::int as failed_attempts
     from v_evaluations where run_id = $1 order by case label when 'start' then 0 else 1 end, created_at`, [runId]);
  return r.rows.map((x) => ({
    label: x.label, version: x.version, k: x.k, tasks: x.tasks, poolTasks: x.pool_tasks,
    pass1: x.pass_at_1, passK: x.pass_at_k, poolPass1: x.pool_pass_at_1, failedAttempts: x.failed_attempts ?? 0,
  }));
}

/** Train groups started (distinct group ids of train rollouts) and the distinct tasks they
 *  attempted. */
export async function countTrainGroups(db: Queryable, runId: string): Promise<{ groups: number; tasks: number }> {
  const r = await db.query<{ groups: number; tasks: number }>(
    `select count(distinct group_id)::int as groups, count(distinct task_id)::int as tasks
     from rollouts where run_id = $1 and purpose = 'train'`, [runId]);
  return r.rows[0] ?? { groups: 0, tasks: 0 };
}

/** Train rollouts that ran to a decision (finished, or finished and then discarded as stale;
 *  not the ones that failed on infrastructure), by the update window they ended in: how many
 *  and their mean reward. */
export async function trainRewardsPerUpdate(db: Queryable, runId: string): Promise<{ bucket: number; rollouts: number; meanReward: number | null }[]> {
  const r = await db.query<{ bucket: number; rollouts: number; mean_reward: number | null }>(
    `select ${BUCKET_OF('ended_at')} as bucket, count(*)::int as rollouts, avg(reward) as mean_reward
     from rollouts where run_id = $1 and purpose = 'train' and status in ('finished', 'discarded')
       and ended_at is not null and reward is not null
     group by 1 order by 1`, [runId]);
  return r.rows.map((x) => ({ bucket: x.bucket, rollouts: x.rollouts, meanReward: x.mean_reward }));
}

/** Train rollouts that ran to a decision (as trainRewardsPerUpdate counts them), by the update
 *  window they ended in: how many, and how many attempted each kind of shortcut
 *  (rollouts.shortcut_flags, core/shortcuts.ts). */
export async function trainShortcutsPerUpdate(db: Queryable, runId: string): Promise<{ bucket: number; rollouts: number; flags: Record<ShortcutFlag, number> }[]> {
  const cols = SHORTCUT_FLAGS.map((f) => `count(*) filter (where '${f}' = any(shortcut_flags))::int as ${f}`).join(', ');
  const r = await db.query<{ bucket: number; rollouts: number } & Record<ShortcutFlag, number>>(
    `select ${BUCKET_OF('ended_at')} as bucket, count(*)::int as rollouts, ${cols}
     from rollouts where run_id = $1 and purpose = 'train' and status in ('finished', 'discarded')
       and ended_at is not null and reward is not null
     group by 1 order by 1`, [runId]);
  return r.rows.map((x) => ({ bucket: x.bucket, rollouts: x.rollouts, flags: Object.fromEntries(SHORTCUT_FLAGS.map((f) => [f, x[f]])) as Record<ShortcutFlag, number> }));
}

/** Turns of train rollouts by the update window they were written in: how many, and how many
 *  passed the raw-format check (turns.format_ok, recorded even with the check switched off). */
export async function trainTurnFormatPerUpdate(db: Queryable, runId: string): Promise<{ bucket: number; turns: number; formatOk: number }[]> {
  const r = await db.query<{ bucket: number; turns: number; format_ok: number }>(
    `select ${BUCKET_OF('t.created_at')} as bucket, count(*)::int as turns, count(*) filter (where t.format_ok)::int as format_ok
     from turns t join rollouts r using (rollout_id)
     where r.run_id = $1 and r.purpose = 'train'
     group by 1 order by 1`, [runId]);
  return r.rows.map((x) => ({ bucket: x.bucket, turns: x.turns, formatOk: x.format_ok }));
}

/** Means over a run's finished train rollouts of: wall time (ended_at − started_at), the sum
 *  of their turns' gen_ms and tool_ms, and grading time: the gate decision's detail.durationMs,
 *  else the submission grade's durationMs, 0 for a rollout the gate ended without grading.
 *  `graded` counts rollouts with a recorded grading duration. Milliseconds. */
export interface TrainRolloutTimes { rollouts: number; wallMs: number | null; genMs: number | null; toolMs: number | null; gradeMs: number | null; graded: number }

export async function trainRolloutTimes(db: Queryable, runId: string): Promise<TrainRolloutTimes> {
  const num = (col: string) => `case when jsonb_typeof(${col}) = 'number' then (${col})::text::double precision end`;
  const r = await db.query<{ rollouts: number; wall_ms: number | null; gen_ms: number | null; tool_ms: number | null; grade_ms: number | null; graded: number }>(
    `with x as (
       select extract(epoch from (r.ended_at - r.started_at)) * 1000 as wall_ms,
              (select coalesce(sum(t.gen_ms), 0) from turns t where t.rollout_id = r.rollout_id) as gen_ms,
              (select coalesce(sum(t.tool_ms), 0) from turns t where t.rollout_id = r.rollout_id) as tool_ms,
              coalesce(${num("g.detail->'durationMs'")}, ${num("s.grade->'durationMs'")}) as grade_ms
       from rollouts r
       left join gate_decisions g using (rollout_id)
       left join submissions s using (rollout_id)
       where r.run_id = $1 and r.purpose = 'train' and r.status = 'finished' and r.ended_at is not null
     )
     select count(*)::int as rollouts, avg(wall_ms)::double precision as wall_ms, avg(gen_ms)::double precision as gen_ms,
            avg(tool_ms)::double precision as tool_ms, avg(coalesce(grade_ms, 0))::double precision as grade_ms,
            count(grade_ms)::int as graded
     from x`, [runId]);
  const row = r.rows[0];
  return { rollouts: row.rollouts, wallMs: row.wall_ms, genMs: row.gen_ms, toolMs: row.tool_ms, gradeMs: row.graded ? row.grade_ms : null, graded: row.graded };
}
