import { describe, expect, it } from 'vitest';
import { fitRequest, saysPromptTooLong } from '../../core/requestFit.js';

/** core/requestFit.ts: one cap for every engine kind, and the servers' refusals it recognises
 *  (messages as vLLM 0.34.0 and SGLang 0.5.23 word them; see the module's sources). */
describe('fitRequest', () => {
  it('caps max tokens at the context minus the prompt', () => {
    expect(fitRequest(1024, 1000, 160)).toEqual({ fits: true, maxTokens: 24 });
    expect(fitRequest(1024, 10, 160)).toEqual({ fits: true, maxTokens: 160 });
    expect(fitRequest(1024, 1023, 160)).toEqual({ fits: true, maxTokens: 1 });
  });

  it('a cap of 0 (or less) does not fit: prompt_too_long on every server', () => {
    expect(fitRequest(1024, 1024, 160)).toMatchObject({ fits: false, detail: expect.stringMatching(/1024 tokens.*context is 1024/) });
    expect(fitRequest(1024, 1500, 160).fits).toBe(false);
  });

  it('with no reported context the request is sent as asked', () => {
    expect(fitRequest(null, 5000, 160)).toEqual({ fits: true, maxTokens: 160 });
  });
});

describe('saysPromptTooLong', () => {
  it('recognises both servers\' context refusals, vLLM\'s max_tokens 0 included', () => {
    for (const m of [
      'max_tokens must be at least 1, got 0.', // vllm/sampling_params.py, a prompt of exactly max_model_len
      "This model's maximum context length is 1024 tokens. However, your prompt contains 1025 input tokens.",
      'Input length (1025) exceeds model\'s maximum context length (1024).', // vllm api_utils.get_max_tokens
      "The input (2048 tokens) is longer than the model's context length (2048 tokens).", // sglang tokenizer_manager
      "Requested token count exceeds the model's maximum context length of 2048 tokens.",
      'prompt too long: the prompt is 1024 tokens and the server\'s context is 1024: no room for one generated token',
    ]) expect(saysPromptTooLong(m), m).toBe(true);
  });

  it('negative controls: other 400s are not a prompt that does not fit', () => {
    for (const m of [
      'max_tokens must be at least 1, got -3.',
      'n must be at least 1, got 0.',
      'temperature must be non-negative, got -1.',
      "[{'type': 'missing', 'loc': ('body', 'model_path'), 'msg': 'Field required'}]",
      'Flush cache failed.',
    ]) expect(saysPromptTooLong(m), m).toBe(false);
  });
});
