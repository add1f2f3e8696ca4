"""A Gemma-3-shaped model (sliding-window attention layers beside full ones) served for several
sequences at once: transformers' sliding-window cache layers cannot be merged into one batched
cache, so ``HFBackend`` must choose per-sequence decoding on the first sequence, before any is
admitted (issue 42: the second sequence of an n > 1 request failed with "NotImplementedError:
sliding-window cache layers" and the scheduler aborted every sequence in flight)."""
import pytest

transformers = pytest.importorskip("transformers")
try:
    from transformers import Gemma3ForCausalLM  # noqa: F401
except ImportError:  # pragma: no cover
    pytest.skip("this transformers has no gemma3", allow_module_level=True)

import torch  # noqa: E402

from floe_engine.hf_model import HFBackend  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.sampling import SamplingParams  # noqa: E402
from floe_engine.scheduler import Engine  # noqa: E402

# window 8 and prompts of 20+ tokens: every decode step reaches past the window
SPEC = ("hf:gemma3_text:hidden_size=64,intermediate_size=128,num_hidden_layers=2,num_attention_heads=4,"
        "num_key_value_heads=2,head_dim=16,vocab_size=320,max_position_embeddings=1024,sliding_window=8,"
        "sliding_window_pattern=2")


def test_gemma3_request_with_n4_is_answered_and_scored_like_a_full_forward():
    pol, _ = build_policy(SPEC, dtype="fp32", seed=0)
    assert "sliding_attention" in pol.module.config.layer_types
    prompt = list(b"Issue: the parser drops the last line.")
    eng = Engine(pol, version=0, max_batch=4, seed=1).start()
    try:
        req = eng.submit(prompt, SamplingParams(max_tokens=16, temperature=1.0, seed=7, ignore_eos=True), n=4)
        assert req.done.wait(120), "the n=4 request did not finish"
    finally:
        eng.stop()
    assert req.error is None
    assert [s.finish_reason for s in req.seqs] == ["length"] * 4
    assert eng.backend.mode == "single"
    outs = [list(s.out) for s in req.seqs]
    assert all(len(o) == 16 for o in outs) and len({tuple(o) for o in outs}) > 1  # four samples, not one
    # the engine's cached log-probs are what a full forward (sliding masks built by transformers) gives
    want = pol.token_logprobs([(prompt, o) for o in outs])
    for s, (lp, _) in zip(req.seqs, want):
        assert max(abs(a - b) for a, b in zip(s.logprobs, lp.tolist())) < 1e-4


def test_merging_a_second_sliding_window_sequence_is_what_failed():
    """Negative control: forced into the merged layout, the second sequence is refused; that is the
    error the scheduler turned into an abort of everything in flight."""
    pol, _ = build_policy(SPEC, dtype="fp32", seed=0)
    be = HFBackend(pol, 4)
    logits, cache = be._prefill(list(range(1, 21)))
    be.cache, be.T, be.pad, be.rows, be.lengths = cache, 20, [0], ["a"], [20]
    with pytest.raises(NotImplementedError, match="sliding-window"):
        be.add("b", list(range(1, 31)))
    assert torch.isfinite(logits).all()
