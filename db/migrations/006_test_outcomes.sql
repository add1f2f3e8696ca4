-- Per-test outcomes of every graded submission, one row per test, as the task's own harness
-- read them: the swebench package's log parser for SWE-bench-family rows it covers, R2E-Gym's
-- expected-output comparison, or floe's pytest plugin (submissions.grade holds the whole
-- GradeResult; this view unnests its tests).
create view v_test_outcomes as
select r.run_id, s.rollout_id, r.task_id,
       s.grade->>'harness'  as harness,
       (s.grade->>'passed')::boolean as resolved,
       t->>'group'   as test_group,
       t->>'id'      as test_id,
       t->>'outcome' as outcome
from submissions s
join rollouts r using (rollout_id)
cross join lateral jsonb_array_elements(coalesce(s.grade->'tests', '[]'::jsonb)) t
where s.grade is not null;
