/** Whether a generation request fits the server's context, one rule for every engine kind.
 *
 *  The servers differ at the edge (read in the pinned releases):
 *  - vLLM 0.34.0 clamps max_tokens to what the context leaves (vllm/entrypoints/serve/utils/api_utils.py,
 *    get_max_tokens: min(max_model_len - input_length, max_tokens)), refuses a prompt longer than
 *    the context ("Input length (n) exceeds model's maximum context length (m).") and, for a
 *    prompt exactly max_model_len long, answers 400 "max_tokens must be at least 1, got 0."
 *    (vllm/sampling_params.py, SamplingParams._verify_args).
 *  - SGLang 0.5.23 does not clamp: prompt + max_new_tokens over context_len is a 400 "Requested
 *    token count exceeds the model's maximum context length ..." and a prompt of context_len
 *    tokens or more is "The input (n tokens) is longer than the model's context length (m
 *    tokens)." (python/sglang/srt/managers/tokenizer_manager.py, _validate_one_request).
 *  So floe caps max_tokens itself at context − prompt, from the context length the server
 *  reports (GET /v1/models → data[0].max_model_len on both), and a cap of 0 ends the rollout as
 *  prompt_too_long on either server, at the same turn. */

export type RequestFit =
  | { fits: true; maxTokens: number }
  | { fits: false; detail: string };

/** The max tokens to ask for: `want`, capped at what the context leaves after the prompt.
 *  `contextLen` null: the server reported none (floe sends `want` and relies on its answer). */
export function fitRequest(contextLen: number | null, promptLen: number, want: number): RequestFit {
  if (contextLen === null) return { fits: true, maxTokens: want };
  const room = contextLen - promptLen;
  if (room <= 0) {
    return { fits: false, detail: `the prompt is ${promptLen} tokens and the server's context is ${contextLen}: no room for one generated token` };
  }
  return { fits: true, maxTokens: Math.min(want, room) };
}

/** A server's 400 that says the prompt does not fit its context (the messages above), as
 *  opposed to a malformed request. */
export function saysPromptTooLong(message: string): boolean {
  return /context length|context window|too long|longer than|exceeds .*(context|length)|max_tokens must be at least 1, got 0|maximum context/i.test(message);
}
