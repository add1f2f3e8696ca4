"""In-process checks of the pieces the servers are built from."""
import random

import pytest
import torch

from floe_engine import checkpoint as ckpt
from floe_engine import tokenizer
from floe_engine.model import Block, SlotKVCache, TinyConfig, attend_reference, decode, prefill
from floe_engine.policies import build_policy
from floe_engine.sampling import sample
from floe_engine.scoring import batch_logprobs, logprobs
from floe_engine.tiny_policy import TinyPolicy


def test_tokenizer_round_trip():
    text = "def f(x):\n    return x + 1  # ünïcødé ✓"
    ids = tokenizer.encode(text)
    assert all(0 <= i < 256 for i in ids)
    assert tokenizer.decode(ids + [tokenizer.EOS_ID]) == text
    assert tokenizer.decode([0xFF, 0x41]) == "\ufffdA"
    assert tokenizer.to_bytes([65, tokenizer.BOS_ID, 66]) == b"AB"


def test_tiny_config_spec():
    c = TinyConfig.parse("tiny:d=32,layers=1,heads=2,ctx=128")
    assert (c.d_model, c.n_layers, c.n_heads, c.context, c.d_ff) == (32, 1, 2, 128, 128)
    with pytest.raises(ValueError):
        TinyConfig.parse("tiny:nonsense=1")


