"""Packed sequences with variable-length attention and no dense mask (floe_engine.packed_attention):
the kernel against a dense block-diagonal mask, and the trainer's packed scoring on a small
Qwen3-shaped model against the old dense-mask path and the padded batch (log-probs within 1e-3
max abs in fp32, gradients within 1e-3 relative; both far tighter in practice), with activation
checkpointing recomputing the blocks. A Qwen3.5-shaped model (gated-delta-net layers) is refused
packing and trains padded."""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from conftest import ENGINE_DIR
from floe_engine import packed_attention
from floe_engine.policies import build_policy
from floe_engine.scoring import full_sequence_logprobs
from floe_engine.sharding import checkpoint_activations, transformer_blocks

QWEN3 = "hf:" + os.path.join(os.path.dirname(ENGINE_DIR), "configs", "models", "qwen3-cpu.json")
QWEN35 = ("hf:qwen3_5_text:hidden_size=64,num_hidden_layers=4,num_attention_heads=2,num_key_value_heads=1,"
          "head_dim=32,intermediate_size=128,linear_num_key_heads=2,linear_num_value_heads=4,linear_key_head_dim=16,"
          "linear_value_head_dim=16,max_position_embeddings=4096,tie_word_embeddings=true")


def dense_reference(q, k, v, lengths, scale):
    """Block-diagonal causal attention through one dense mask (what the old path built)."""
    T = q.shape[2]
    seg = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    idx = torch.arange(T)
    allowed = (seg[:, None] == seg[None, :]) & (idx[None, :] <= idx[:, None])
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale).transpose(1, 2)


def test_kernel_matches_a_dense_block_diagonal_mask():
    g = torch.Generator().manual_seed(0)
    lengths = [7, 1, 12, 5]
    T = sum(lengths)
    q = torch.randn(1, 4, T, 16, generator=g, dtype=torch.float64)
    k = torch.randn(1, 2, T, 16, generator=g, dtype=torch.float64)  # GQA: 2 query heads per KV head
    v = torch.randn(1, 2, T, 16, generator=g, dtype=torch.float64)
    cu = packed_attention.document_kwargs(lengths, torch.device("cpu"))["cu_seq_lens_q"]
    assert cu.tolist() == [0, 7, 8, 20, 25]
    out = packed_attention.packed_attention(q, k, v, cu, max(lengths), scale=0.3)
    ref = dense_reference(q, k, v, lengths, 0.3)
    assert out.shape == (1, T, 4, 16)
    assert float((out - ref).abs().max()) < 1e-10
    # negative control: causal attention over the whole concatenation (documents leak) differs
    leak = dense_reference(q, k, v, [T], 0.3)
    assert float((leak - ref)[:, 7:].abs().max()) > 1e-2


def _policy(spec):
    return build_policy(spec, None, seed=5, device="cpu", for_training=True)[0]


