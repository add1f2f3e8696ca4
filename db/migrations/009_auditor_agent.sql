-- The data audit's auditor agent (core/auditorAgent.ts): when `floe audit --auditor CONFIG`
-- names an engine, each task's audit runs rollouts of an auditor task (`<task id>@auditor`, in
-- tasks) that ask the engine for a plausible wrong fix. They are rollouts like any other (turns,
-- tokens, submissions), under a runs row whose run_id is the audit id, with purpose 'audit'.
-- What an agent submits becomes a candidate in audit_candidates (kind 'auditor').
alter table rollouts drop constraint rollouts_purpose_check;
alter table rollouts add constraint rollouts_purpose_check
  check (purpose in ('train', 'recheck', 'eval', 'test', 'audit'));
