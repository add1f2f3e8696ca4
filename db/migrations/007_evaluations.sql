-- Frozen-weight evaluations of a run's pool (workflows/evaluation.ts): k attempts per task
-- with the weights of one policy version, no update in between. 'start' scores the starting
-- policy (and, with evaluation.poolFromStart, picks the stress pool: tasks solved at least once
-- in k); 'end' scores the final weights. pass@1 and pass@k are the unbiased estimators
-- (core/passAtK.ts); attempts lost to infrastructure are counted apart (failed), not in n.
create table evaluations (
  run_id      text not null references runs(run_id),
  label       text not null check (label in ('start', 'end')),
  version     integer not null,
  task_id     text not null,
  k           integer not null,
  attempts    integer not null,
  solved      integer not null,
  failed      integer not null,
  pass_at_1   double precision not null,
  pass_at_k   double precision not null,
  in_pool     boolean not null,
  created_at  timestamptz not null default now(),
  primary key (run_id, label, task_id)
);

-- One line per evaluation: the pool's mean pass@1 and pass@k.
create view v_evaluations as
select run_id, label, version, k, count(*) as tasks,
       count(*) filter (where in_pool) as pool_tasks,
       avg(pass_at_1) as pass_at_1, avg(pass_at_k) as pass_at_k,
       avg(pass_at_1) filter (where in_pool) as pool_pass_at_1,
       sum(failed) as failed_attempts, min(created_at) as created_at
from evaluations
group by run_id, label, version, k;
