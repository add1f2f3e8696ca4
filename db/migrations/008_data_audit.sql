-- The data audit (workflows/dataAudit.ts, `floe audit`): for each task, the standard validation
-- (FAIL_TO_PASS fail and PASS_TO_PASS pass before the gold patch, all pass after it) and a search
-- for plausible wrong patches that its tests still accept. One audits row per audit (a dataset
-- audited once, resumable); one task_audits row per task, written once when its audit ends;
-- one audit_candidates row per candidate patch tried.
create table audits (
  audit_id    text primary key,
  dataset     text not null,
  config      jsonb not null,
  task_ids    jsonb not null,
  started_at  timestamptz not null default now(),
  finished_at timestamptz,
  -- the published table (core/dataAudit.ts auditTable) once every task is done
  summary     jsonb
);

create table task_audits (
  audit_id           text not null references audits(audit_id),
  task_id            text not null,
  -- invalid: fails the standard validation; flagged: a wrong patch passes every test; passed
  status             text not null check (status in ('invalid', 'flagged', 'passed')),
  validation         jsonb not null,
  candidates_tried   integer not null,
  candidates_passing integer not null,
  -- candidates that passed every test and behaved differently from the gold patch
  wrong_found        integer not null,
  -- the wrong patch kept as evidence (confirmed by a fresh grading): kind, description, diff,
  -- the test variant and the calls where it differs from the gold patch
  evidence           jsonb,
  note               text,
  -- stronger tests (flagged tasks): the task's test patch plus a new file of checks derived from
  -- the gold patch's behaviour, kept only when they pass on the gold patch and fail on every
  -- wrong patch found; FAIL_TO_PASS with their ids. NULL test patch: none kept (strengthen_note)
  strengthened_test_patch   text,
  strengthened_fail_to_pass jsonb,
  strengthened_checks       integer,
  strengthen_note           text,
  duration_ms        integer not null,
  finished_at        timestamptz not null default now(),
  primary key (audit_id, task_id)
);

create table audit_candidates (
  audit_id      text not null references audits(audit_id),
  task_id       text not null,
  candidate_id  text not null,
  kind          text not null,
  description   text not null,
  diff          text not null,
  tests_passed  boolean not null,
  failing       jsonb not null,
  -- null when it failed a test or behaved as the gold patch did on every variant
  difference    jsonb,
  primary key (audit_id, task_id, candidate_id)
);

-- One line per audit: how many tasks are done, and in each state.
create view v_audit_progress as
select a.audit_id, a.dataset, jsonb_array_length(a.task_ids) as tasks,
       count(t.task_id) as done,
       count(*) filter (where t.status = 'passed') as passed,
       count(*) filter (where t.status = 'flagged') as flagged,
       count(*) filter (where t.status = 'invalid') as invalid,
       count(*) filter (where t.strengthened_test_patch is not null) as strengthened,
       a.started_at, a.finished_at
from audits a left join task_audits t using (audit_id)
group by a.audit_id;