def _rows():
    g = torch.Generator().manual_seed(1)
    rows = []
    for n in (40, 9, 23, 31):
        ids = torch.randint(0, 250, (n,), generator=g).tolist()
        p = max(1, n // 4)
        rows.append((ids, [0] * p + [1] * (n - p)))
    return rows


def _run(spec, rows, packed, dense_mask=False, ckpt=False):
    pol = _policy(spec)
    pol.module.train()
    if ckpt:
        for blk in transformer_blocks(pol):
            checkpoint_activations(blk)
    res = full_sequence_logprobs(pol, rows, entropy=True, packed=packed, dense_mask=dense_mask)
    loss = sum((lp * (i - 1.5)).sum() + 0.1 * ent.sum() for i, (lp, ent) in enumerate(res))
    loss.backward()
    grads = {k: p.grad.clone() for k, p in pol.module.named_parameters() if p.grad is not None}
    return [lp.detach() for lp, _ in res], grads, pol


def _compare(a, b):
    (lpa, ga), (lpb, gb) = a, b
    lp_diff = max(float((x - y).abs().max()) for x, y in zip(lpa, lpb))
    assert ga.keys() == gb.keys() and len(ga) > 0
    rel = max(float((ga[k] - gb[k]).norm() / gb[k].norm().clamp_min(1e-30)) for k in ga)
    return lp_diff, rel


def test_packed_qwen3_matches_the_dense_mask_and_the_padded_batch(monkeypatch):
    rows = _rows()
    calls = {"kernel": 0, "mask": 0}
    kernel, mask = packed_attention.packed_attention, packed_attention._mask

    def counting_kernel(*a, **k):
        calls["kernel"] += 1
        return kernel(*a, **k)

    def counting_mask(*a, **k):
        m = mask(*a, **k)
        calls["mask"] += m is not None
        return m
    monkeypatch.setattr(packed_attention, "packed_attention", counting_kernel)
    monkeypatch.setattr(packed_attention, "_mask", counting_mask)
    packed_attention._registered = False  # register the counting mask function
    try:
        new_lp, new_g, pol = _run(QWEN3, rows, packed=True, ckpt=True)
        assert pol.module.config._attn_implementation == packed_attention.NAME
        # 2 layers forward + 2 recomputed in the backward; no attention mask built
        assert calls == {"kernel": 4, "mask": 0}, calls
        old_lp, old_g, _ = _run(QWEN3, rows, packed=True, dense_mask=True)
        pad_lp, pad_g, _ = _run(QWEN3, rows, packed=False)
    finally:
        packed_attention._registered = False
        packed_attention.register()
    for ref_lp, ref_g in ((old_lp, old_g), (pad_lp, pad_g)):
        lp_diff, rel = _compare((new_lp, new_g), (ref_lp, ref_g))
        assert lp_diff < 1e-3 and rel < 1e-3, (lp_diff, rel)
        assert lp_diff < 1e-5 and rel < 1e-4, (lp_diff, rel)  # fp32: rounding only
    # negative control: the same packed sequence with one document boundary dropped scores differently
    pol = _policy(QWEN3)
    lengths = [len(ids) - 1 for ids, _ in rows]
    inp = torch.tensor([[t for ids, _ in rows for t in ids[:-1]]])
    pos = torch.cat([torch.arange(n) for n in lengths])[None]
    with torch.no_grad(), packed_attention.packed_forward():
        packed_attention.enable(pol.module)
        good, _ = pol.forward_hidden(inp, use_cache=False, position_ids=pos,
                                     **packed_attention.document_kwargs(lengths, torch.device("cpu")))
        merged = [lengths[0] + lengths[1]] + lengths[2:]
        bad, _ = pol.forward_hidden(inp, use_cache=False, position_ids=pos,
                                    **packed_attention.document_kwargs(merged, torch.device("cpu")))
    assert float((good - bad)[0, lengths[0]:lengths[0] + lengths[1]].abs().max()) > 1e-3
    # outside a packed forward the model is sdpa: a plain padded score equals a fresh sdpa model's
    with torch.no_grad():
        a, _ = pol.forward_hidden(inp[:, :30], use_cache=False)
        b, _ = _policy(QWEN3).forward_hidden(inp[:, :30], use_cache=False)
    assert float((a - b).abs().max()) < 1e-6


def test_qwen35_is_refused_packing_and_trains_padded():
    pol = _policy(QWEN35)
    assert not packed_attention.packable(pol)
    assert packed_attention.packable(_policy(QWEN3))
    with pytest.raises(ValueError, match="linear_attention"):
        full_sequence_logprobs(pol, _rows(), packed=True)


def test_attention_backend_choice():
    """cuDNN first only on CUDA (auto: Hopper; cudnn: asked for); the CPU keeps PyTorch's order and
    the per-document kernel; an unknown name is refused; the context restores the packed kernel
    choice it set."""
    cpu = torch.device("cpu")
    for backend in packed_attention.BACKENDS:
        assert packed_attention.cudnn_preferred(cpu, backend) is False
        assert packed_attention.kernel_name(cpu, torch.bfloat16, backend) == "sdpa_per_document"
    with pytest.raises(ValueError, match="unknown attention backend 'fa3'"):
        packed_attention.cudnn_preferred(cpu, "fa3")
    with packed_attention.sdpa_preference(cpu, "flash"):
        assert packed_attention._backend["name"] == "flash"
        with packed_attention.sdpa_preference(cpu, "cudnn"):
            assert packed_attention._backend["name"] == "cudnn"
        assert packed_attention._backend["name"] == "flash"
    assert packed_attention._backend["name"] == "auto"


def test_attention_runs_outside_compiled_blocks():
    """A compiled block breaks its graph at the attention call, so the SDPA kernel is chosen when
    it runs (``sdpa_preference``), not fixed when the graph was traced."""
    import torch._dynamo as dynamo
    q = k = v = torch.randn(1, 2, 6, 8)

    def f(x):
        return packed_attention._attention_forward(None, x * 2, k, v, None)[0].sum()
    explain = dynamo.explain(f)(q)
    assert explain.graph_break_count >= 1

    def control(x):
        return F.scaled_dot_product_attention(x * 2, k, v, is_causal=True).sum()
    assert dynamo.explain(control)(q).graph_break_count == 0
