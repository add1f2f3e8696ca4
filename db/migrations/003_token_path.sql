-- The token path: a rollout is one token sequence. Each turn stores only the ids the
-- renderer added before it (input_ids: turn 0 the rendered system + issue + assistant
-- header, later turns the tool result + next header) and the ids it generated; turn t's
-- prompt is the concatenation of every earlier turn's input_ids || completion_ids, then its
-- own input_ids. prompt_ids is kept for rows recorded before this migration (new rows: '{}').
alter table turn_tokens
  add column input_ids    integer[],
  add column prompt_len   integer,          -- length of the prompt sent to the engine
  add column render_drift jsonb;            -- {at, concatenated, template}: where the chat template's
                                            -- full rendering differs from the ids the model saw

-- One row per rollout: its whole token sequence, the loss mask over the model's own tokens,
-- and the per-token behaviour log-probs and weight versions (what the trainer receives).
create view v_rollout_sequences as
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
  select 1, c.ord, c.id, 1, coalesce(k.logprobs[c.ord], 0), coalesce(k.token_versions[c.ord], -1)
  from unnest(k.completion_ids) with ordinality as c(id, ord)
) x
where k.input_ids is not null
group by k.rollout_id;
