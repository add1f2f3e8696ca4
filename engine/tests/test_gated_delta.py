"""floe's chunked gated delta rule (floe_engine.gated_delta) against transformers' torch
references: the per-token recurrence (a different algorithm: the rule's definition) and the
chunked reference, outputs and gradients in float64; and a small Qwen3.5-shaped model trained
through it against the same model on transformers' kernels (log-probs within 1e-3 max abs and
gradients within 1e-3 relative, fp32)."""
from __future__ import annotations

import sys

import pytest
import torch

from floe_engine import gated_delta
from floe_engine.policies import build_policy
from floe_engine.scoring import full_sequence_logprobs
from floe_engine.sharding import checkpoint_activations, transformer_blocks

QWEN35 = ("hf:qwen3_5_text:hidden_size=64,num_hidden_layers=4,num_attention_heads=2,num_key_value_heads=1,"
          "head_dim=32,intermediate_size=128,linear_num_key_heads=2,linear_num_value_heads=4,linear_key_head_dim=16,"
          "linear_value_head_dim=16,max_position_embeddings=4096,tie_word_embeddings=true")


def _modeling():
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    return m


def _reference(name):
    m = _modeling()
    return getattr(m, "_floe_reference_" + name, None) or getattr(m, name)


def _inputs(T, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    B, hk, hv, dk, dv = 2, 2, 4, 8, 6
    q = torch.randn(B, T, hk, dk, generator=g, dtype=dtype)
    k = torch.randn(B, T, hk, dk, generator=g, dtype=dtype)
    v = torch.randn(B, T, hv, dv, generator=g, dtype=dtype)
    gl = -torch.rand(B, T, hv, generator=g, dtype=dtype) * 0.5  # log decay <= 0
    beta = torch.rand(B, T, hv, generator=g, dtype=dtype)
    s0 = torch.randn(B, hv, dk, dv, generator=g, dtype=dtype) * 0.1
    return [x.requires_grad_() for x in (q, k, v, gl, beta, s0)]


def _grads(fn, xs, **kw):
    out, state = fn(*xs[:5], initial_state=xs[5], output_final_state=True, use_qk_l2norm_in_kernel=True, **kw)
    w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
    ((out * w).sum() + state.float().sum() * 0.3).backward()
    return out.detach(), state.detach(), [x.grad.clone() for x in xs]


@pytest.mark.parametrize("T,chunk", [(150, 64), (64, 64), (37, 16)])
def test_matches_the_per_token_recurrence_and_the_chunked_reference(monkeypatch, T, chunk):
    # the references (and floe's function) upcast to fp32: compare all three at fp32 accuracy
    rec = _reference("torch_recurrent_gated_delta_rule")
    ref = _reference("torch_chunk_gated_delta_rule")
    o_new, s_new, g_new = _grads(gated_delta.chunk_gated_delta_rule, _inputs(T, 1), chunk_size=chunk)
    o_rec, s_rec, g_rec = _grads(rec, _inputs(T, 1))
    o_ref, s_ref, g_ref = _grads(ref, _inputs(T, 1), chunk_size=chunk)
    for o, s, gr in ((o_rec, s_rec, g_rec), (o_ref, s_ref, g_ref)):
        assert float((o_new - o).abs().max()) < 1e-4
        assert float((s_new - s.to(s_new.dtype)).abs().max()) < 1e-4
        for a, b in zip(g_new, gr):
            assert float((a - b).norm() / b.norm()) < 1e-4
    assert s_new.dtype == torch.float32  # the recurrent state is fp32
    # negative control: dropping the state carried between chunks changes the output after the first chunk
    if T > chunk:
        xs = _inputs(T, 1)
        with torch.no_grad():
            o0, _ = gated_delta.chunk_gated_delta_rule(*xs[:5], chunk_size=chunk, use_qk_l2norm_in_kernel=True)
            cut, _ = gated_delta.chunk_gated_delta_rule(*[x[:, chunk:] for x in xs[:5]], chunk_size=chunk,
                                                        use_qk_l2norm_in_kernel=True)
        assert float((o0[:, chunk:] - cut).abs().max()) > 1e-3


@pytest.mark.parametrize("n", [1, 2, 7, 16, 17, 100])
def test_blocked_linear_scan_matches_the_step_by_step_recurrence(n):
    g = torch.Generator().manual_seed(n)
    M, d, e = 3, 5, 4
    A = (torch.randn(n, M, d, d, generator=g, dtype=torch.float64) * 0.4).requires_grad_()
    b = torch.randn(n, M, d, e, generator=g, dtype=torch.float64).requires_grad_()
    s0 = torch.randn(M, d, e, generator=g, dtype=torch.float64).requires_grad_()
    w = torch.randn(n + 1, M, d, e, generator=g, dtype=torch.float64)

    def loop(A, b, s0):
        out = [s0]
        for i in range(n):
            out.append(A[i] @ out[-1] + b[i])
        return torch.stack(out)
    want = loop(A, b, s0)
    got = gated_delta._LinearScan.apply(A, b, s0)
    assert float((got - want).detach().abs().max()) < 1e-10
    gw = torch.autograd.grad((want * w).sum(), (A, b, s0))
    gg = torch.autograd.grad((got * w).sum(), (A, b, s0))
    for x, y in zip(gg, gw):
        assert float((x - y).abs().max()) < 1e-10
    # negative control: one step's transition left out changes every later state
    if n > 1:
        A2 = A.detach().clone()
        A2[n // 2] = 0
        assert float((gated_delta._linear_scan(A2, b.detach(), s0.detach()) - want.detach()).abs().max()) > 1e-3


def test_use_switches_between_floe_and_the_reference_kernel():
    # benchmarks compare the two kernels on one model: use(False) must put transformers' kernel
    # back on every layer, and use(True) floe's again
    m = _modeling()
    saved = m.torch_chunk_gated_delta_rule
    try:
        pol = build_policy(QWEN35, None, seed=4, device="cpu", for_training=True)[0]
        layers = [x for x in pol.module.modules() if type(x).__name__.endswith("GatedDeltaNet")]
        kernels = lambda: {getattr(x, "chunk_gated_delta_rule", m.torch_chunk_gated_delta_rule) for x in layers}  # noqa: E731
        assert gated_delta.use(pol.module, True) == 3
        assert kernels() == {gated_delta.chunk_gated_delta_rule}
        assert gated_delta.use(pol.module, False) == 3
        (ref,) = kernels()
        assert ref is not gated_delta.chunk_gated_delta_rule and ref.__module__ == m.__name__
        gated_delta.use(pol.module, True)
        assert kernels() == {gated_delta.chunk_gated_delta_rule}
    finally:
        m.torch_chunk_gated_delta_rule = saved


def test_refuses_packed_sequences():
    xs = _inputs(8, 2)
    with pytest.raises(ValueError, match="padded micro-batches"):
        gated_delta.chunk_gated_delta_rule(*xs[:5], cu_seqlens=torch.tensor([0, 4, 8]))


def test_qwen35_model_through_floe_kernel_matches_transformers_kernel():
    g = torch.Generator().manual_seed(3)
    rows = []
    for n in (150, 90, 33):
        ids = torch.randint(0, 250, (n,), generator=g).tolist()
        rows.append((ids, [0] * (n // 4) + [1] * (n - n // 4)))
    m = _modeling()
    saved = m.torch_chunk_gated_delta_rule
    out = {}
    try:
        for floe in (False, True):
            if not floe and hasattr(m, "_floe_reference_torch_chunk_gated_delta_rule"):
                m.torch_chunk_gated_delta_rule = m._floe_reference_torch_chunk_gated_delta_rule
            pol = build_policy(QWEN35, None, seed=4, device="cpu", for_training=True)[0]
            calls = [0]
            if floe:
                assert gated_delta.install(pol.module) == 3  # 3 of 4 layers are gated delta nets
                inner = m.torch_chunk_gated_delta_rule
                assert inner is gated_delta.chunk_gated_delta_rule

                def counting(*a, **k):
                    calls[0] += 1
                    return inner(*a, **k)
                m.torch_chunk_gated_delta_rule = counting
                for layer in pol.module.modules():
                    if hasattr(layer, "chunk_gated_delta_rule"):
                        layer.chunk_gated_delta_rule = counting
            for blk in transformer_blocks(pol):
                checkpoint_activations(blk)
            res = full_sequence_logprobs(pol, rows, entropy=False, packed=False)
            sum((lp * (i - 0.7)).sum() for i, (lp, _) in enumerate(res)).backward()
            out[floe] = ([lp.detach() for lp, _ in res],
                         {k: p.grad.clone() for k, p in pol.module.named_parameters() if p.grad is not None})
            if floe:
                assert calls[0] == 6  # 3 layers forward + 3 recomputed in the backward
    finally:
        m.torch_chunk_gated_delta_rule = saved
    (lp0, g0), (lp1, g1) = out[False], out[True]
    assert max(float((a - b).abs().max()) for a, b in zip(lp0, lp1)) < 1e-3
    assert g0.keys() == g1.keys() and any("linear_attn" in k for k in g0)
    worst = max(float((g1[k] - g0[k]).norm() / g0[k].norm().clamp_min(1e-30)) for k in g0)
    assert worst < 1e-3, worst
    assert "transformers" in sys.modules
