"""The chunked gated delta rule of Qwen3.5's (and Qwen3-Next's) gated-delta-net layers, as floe
trains it: transformers' torch reference (``torch_chunk_gated_delta_rule`` in
models/qwen3_5/modeling_qwen3_5.py) with the same arithmetic, recurrent state in fp32, and two
changes that matter at long context:

* the scan over chunks appends each chunk's output to a list and concatenates once. The
  reference writes each chunk into a preallocated output (``core_attn_out[:, :, i] = ...``);
  autograd's backward of every such in-place slice write handles the whole output's gradient,
  so a 32k-token layer (512 chunks of 64) moves 512 copies of a [heads, 32k, 128] fp32 tensor;
* on CUDA the scan's step (read the state, correct the values, write the output, update the
  state) is one ``torch.compile``d function, compiled once for its shapes and called for every
  chunk, so its few small matmuls and elementwise ops run as a handful of fused kernels forward
  and backward instead of a dozen launches each (``FLOE_GDN_COMPILE=0`` turns it off).

flash-linear-attention's Triton kernels would be faster still, but their backward refuses the
GPU machine's Triton 3.6 on Hopper (docs/results.md, "GPU benchmarks"). ``install`` makes a
transformers model's gated-delta-net layers call this function (trainer side; the one-token
decode keeps transformers' recurrent kernel).
"""
from __future__ import annotations

import os
import sys
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

_compiled = None


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _step(q_i, k_i, kcd_i, nv_i, intra_i, decay_i, state):
    """One chunk of the scan: its output and the state after it (all fp32)."""
    v_new = nv_i - kcd_i @ state
    out = q_i @ state + intra_i @ v_new
    return out, state * decay_i + k_i.transpose(-1, -2) @ v_new


def _step_fn(device: torch.device):
    global _compiled
    if device.type != "cuda" or os.environ.get("FLOE_GDN_COMPILE", "1") == "0":
        return _step
    if _compiled is None:
        _compiled = torch.compile(_step, dynamic=False, fullgraph=True)
    return _compiled


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
    chunk_decay = cum[..., -1].exp()[..., None, None]
    step = _step_fn(query.device)
    outs = []
    for i in range(n):
        o, state = step(query[:, :, i], key[:, :, i], k_cumdecay[:, :, i], new_values[:, :, i], intra[:, :, i],
                        chunk_decay[:, :, i], state)
        outs.append(o)
    out = torch.stack(outs, dim=2).reshape(B, hv, -1, dv)[:, :, :T]
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
            mod._floe_reference_chunk_gated_delta_rule = mod.torch_chunk_gated_delta_rule
            mod.torch_chunk_gated_delta_rule = chunk_gated_delta_rule
    return n
