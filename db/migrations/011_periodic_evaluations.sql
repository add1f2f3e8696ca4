-- Periodic evaluations inside a training run (config evaluation.every, workflows/trainingRun.ts):
-- every N updates, with the weights just landed and no update started until they end, the
-- held-out tasks (label 'periodic') and the tasks retired as mastered so far (label 'retired':
-- the forgetting check). A run has one 'start' and one 'end' but many of these, one per
-- version, so the version joins the key.
alter table evaluations drop constraint evaluations_pkey;
alter table evaluations add primary key (run_id, label, version, task_id);
alter table evaluations drop constraint evaluations_label_check;
alter table evaluations add constraint evaluations_label_check
  check (label in ('start', 'end', 'checkpoint', 'periodic', 'retired'));
