-- v_rollout_sequences in linear time. The view of 003 read each completion token's log-prob and
-- version by subscript (k.logprobs[c.ord]), which detoasts the whole array again for every token:
-- a turn of n ids cost O(n²). One huge turn (a 1 MB tool call of a byte-level model,
-- test/chaos/modelOutput.test.ts: 1,048,647 ids) took more than 90 s alone, and since the view
-- aggregates every rollout before a join filters it, each later query that joined batch_members
-- ran for tens of minutes (CI: test/engineKinds.test.ts timed out). Measured on that row:
-- > 90 s (cancelled) before, 7.6 s now. Same columns, same rows: the completion's ids, log-probs
-- and versions are unnested side by side; a multi-argument unnest pads the shorter arrays with
-- nulls, so rows past the ids (id null) are dropped, and missing log-probs and versions read 0
-- and -1 as before. Nothing evaluated per token may name a turn's array column.
create or replace view v_rollout_sequences as
select k.rollout_id,
       array_agg(x.id order by k.turn_index, x.part, x.ord)          as ids,
       array_agg(x.mask order by k.turn_index, x.part, x.ord)        as loss_mask,
       array_agg(x.logprob order by k.turn_index, x.part, x.ord)     as logprobs,
       array_agg(x.version order by k.turn_index, x.part, x.ord)     as token_versions,
       count(*) filter (where x.mask = 1)                            as generated_tokens,
       count(*)                                                      as sequence_tokens
from turn_tokens k
cross join lateral (
  select 0 as part, i.ord, i.id, 0 as mask, 0::real as logprob, -1 as version
  from unnest(k.input_ids) with ordinality as i(id, ord)
  union all
  select 1, c.ord, c.id, 1, coalesce(c.logprob, 0), coalesce(c.version, -1)
  from unnest(k.completion_ids, k.logprobs, k.token_versions) with ordinality as c(id, logprob, version, ord)
  where c.id is not null
) x
where k.input_ids is not null
group by k.rollout_id;
