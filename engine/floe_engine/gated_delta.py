"""The chunked gated delta rule of Qwen3.5's (and Qwen3-Next's) gated-delta-net layers, as floe
trains it: transformers' torch reference (``torch_chunk_gated_delta_rule`` in
models/qwen3_5/modeling_qwen3_5.py) with the same arithmetic and the recurrent state in fp32, and
one change that matters at long context:

* the scan over chunks is one autograd function (``_Scan``) with a hand-written backward: only
  the state recurrence (two small matmuls a chunk) runs in a Python loop, forward and backward,
  and every other product is one batched matmul over all chunks. Through autograd, the
  reference's loop records a dozen nodes a chunk and its backward of every in-place slice write
  (``core_attn_out[:, :, i] = ...``) moves the whole output's gradient, 512 times at 32k tokens.

flash-linear-attention's Triton kernels would be faster still, but their backward refuses the
GPU machine's Triton 3.6 on Hopper (docs/results.md, "GPU benchmarks"). ``install`` makes a
transformers model's gated-delta-net layers call this function (trainer side; the one-token
decode keeps transformers' recurrent kernel).
"""
from __future__ import annotations

import sys
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


class _Scan(torch.autograd.Function):
    """The sequential part of the chunked rule, with a hand-written backward.

    Per chunk i (all fp32): ``v_i = nv_i - kcd_i @ S_i`` (the values corrected by the state) and
    ``S_{i+1} = S_i * d_i + k_i^T @ v_i``; the output ``o_i = q_i @ S_i + intra_i @ v_i`` needs
    only the states and corrected values, so it is one batched matmul over every chunk after the
    loop. The loop keeps two small matmuls a chunk. Backward runs the same recurrence in reverse
    (``dv_i = intra_i^T dO_i + k_i dS_{i+1}``, ``dS_i = q_i^T dO_i + d_i dS_{i+1} - kcd_i^T dv_i``)
    and every other gradient is again one batched matmul over all chunks. Autograd through a
    Python loop instead records a dozen nodes a chunk (6,000 at 32k tokens) and walks them one by
    one on the way back. Memory: the states of every chunk ([B, H, n, dk, dv] fp32) are kept for
    backward, as flash-linear-attention's chunked kernels keep theirs."""

    @staticmethod
    def forward(ctx, q, k, kcd, nv, intra, decay, state):
        B, H, n, C, dk = q.shape
        dv = nv.shape[-1]
        # chunk-major with the heads folded ([n, B*H, ...]): a chunk's slice is contiguous, so each
        # step is three kernels writing into preallocated buffers
        q, k, kcd, nv, intra = (_chunk_major(x) for x in (q, k, kcd, nv, intra))
        decay = decay.permute(2, 0, 1).reshape(n, B * H, 1, 1)
        states = q.new_empty(n + 1, B * H, dk, dv)  # states[i]: before chunk i
        states[0] = state.reshape(B * H, dk, dv)
        values = torch.empty_like(nv)
        for i in range(n):
            torch.baddbmm(nv[i], kcd[i], states[i], alpha=-1, out=values[i])
            torch.mul(states[i], decay[i], out=states[i + 1])
            states[i + 1].baddbmm_(k[i].transpose(1, 2), values[i])
        out = torch.baddbmm(intra.flatten(0, 1) @ values.flatten(0, 1), q.flatten(0, 1), states[:n].flatten(0, 1))
        ctx.save_for_backward(q, k, kcd, intra, decay, states, values)
        return _batch_major(out.view(n, B * H, C, dv), B, H), states[n].reshape(B, H, dk, dv).clone()

    @staticmethod
    def backward(ctx, d_out, d_final):
        q, k, kcd, intra, decay, states, values = ctx.saved_tensors
        n, BH, C, dk = q.shape
        B, H = d_out.shape[:2]
        dv = values.shape[-1]
        d_out = _chunk_major(d_out)
        d_values = intra.transpose(-1, -2) @ d_out  # the direct part; the loop adds the state's
        ds_direct = q.transpose(-1, -2) @ d_out
        d_states = torch.empty_like(states)  # d_states[i]: the gradient of states[i]
        d_states[n] = 0 if d_final is None else d_final.to(torch.float32).reshape(BH, dk, dv)
        for i in range(n - 1, -1, -1):
            g = d_states[i + 1]
            d_values[i].baddbmm_(k[i], g)
            torch.addcmul(ds_direct[i], g, decay[i], out=d_states[i])
            d_states[i].baddbmm_(kcd[i].transpose(1, 2), d_values[i], alpha=-1)
        before, after = states[:n], d_states[1:]
        dq = d_out @ before.transpose(-1, -2)
        dkey = values @ after.transpose(-1, -2)
        dkcd = -(d_values @ before.transpose(-1, -2))
        dintra = d_out @ values.transpose(-1, -2)
        ddecay = (before * after).sum(dim=(-1, -2)).view(n, B, H).permute(1, 2, 0)
        return (*(_batch_major(x, B, H) for x in (dq, dkey, dkcd, d_values, dintra)), ddecay,
                d_states[0].view(B, H, dk, dv))


