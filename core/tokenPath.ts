/** The token path's pure rules (docs/architecture.md "The token path"): a rollout is one token
 *  sequence. Turn t's prompt is every earlier turn's input ids and completion ids, exactly
 *  as generated (EOS included), followed by the ids the renderer adds before turn t (turn 0:
 *  the rendered system + issue + assistant header; later turns: the tool result and the
 *  next assistant header). Nothing is ever re-tokenized, so the trainer scores the ids the
 *  model saw. */

export interface TurnTokens {
  /** Ids the renderer added before this turn's generation. */
  inputIds: readonly number[];
  /** Ids the engine generated in this turn. */
  completionIds: readonly number[];
  /** Behaviour log-probabilities of completionIds (same length, or empty if the engine gave none). */
  logprobs: readonly number[];
  /** Weight version of each completion id (same length, or empty). */
  versions: readonly number[];
}

/** The prompt of the next turn: every earlier turn's input + completion, then `input`. */
export function nextPrompt(earlier: readonly TurnTokens[], input: readonly number[]): number[] {
  const out: number[] = [];
  for (const t of earlier) out.push(...t.inputIds, ...t.completionIds);
  out.push(...input);
  return out;
}

/** One training sample: the rollout's whole sequence with a loss mask over the model's own
 *  tokens, and per-token behaviour log-probs and weight versions (0 and -1 off the mask). */
export interface RolloutSequence { ids: number[]; lossMask: number[]; logprobs: number[]; versions: number[] }

export function rolloutSequence(turns: readonly TurnTokens[]): RolloutSequence {
  const seq: RolloutSequence = { ids: [], lossMask: [], logprobs: [], versions: [] };
  turns.forEach((t, i) => {
    if (t.logprobs.length && t.logprobs.length !== t.completionIds.length) throw new Error(`turn ${i}: ${t.logprobs.length} logprobs for ${t.completionIds.length} generated tokens`);
    if (t.versions.length && t.versions.length !== t.completionIds.length) throw new Error(`turn ${i}: ${t.versions.length} weight versions for ${t.completionIds.length} generated tokens`);
    for (const id of t.inputIds) { seq.ids.push(id); seq.lossMask.push(0); seq.logprobs.push(0); seq.versions.push(-1); }
    t.completionIds.forEach((id, k) => {
      seq.ids.push(id);
      seq.lossMask.push(1);
      seq.logprobs.push(t.logprobs[k] ?? 0);
      seq.versions.push(t.versions[k] ?? -1);
    });
  });
  return seq;
}

/** Where the template's full rendering of the conversation and the concatenation the model
 *  actually saw part ways (null when they agree). floe keeps the concatenation and records this. */
export interface RenderDrift { at: number; concatenated: number; template: number }

export function renderDrift(concatenated: readonly number[], template: readonly number[]): RenderDrift | null {
  const n = Math.min(concatenated.length, template.length);
  let i = 0;
  while (i < n && concatenated[i] === template[i]) i++;
  if (i === n && concatenated.length === template.length) return null;
  return { at: i, concatenated: concatenated.length, template: template.length };
}

/** A turn can be continued only after a completion that ended with the end-of-turn token
 *  (anything else failed the format gate, which ends the rollout). */
export function endsTurn(completionIds: readonly number[], stopIds: readonly number[]): boolean {
  return completionIds.length > 0 && stopIds.includes(completionIds[completionIds.length - 1]);
}
