-- The diff an agent submitted (extracted from its sandbox at submit), graded by rewardGate.
create table submissions (
  rollout_id   text primary key references rollouts(rollout_id),
  diff         text not null,
  bytes        integer not null,
  truncated    boolean not null default false,
  grade        jsonb,                 -- per-test outcomes, apply error, timings
  created_at   timestamptz not null default now()
);
