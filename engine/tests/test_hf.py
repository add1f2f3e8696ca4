"""The hf: path end to end on a tiny random-init Qwen3.5 (hybrid linear-attention)
config. Skipped where transformers (>= 5, with qwen3_5) is not installed, which
is the default CPU setup; runs on GPU machines and in a venv with PyPI torch."""
import threading

import pytest

transformers = pytest.importorskip("transformers")
try:
    from transformers import Qwen3_5ForCausalLM  # noqa: F401
except ImportError:  # pragma: no cover
    pytest.skip("this transformers has no qwen3_5", allow_module_level=True)

import torch  # noqa: E402

from conftest import step_config, wait_for  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402

SPEC = ("hf:qwen3_5_text:hidden_size=64,intermediate_size=128,num_hidden_layers=4,num_attention_heads=4,"
        "num_key_value_heads=2,head_dim=16,linear_num_key_heads=2,linear_num_value_heads=4,linear_key_head_dim=16,"
        "linear_value_head_dim=16,vocab_size=512,max_position_embeddings=1024")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
PROMPT = list(b"Issue: the parser drops the last line. Fix it.\n")


def test_hf_batched_decode_matches_full_forward():
    pol, _ = build_policy(SPEC, device=DEVICE, dtype="fp32", seed=0)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (30, 45, 12)]
    comps = [torch.randint(0, 256, (20,), generator=g).tolist() for _ in prompts]
    want = [lp.tolist() for lp, _ in pol.token_logprobs(list(zip(prompts, comps)))]
    be = pol.make_backend(4)
    got = []
    for i, p in enumerate(prompts):
        got.append([torch.log_softmax(be.add(f"s{i}", p), -1)[comps[i][0]].item()])
    assert be.mode == "merge"
    for t in range(19):
        logits = be.step([f"s{i}" for i in range(3)], [comps[i][t] for i in range(3)])
        for i in range(3):
            got[i].append(torch.log_softmax(logits[i], -1)[comps[i][t + 1]].item())
        if t == 5:  # drop a row and add it back (as a weight-update rebuild does)
            be.remove("s1")
            be.add("s1", prompts[1] + comps[1][: t + 1])
    for a, b in zip(got, want):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-4


def test_hf_recurrent_state_dtype_is_honoured():
    for rsd, want in (("fp32", torch.float32), ("model", torch.bfloat16)):
        pol, _ = build_policy(SPEC, device=DEVICE, dtype="bf16", recurrent_state_dtype=rsd, seed=0)
        be = pol.make_backend(1)
        be.add("a", PROMPT)
        be.step(["a"], [65])
        dts = {s.dtype for layer in be.cache.layers for s in getattr(layer, "recurrent_states", {}).values()
               if s is not None}
        assert dts == {want}