def _chunk_major(x: torch.Tensor) -> torch.Tensor:
    """[B, H, n, r, c] -> [n, B*H, r, c], contiguous."""
    B, H, n, r, c = x.shape
    return x.permute(2, 0, 1, 3, 4).reshape(n, B * H, r, c).contiguous()


def _batch_major(x: torch.Tensor, B: int, H: int) -> torch.Tensor:
    """[n, B*H, r, c] -> [B, H, n, r, c] (a view)."""
    n, _, r, c = x.shape
    return x.view(n, B, H, r, c).permute(1, 2, 0, 3, 4)


def chunk_gated_delta_rule(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, g: torch.Tensor,
                           beta: torch.Tensor, chunk_size: int = 64, initial_state: Optional[torch.Tensor] = None,
                           output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                           cu_seqlens: Optional[torch.Tensor] = None, **kwargs
                           ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Same arguments and result as transformers' ``torch_chunk_gated_delta_rule``: query/key
    [B, T, Hk, dk], value [B, T, Hv, dv], g (log decay) and beta [B, T, Hv] -> output
    [B, T, Hv, dv] in the query's dtype, and the final state [B, Hv, dk, dv] (fp32) if asked."""
    if cu_seqlens is not None:
        raise ValueError("floe's chunked gated delta rule runs one sequence per row (no cu_seqlens): "
                         "models with linear-attention layers train on padded micro-batches")
    initial_dtype = query.dtype
    B, T, hk, dk = key.shape
    hv, dv = value.shape[-2:]
    if hk != hv:
        query = query.repeat_interleave(hv // hk, dim=2)
        key = key.repeat_interleave(hv // hk, dim=2)
    query, key, value, beta, decay = [x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
                                      for x in (query, key, value, beta, g)]
    if use_qk_l2norm_in_kernel:
        query, key = _l2norm(query), _l2norm(key)
    query = query * query.shape[-1] ** -0.5
    C = chunk_size
    pad = (C - T % C) % C
    query, key, value = (F.pad(x, (0, 0, 0, pad)) for x in (query, key, value))
    beta, decay = (F.pad(x, (0, pad)) for x in (beta, decay))
    n = (T + pad) // C
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, k_beta, v_beta = [x.reshape(B, hv, n, C, x.shape[-1]) for x in (query, key, k_beta, v_beta)]
    decay = decay.reshape(B, hv, n, C)
    upper = torch.ones(C, C, dtype=torch.bool, device=query.device).triu(1)
    cum = decay.cumsum(dim=3)
    pair = (cum.unsqueeze(4) - cum.unsqueeze(3)).masked_fill(upper, float("-inf")).exp()
    ut = (k_beta @ key.transpose(-1, -2)) * pair
    intra = (query @ key.transpose(-1, -2)) * pair
    new_values = torch.linalg.solve_triangular(ut, v_beta, upper=False, unitriangular=True)
    k_cumdecay = torch.linalg.solve_triangular(ut, k_beta * cum.exp().unsqueeze(-1), upper=False, unitriangular=True)
    state = (torch.zeros(B, hv, dk, dv, dtype=torch.float32, device=query.device) if initial_state is None
             else initial_state.to(torch.float32))
    query = query * cum.exp().unsqueeze(-1)
    key = key * (cum[..., -1:] - cum).exp().unsqueeze(-1)
    chunk_decay = cum[..., -1].exp()
    out, state = _Scan.apply(query, key, k_cumdecay, new_values, intra, chunk_decay, state)
    out = out.reshape(B, hv, -1, dv)[:, :, :T]
    out = out.transpose(1, 2).to(initial_dtype, memory_format=torch.contiguous_format)
    return out, (state if output_final_state else None)


def use(module, floe: bool = True) -> int:
    """``install`` (``floe``) or put transformers' reference kernel back (benchmarks compare the
    two on one model); returns the number of gated-delta-net layers."""
    if floe:
        return install(module)
    n = 0
    for m in module.modules():
        if type(m).__name__.endswith("GatedDeltaNet"):
            n += 1
            mod = sys.modules[type(m).__module__]
            ref = getattr(mod, "_floe_reference_torch_chunk_gated_delta_rule", None)
            if ref is not None:
                mod.torch_chunk_gated_delta_rule = ref
                if hasattr(m, "chunk_gated_delta_rule"):
                    m.chunk_gated_delta_rule = ref
    return n


def install(module) -> int:
    """Make the gated-delta-net layers of the transformers model ``module`` run
    ``chunk_gated_delta_rule``; returns how many layers it found. Covers both ways transformers
    5.x calls the kernel: a per-layer attribute set at construction, or the modeling module's
    global function."""
    n = 0
    for m in module.modules():
        if not type(m).__name__.endswith("GatedDeltaNet"):
            continue
        n += 1
        if hasattr(m, "chunk_gated_delta_rule"):
            m.chunk_gated_delta_rule = chunk_gated_delta_rule
        mod = sys.modules[type(m).__module__]
        if getattr(mod, "torch_chunk_gated_delta_rule", None) not in (None, chunk_gated_delta_rule):
            mod._floe_reference_torch_chunk_gated_delta_rule = mod.torch_chunk_gated_delta_rule
            mod.torch_chunk_gated_delta_rule = chunk_gated_delta_rule
    return n
