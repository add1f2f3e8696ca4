-- A turns row is written once, with everything known about the turn (the tool's observation,
-- exit code, shortcut flags and tool_ms included), by the rollout workflow's recordTurn
-- activity after the tool has answered. The turn's ids are still written by the generate
-- activity as soon as the engine answers (the next turn's prompt is built from them), so a
-- turn_tokens row now comes before its turns row: it references its rollout instead.
-- Generation reads earlier turns as turns ⋈ turn_tokens, so a turn counts only once both exist.
alter table turn_tokens drop constraint turn_tokens_rollout_id_turn_index_fkey;
alter table turn_tokens add constraint turn_tokens_rollout_id_fkey
  foreign key (rollout_id) references rollouts(rollout_id);