def test_hf_servers_train_update_and_span(start_server, tmp_path):
    tr = start_server("floe_engine.trainer_server", "--model", SPEC, "--publish-dir", tmp_path / "pub",
                      "--device", DEVICE, "--dtype", "fp32")
    v0 = tr.ready["path"].rsplit("/", 1)[0]
    eng = start_server("floe_engine.inference_server", "--model", SPEC, "--checkpoint", v0, "--device", DEVICE,
                       "--dtype", "fp32", "--max-batch", 4)
    r = eng.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 12, "n": 3, "seed": 1, "ignore_eos": True})
    cs = r["choices"]
    assert all(len(c["token_ids"]) == 12 for c in cs)
    pairs = [{"prompt_ids": PROMPT, "completion_ids": c["token_ids"]} for c in cs]
    t = tr.post("/logprobs", {"samples": pairs})["logprobs"]
    assert max(abs(a - b) for c, lp in zip(cs, t) for a, b in zip(c["logprobs"]["token_logprobs"], lp)) < 1e-4
    samples = [{"rollout_id": f"r{i}", "group_id": "g", "reward": float(i == 0), "advantage": 1.0 if i == 0 else -1.0,
                "ids": PROMPT + c["token_ids"], "loss_mask": [0] * len(PROMPT) + [1] * len(c["token_ids"]),
                "behaviour_logprobs": [0.0] * len(PROMPT) + c["logprobs"]["token_logprobs"],
                "token_versions": [-1] * len(PROMPT) + c["weight_versions"]} for i, c in enumerate(cs)]
    step = tr.post("/train_step", {"samples": samples, "config": step_config(lr=3e-3)})
    assert step["version"] == 1 and step["metrics"]["mismatch_mean_abs_logprob"] < 1e-4
    after = tr.post("/logprobs", {"samples": pairs})["logprobs"]
    assert sum(after[0]) > sum(t[0]) and sum(after[1]) < sum(t[1])
    # a request spanning the update: tokens after it come from the new weights
    out = {}
    th = threading.Thread(target=lambda: out.update(eng.post("/v1/completions", {
        "prompt": PROMPT, "max_tokens": 300, "seed": 2, "ignore_eos": True})))
    base = eng.metric("floe_engine_generation_tokens_total")
    th.start()
    wait_for(lambda: eng.metric("floe_engine_generation_tokens_total") - base >= 10, interval=0.001)
    eng.post("/pause")
    assert eng.post("/update_weights", {"path": step["path"], "version": 1})["rebuilt_sequences"] == 1
    eng.post("/resume")
    th.join(timeout=120)
    c = out["choices"][0]
    k = c["weight_versions"].index(1)
    toks = c["token_ids"]
    new = tr.post("/logprobs", {"samples": [{"prompt_ids": PROMPT + toks[:k], "completion_ids": toks[k:]}]})
    assert max(abs(a - b) for a, b in zip(new["logprobs"][0], c["logprobs"]["token_logprobs"][k:])) < 1e-4


def test_rope_inverse_frequencies_stay_fp32_in_a_bf16_model():
    """Module.to(bf16) would round inv_freq to 8 mantissa bits (an angle error of up to p * 2^-9
    rad at position p); transformers, vLLM and SGLang keep RoPE in fp32, and so does floe."""
    pol, _ = build_policy(SPEC, device=DEVICE, dtype="bf16", seed=0)
    bufs = {n: b for n, b in pol.module.named_buffers() if n.endswith("inv_freq")}
    assert bufs and all(b.dtype == torch.float32 for b in bufs.values()), {n: b.dtype for n, b in bufs.items()}
    cfg = pol.module.config
    dim = int(cfg.head_dim * cfg.rope_parameters.get("partial_rotary_factor", 1.0))
    want = 1.0 / (cfg.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    assert torch.equal(bufs[next(n for n in bufs if n.endswith(".inv_freq") or n == "inv_freq")].cpu(), want)
    assert all(p.dtype == torch.bfloat16 for p in pol.module.parameters())  # the weights are still bf16


def test_hf_decode_writes_kv_in_place():
    """The full-attention layers' K/V grow inside one buffer: the storage a decode step writes to
    stays the same from token to token (transformers' own DynamicLayer allocates a new tensor per
    token; the negative control below shows it)."""
    from transformers.cache_utils import DynamicLayer

    from floe_engine.hf_model import preallocate_kv

    pol, _ = build_policy(SPEC, device=DEVICE, dtype="fp32", seed=0)
    be = pol.make_backend(2)
    be.add("a", PROMPT)
    be.add("b", PROMPT[:20])
    kv = [layer for layer in be.cache.layers if hasattr(layer, "keys") and isinstance(layer.keys, torch.Tensor)
          and layer.keys.dim() == 4]
    assert kv and all(type(layer).__name__ == "SpareDynamicLayer" for layer in kv)
    be.step(["a", "b"], [65, 66])  # the first step after a merge moves into a buffer
    ptrs = [layer.keys.data_ptr() for layer in kv]
    for t in range(5):
        be.step(["a", "b"], [67 + t, 68 + t])
    assert [layer.keys.data_ptr() for layer in kv] == ptrs
    plain = DynamicLayer()
    plain.update(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    p0 = plain.keys.data_ptr()
    plain.update(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    assert plain.keys.data_ptr() != p0
    assert preallocate_kv(type("C", (), {"layers": [plain]})()) == 1 and type(plain).__name__ == "SpareDynamicLayer"
