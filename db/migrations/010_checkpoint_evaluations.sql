-- `floe eval` (cli/eval.ts): a frozen-weight evaluation of one checkpoint outside any training
-- run. Each policy evaluated gets its own runs row (run_id = the evaluation id, name
-- 'eval: …'), as the data audit's auditor does, so that its rollouts, turns, tokens and gate
-- decisions are audited like any other; its per-task scores go to evaluations with label
-- 'checkpoint'. One `floe eval A B …` is a session: one evaluation per policy, side by side.
alter table evaluations drop constraint evaluations_label_check;
alter table evaluations add constraint evaluations_label_check
  check (label in ('start', 'end', 'checkpoint'));

create table checkpoint_evaluations (
  eval_id          text primary key references runs(run_id),
  -- one `floe eval` invocation: its policies are the columns of one table
  session_id       text not null,
  -- the column: 'start' / 'end' of a run, or the checkpoint folder as given
  policy           text not null,
  checkpoint_path  text not null,
  -- the version the checkpoint's sidecar records: every generated token must carry it
  version          integer not null,
  -- the training run the checkpoint came from (null: a folder given directly)
  source_run_id    text,
  -- the task lists as given (--tasks), and their ids
  task_lists       jsonb not null,
  k                integer not null,
  state            text not null default 'running' check (state in ('running', 'completed', 'failed')),
  pass_at_1        double precision,
  pass_at_k        double precision,
  failed_attempts  integer,
  -- the weight versions the eval's rollouts were generated with (rollouts.version_start/_end):
  -- {version} when the weights stayed frozen
  versions_seen    integer[],
  error            text,
  started_at       timestamptz not null default now(),
  finished_at      timestamptz
);
create index checkpoint_evaluations_session_idx on checkpoint_evaluations (session_id);
