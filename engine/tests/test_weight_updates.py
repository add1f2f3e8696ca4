"""Weight updates: outputs change, and a request spanning an update switches
to the new weights for every token after it (caches rebuilt)."""

import torch

from conftest import span_update
from floe_engine.policies import build_policy
from floe_engine.scoring import logprobs
from floe_engine.sft import greedy

PROMPT = "Issue: tests fail in parser.py when the input is empty. Fix the bug.\n"


def test_outputs_change_after_each_of_two_updates(start_server, ckpt_dir):
    eng = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "pub" / "v0", "--seed", 0)
    body = {"prompt": PROMPT, "max_tokens": 30, "seed": 11, "ignore_eos": True}
    outs = []
    for v in (0, 1, 2):
        if v:
            r = eng.post("/update_weights", {"path": str(ckpt_dir / "pub" / f"v{v}"), "version": v})
            assert r["ok"] and r["version"] == v and r["rebuilt_sequences"] == 0 and r["load_ms"] >= 0
            assert eng.get("/health")["version"] == v
            assert eng.metric("floe_engine_weight_version") == v
        c = eng.post("/v1/completions", body)["choices"][0]
        assert c["weight_versions"] == [v] * 30
        outs.append(c["token_ids"])
    assert outs[0] != outs[1] and outs[1] != outs[2] and outs[0] != outs[2]
    # the version in the body must match the checkpoint's sidecar
    eng.post("/update_weights", {"path": str(ckpt_dir / "pub" / "v1"), "version": 7}, expect=400)


def _span_update(eng, ckpt_dir, body):
    """A request spanning a load of v1 (conftest.span_update); the running sequence is rebuilt."""
    r, choice = span_update(eng, ckpt_dir, body)
    assert r["rebuilt_sequences"] == 1
    return choice


def test_request_spanning_an_update_switches_weights(start_server, ckpt_dir):
    eng = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "pub" / "v0")
    body = {"prompt": PROMPT, "max_tokens": 600, "seed": 5, "ignore_eos": True}
    c = _span_update(eng, ckpt_dir, body)
    versions, toks, lps = c["weight_versions"], c["token_ids"], c["logprobs"]["token_logprobs"]
    assert len(toks) == 600 and sorted(set(versions)) == [0, 1]
    k = versions.index(1)
    assert versions == [0] * k + [1] * (600 - k) and 25 <= k < 600
    prompt = list(PROMPT.encode())
    old, _ = build_policy("tiny", str(ckpt_dir / "pub" / "v0"))
    new, _ = build_policy("tiny", str(ckpt_dir / "pub" / "v1"))
    # tokens before the update: exactly v0's log-probs; after it: exactly v1's, from the same prefix
    before = logprobs(old, prompt, toks[:k])
    after_new = logprobs(new, prompt + toks[:k], toks[k:])
    after_old = logprobs(old, prompt + toks[:k], toks[k:])
    assert max(abs(a - b) for a, b in zip(before, lps[:k])) < 1e-4
    assert max(abs(a - b) for a, b in zip(after_new, lps[k:])) < 1e-4
    assert max(abs(a - b) for a, b in zip(after_old, lps[k:])) > 1e-2  # the old weights would not give these


def test_greedy_request_spanning_an_update_continues_as_new_weights_would(start_server, ckpt_dir):
    eng = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "pub" / "v0")
    body = {"prompt": PROMPT, "max_tokens": 400, "temperature": 0, "ignore_eos": True}
    c = _span_update(eng, ckpt_dir, body)
    k = c["weight_versions"].index(1)
    toks = c["token_ids"]
    prompt = list(PROMPT.encode())
    new, _ = build_policy("tiny", str(ckpt_dir / "pub" / "v1"))
    old, _ = build_policy("tiny", str(ckpt_dir / "pub" / "v0"))
    with torch.no_grad():
        assert toks[:k] == greedy(old, prompt, k, ignore_eos=True)
        # the token sampled right before the update (toks[k-1]) is fed under the new weights
        assert toks[k:] == greedy(new, prompt + toks[:k], len(toks) - k, ignore_eos=True)