@pytest.fixture
def engine_threads():
    """Torch's intra-op threads as the engine runs them (``inference_server --threads``, default 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_cached_decode_matches_full_forward_and_shared_logprobs(engine_threads):
    pol = TinyPolicy(TinyConfig(d_model=32, n_layers=2, n_heads=4, context=256, init_std=0.3),
                     torch.device("cpu"), seed=3)
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 256, (40,), generator=g).tolist()
    comp = torch.randint(0, 256, (20,), generator=g).tolist()
    # engine path: prefill + batched decode (two slots, one of them idle in the middle)
    cache = SlotKVCache(pol.module, 3)
    prefill(pol.module, cache, 0, prompt)
    prefill(pol.module, cache, 2, prompt)
    lps = []
    for t in comp:
        logits = decode(pol.module, cache, [0, 2], [t, t])
        lps.append(logits)
    engine_lp = []
    # logits after feeding comp[t] predict comp[t+1]; first prediction comes from the prompt
    first = pol.module(torch.tensor([prompt]))[0, -1]
    allp = [first] + [x[0] for x in lps[:-1]]
    for lg, t in zip(allp, comp):
        engine_lp.append(torch.log_softmax(lg[:259], -1)[t].item())
    trainer_lp = logprobs(pol, prompt, comp)
    assert max(abs(a - b) for a, b in zip(engine_lp, trainer_lp)) < 1e-5
    # rows 0 and 2 saw the same tokens: bit-identical logits (a row's result does not depend on
    # the other rows of the batch; the idle row between them leaks nothing). This holds at the
    # engine's one thread; with more, PyTorch's CPU flash kernel splits rows across threads and
    # they agree to fp32 rounding only (engine/README.md, Limitations)
    assert torch.equal(lps[-1][0], lps[-1][1])
    # grouped scoring (shared prompt) == one-by-one scoring
    pairs = [(prompt, comp), (prompt, comp[:7]), (prompt[:10], comp)]
    together = batch_logprobs(pol, pairs)
    alone = [logprobs(pol, p, c) for p, c in pairs]
    for a, b in zip(together, alone):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5


def test_fused_attention_matches_the_explicit_softmax_with_gradients():
    """Block._attend runs PyTorch's fused kernel; it must equal the explicit softmax (forward and
    backward) for the three masks the tiny model builds: causal after a cached prefix (trainer and
    prefill), one query over slots of different lengths (decode), and packed sequences."""
    torch.manual_seed(0)
    blk = Block(TinyConfig(d_model=32, n_heads=4))
    B, H, D, P, T = 3, 4, 8, 5, 7
    packed = torch.ones(T, T, dtype=torch.bool).triu(1)
    packed[4:, :4] = True  # two sequences packed in one row: the second attends only to itself
    cases = [
        (T, P + T, torch.ones(T, P + T, dtype=torch.bool).triu(P + 1)),
        (1, 9, (torch.arange(9)[None, :] > torch.tensor([8, 3, 0])[:, None])[:, None, None, :]),
        (T, T, packed),
    ]
    for tq, tk, mask in cases:
        q, k, v = (torch.randn(B, H, n, D, requires_grad=True) for n in (tq, tk, tk))
        fused = blk._attend(q, k, v, mask)
        ref = attend_reference(q, k, v, mask).transpose(1, 2).reshape(B, tq, H * D)
        torch.testing.assert_close(fused, ref, atol=1e-6, rtol=1e-5)
        g_fused = torch.autograd.grad(fused.square().sum(), (q, k, v))
        g_ref = torch.autograd.grad(ref.square().sum(), (q, k, v))
        for a, b in zip(g_fused, g_ref):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_sampling_top_p_greedy_and_determinism():
    logits = torch.tensor([[5.0, 4.9, 0.0, -1.0], [0.0, 0.0, 0.0, 9.0]])
    toks, lps = sample(logits, [0.0, 1.0], [1.0, 1.0], [random.Random(1), random.Random(2)])
    assert toks[0] == 0
    assert abs(lps[0] - torch.log_softmax(logits[0], -1)[0].item()) < 1e-6
    # top_p small keeps only the best token
    seen = {sample(logits[:1], [1.0], [0.05], [random.Random(s)])[0][0] for s in range(50)}
    assert seen == {0}
    a = [sample(logits, [1.0, 1.0], [1.0, 1.0], [random.Random(7), random.Random(8)])[0] for _ in range(3)]
    assert a[0] == a[1] == a[2]


def test_checkpoint_round_trip_and_sha(tmp_path):
    pol = TinyPolicy(TinyConfig(d_model=32, n_layers=1, n_heads=2, context=64), torch.device("cpu"), seed=1)
    path = ckpt.publish(pol.state_dict(), str(tmp_path), 3, pol.config_dict())
    assert path.endswith("v3/model.safetensors")
    meta = ckpt.read_meta(path)
    assert meta["version"] == 3 and meta["config"]["kind"] == "tiny" and meta["checksum"] == "xxh3-128"
    assert len(meta["files"]["model.safetensors"]["xxh3_128"]) == 32
    loaded, version = build_policy("tiny", str(tmp_path / "v3"))
    assert version == 3 and loaded.weights_digest() == pol.weights_digest()
    with open(path, "r+b") as f:  # corrupt one byte near the end
        f.seek(-3, 2)
        f.write(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="xxh3-128 .* does not match"):
        ckpt.load(path)


def test_master_weights_optimizer_keeps_bf16_module_in_sync():
    from floe_engine.optimizers import MasterWeightsOptimizer
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4).to(torch.bfloat16)
    opt = MasterWeightsOptimizer(lin.parameters())
    for g in opt.param_groups:
        g["lr"] = 1e-2
    assert opt.mixed and all(m.dtype == torch.float32 for m in opt.master)
    for _ in range(3):
        lin(torch.randn(2, 8, dtype=torch.bfloat16)).float().pow(2).sum().backward()
        norm = opt.clip_and_step(1.0)
        assert norm > 0
    for p, m in zip(lin.parameters(), opt.master):
        assert p.dtype == torch.bfloat16 and torch.equal(p, m.to(torch.bfloat16)) and p.grad is None


def _params_with_grads(seed: int, scale: float = 3.0):
    torch.manual_seed(seed)
    ps = [torch.nn.Parameter(torch.randn(s)) for s in ((64, 32), (32,), (7, 5, 3))]
    for p in ps:
        p.grad = torch.randn_like(p) * scale
    return ps


def test_sharded_optimizer_adamw_is_fused_and_matches_the_loop_over_tensors():
    """ShardedOptimizer's AdamW is PyTorch's fused one on the CPU; three steps give what the
    plain loop-over-tensors AdamW gives, to fp32 rounding."""
    from floe_engine.optimizers import ShardedOptimizer
    ps, ref = _params_with_grads(0, 0.01), _params_with_grads(0, 0.01)
    opt = ShardedOptimizer(ps)
    assert opt.opt.defaults.get("fused") is True
    plain = torch.optim.AdamW(ref, lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1, eps=1e-8, foreach=False)
    for g in opt.param_groups:
        g["lr"], g["weight_decay"] = 1e-2, 0.1
    for step in range(3):
        if step:
            for a, b in zip(ps, ref):
                a.grad = torch.randn_like(a) * 0.01
                b.grad = a.grad.clone()
        assert opt.clip_and_step(100.0) < 100.0  # no clipping
        plain.step()
    for a, b in zip(ps, ref):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-6, atol=1e-7)


def test_sharded_optimizer_clips_by_the_global_norm():
    """The multi-tensor norm is ``clip_grad_norm_``'s, and every gradient is scaled by
    max_norm / norm before the step (SGD, whose step is proportional to the gradient, shows it).
    Control: a max_norm above the norm leaves the gradients as they were."""
    from floe_engine.optimizers import ShardedOptimizer
    want = float(torch.nn.utils.clip_grad_norm_(_params_with_grads(1), float("inf")))
    for max_norm, coef in ((1.0, 1.0 / (want + 1e-6)), (1e9, 1.0)):
        ps, before = _params_with_grads(1), _params_with_grads(1)
        opt = ShardedOptimizer(ps, kind="sgd")
        for g in opt.param_groups:
            g["lr"] = 0.5
        assert opt.clip_and_step(max_norm) == pytest.approx(want, rel=1e-6)
        for a, b in zip(ps, before):
            torch.testing.assert_close(a.detach(), (b - 0.5 * coef * b.grad).detach(), rtol=1e-6, atol=1e-7)
