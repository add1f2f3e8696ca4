-- floe audit history: every run, policy version, rollout, turn, gate decision, eviction
-- decision and engine event. Rows are appended by activities; workflows pass ids around.

create table runs (
  run_id        text primary key,
  workflow_id   text not null,
  name          text not null,
  config        jsonb not null,
  status        text not null default 'running'
                check (status in ('running', 'paused', 'stopping', 'stopped', 'completed', 'failed')),
  started_at    timestamptz not null default now(),
  ended_at      timestamptz,
  summary       jsonb
);

create table tasks (
  task_id       text primary key,
  source        text not null,           -- e.g. 'toy', 'swe-bench', 'r2e-gym'
  repo          text not null,
  loose_tests   boolean,                 -- known from metadata or found by the data audit
  instance      jsonb not null,          -- the validated task row
  added_at      timestamptz not null default now()
);

-- One row per weight update (version 0 is the starting policy).
create table policy_versions (
  run_id            text not null references runs(run_id),
  version           integer not null,
  checkpoint_path   text,
  created_at        timestamptz not null default now(),
  batch_rollouts    integer,
  batch_mean_reward double precision,
  discarded_stale   integer,             -- rollouts discarded as too old since the previous update
  train_ms          integer,
  publish_ms        integer,
  load_ms           jsonb,               -- {engine_id: ms}
  update_ms         integer,             -- train step start to every engine serving it
  metrics           jsonb,               -- loss, grad_norm, entropy, clip_fraction, mismatch_*
  pool              jsonb,               -- {active, retired_mastered, retired_hopeless, revived}
  primary key (run_id, version)
);

create table rollouts (
  rollout_id        text primary key,
  run_id            text not null references runs(run_id),
  task_id           text not null,
  group_id          text not null,       -- G attempts at one task share a group (advantages)
  attempt           integer not null,
  purpose           text not null default 'train' check (purpose in ('train', 'recheck', 'eval', 'test')),
  workflow_id       text,
  status            text not null default 'running'
                    check (status in ('running', 'finished', 'discarded', 'failed')),
  version_start     integer,             -- policy version of the first generated token
  version_end       integer,             -- policy version of the last generated token
  reward            double precision,
  gate              text,                -- the gate decision's reason code
  n_turns           integer,
  prompt_tokens     integer,
  completion_tokens integer,
  shortcut_flags    text[] not null default '{}',
  discard_reason    text,
  staleness         integer,             -- policy version at collection minus version_start
  started_at        timestamptz not null default now(),
  ended_at          timestamptz
);
create index rollouts_run_idx on rollouts (run_id, status);
create index rollouts_task_idx on rollouts (run_id, task_id);

create table turns (
  rollout_id        text not null references rollouts(rollout_id),
  turn_index        integer not null,
  engine_id         text,
  raw_text          text not null,
  prompt_tokens     integer,
  completion_tokens integer,
  finish_reason     text,
  weight_versions   integer[],           -- distinct policy versions that produced this turn's tokens
  format_ok         boolean not null,
  format_reason     text,
  tool_name         text,
  tool_args         jsonb,
  observation       text,                -- exactly what the model saw next (truncated)
  exit_code         integer,
  shortcut_flags    text[] not null default '{}',
  gen_ms            integer,
  tool_ms           integer,
  created_at        timestamptz not null default now(),
  primary key (rollout_id, turn_index)
);

-- Token-level data of a turn, kept apart from turns so audit queries stay light.
create table turn_tokens (
  rollout_id        text not null,
  turn_index        integer not null,
  prompt_ids        integer[] not null,
  completion_ids    integer[] not null,
  logprobs          real[] not null,
  token_versions    integer[] not null,
  primary key (rollout_id, turn_index),
  foreign key (rollout_id, turn_index) references turns(rollout_id, turn_index)
);

create table gate_decisions (
  rollout_id   text primary key references rollouts(rollout_id),
  gate         text not null,            -- passed | tests_failed | format | duplicate_call | budget_* | no_submit | sandbox_error
  reward       double precision not null,
  detail       jsonb,                     -- e.g. the offending turn, the failing tests
  decided_at   timestamptz not null default now()
);

-- Which rollouts a weight update consumed. The primary key makes "counted twice" impossible.
create table batch_members (
  rollout_id   text primary key references rollouts(rollout_id),
  run_id       text not null,
  version      integer not null,         -- the policy version this batch produced
  advantage    double precision
);

create table evictions (
  id           bigserial primary key,
  run_id       text not null references runs(run_id),
  task_id      text not null,
  at_version   integer not null,
  decision     text not null check (decision in ('retire_mastered', 'retire_hopeless', 'revive', 'recheck_keep_retired')),
  evidence     jsonb not null,            -- the rewards the decision was taken on
  decided_at   timestamptz not null default now()
);

create table task_stats (
  run_id               text not null references runs(run_id),
  task_id              text not null,
  state                text not null default 'active' check (state in ('active', 'retired_mastered', 'retired_hopeless')),
  attempts             integer not null default 0,
  solved               integer not null default 0,
  recent_rewards       double precision[] not null default '{}',
  last_recheck_version integer,
  last_recheck_reward  double precision,
  updated_at           timestamptz not null default now(),
  primary key (run_id, task_id)
);

create table engine_events (
  id          bigserial primary key,
  run_id      text,
  engine_id   text not null,
  event       text not null,              -- placed | failed | unhealthy | healthy | weights_loaded
  version     integer,
  running     integer,
  waiting     integer,
  inflight    integer,
  detail      jsonb,
  at          timestamptz not null default now()
);
create index engine_events_run_idx on engine_events (run_id, engine_id, at);

-- Views for the common questions (documented in docs/audit-history.md).

create view v_run_updates as
select p.run_id, p.version, p.created_at, p.batch_rollouts, p.batch_mean_reward,
       p.discarded_stale, p.update_ms, p.train_ms, p.publish_ms,
       (p.metrics->>'mismatch_mean_abs_logprob')::double precision as mismatch_mean_abs_logprob,
       (p.metrics->>'mismatch_kl')::double precision as mismatch_kl,
       p.pool
from policy_versions p;

create view v_gate_reasons as
select r.run_id, g.gate, count(*) as rollouts, avg(g.reward) as mean_reward
from gate_decisions g join rollouts r using (rollout_id)
group by r.run_id, g.gate;

create view v_task_outcomes as
select r.run_id, r.task_id, count(*) filter (where r.status = 'finished') as finished,
       count(*) filter (where r.reward = 1) as solved,
       count(*) filter (where r.status = 'discarded') as discarded,
       avg(r.reward) filter (where r.status = 'finished') as mean_reward
from rollouts r group by r.run_id, r.task_id;

create view v_engine_load as
select run_id, engine_id, count(*) filter (where event = 'placed') as placements,
       count(*) filter (where event = 'failed') as failures,
       max(running) as max_running, max(waiting) as max_waiting
from engine_events group by run_id, engine_id;

create view v_shortcuts as
select r.run_id, f.flag, count(*) as rollouts
from rollouts r cross join lateral unnest(r.shortcut_flags) as f(flag)
group by r.run_id, f.flag;
