"""The chunked gated delta rule of Qwen3.5's (and Qwen3-Next's) gated-delta-net layers, as floe
trains it: transformers' torch reference (``torch_chunk_gated_delta_rule`` in
models/qwen3_5/modeling_qwen3_5.py) with the same arithmetic and the recurrent state in fp32, and
one change that matters at long context:

* the scan over chunks is not a loop of 512 chunk steps (at 32k tokens) under autograd. The state
  after each chunk follows a linear recurrence, ``S_{i+1} = A_i S_i + b_i`` with
  ``A_i = d_i I - k_i^T kcd_i`` and ``b_i = k_i^T nv_i``; ``_linear_scan`` computes all of its
  states in about 2·sqrt(n) sequential batched matmuls (blocks run side by side, then the block
  starts are chained), ``_LinearScan`` gives it a backward of the same shape, and everything
  else (the corrected values, the output) is one batched matmul over all chunks. The reference's
  Python loop records a dozen autograd nodes a chunk, and its backward of every in-place slice
  write (``core_attn_out[:, :, i] = ...``) moves the whole output's gradient, 512 times at 32k.

flash-linear-attention's Triton kernels would be faster still, but their backward refuses the
GPU machine's Triton 3.6 on Hopper (docs/results.md, "GPU benchmarks"). ``install`` makes a
transformers model's gated-delta-net layers call this function (trainer side; the one-token
decode keeps transformers' recurrent kernel).
"""
from __future__ import annotations

import math
import sys
from typing import Optional, Tuple

import torch
import torch.nn.functional as F


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _linear_scan(A: torch.Tensor, b: torch.Tensor, s0: torch.Tensor) -> torch.Tensor:
    """Every state of the linear recurrence ``S_{i+1} = A_i @ S_i + b_i`` from ``S_0 = s0``:
    A [n, M, d, d], b [n, M, d, e], s0 [M, d, e] -> [n + 1, M, d, e] (fp32).

    Blocked, so that a sequence of n steps takes about 2·sqrt(n) sequential batched matmuls
    rather than n: the steps are cut into m blocks of L; (1) every block runs its L steps at once
    (batched over blocks) from a zero state, keeping the partial states X and the products P of
    its A's; (2) the m block-start states are chained one block at a time (``T_{b+1} = P_b T_b +
    X_b``); (3) each state is ``X + P @ T`` of its block, one batched matmul. At 32k tokens (512
    chunks) that is 23 + 22 steps instead of 512, for about four times the arithmetic of the plain
    loop, all of it in large batched matmuls."""
    n, M, d, e = b.shape
    L = max(1, math.isqrt(n - 1) + 1) if n > 1 else 1
    m = -(-n // L)
    pad = m * L - n
    eye = torch.eye(d, dtype=A.dtype, device=A.device)
    if pad:  # identity steps keep the state: the padded tail changes nothing
        A = torch.cat([A, eye.expand(pad, M, d, d)])
        b = torch.cat([b, b.new_zeros(pad, M, d, e)])
    # step-in-block major, [L, m*M, ...]: step j of every block is one contiguous batch
    A = A.reshape(m, L, M, d, d).transpose(0, 1).reshape(L, m * M, d, d)
    b = b.reshape(m, L, M, d, e).transpose(0, 1).reshape(L, m * M, d, e)
    X = A.new_empty(L + 1, m * M, d, e)
    P = A.new_empty(L + 1, m * M, d, d)
    X[0] = 0
    P[0] = eye
    for j in range(L):
        torch.baddbmm(b[j], A[j], X[j], out=X[j + 1])
        torch.bmm(A[j], P[j], out=P[j + 1])
    X = X.view(L + 1, m, M, d, e)
    P = P.view(L + 1, m, M, d, d)
    T = A.new_empty(m + 1, M, d, e)
    T[0] = s0
    for blk in range(m):
        torch.baddbmm(X[L, blk], P[L, blk], T[blk], out=T[blk + 1])
    S = torch.baddbmm(X[:L].flatten(0, 2), P[:L].flatten(0, 2), T[:m].expand(L, m, M, d, e).flatten(0, 2))
    S = S.view(L, m, M, d, e).transpose(0, 1).reshape(m * L, M, d, e)[:n]
    return torch.cat([S, T[m:]])


class _LinearScan(torch.autograd.Function):
    """``_linear_scan`` with its backward: the gradient flows back through the same recurrence
    reversed and transposed (``G_i = dS_i + A_i^T G_{i+1}``, itself a ``_linear_scan``), then
    ``dA_i = G_{i+1} S_i^T`` and ``db_i = G_{i+1}`` are batched over all steps."""

    @staticmethod
    def forward(ctx, A, b, s0):
        states = _linear_scan(A, b, s0)
        ctx.save_for_backward(A, states)
        return states

    @staticmethod
    def backward(ctx, d_states):
        A, states = ctx.saved_tensors
        n = A.shape[0]
        d_states = d_states.contiguous()
        G = _linear_scan(A.flip(0).transpose(-1, -2), d_states[:n].flip(0), d_states[n]).flip(0)
        after = G[1:]
        return after @ states[:n].transpose(-1, -2), after, G[0]


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
    # the state after chunk i: S_{i+1} = A_i S_i + b_i, with A_i = d_i I - k_i^T kcd_i, b_i = k_i^T nv_i
    eye = torch.eye(dk, dtype=torch.float32, device=query.device)
    trans = chunk_decay[..., None, None] * eye - key.transpose(-1, -2) @ k_cumdecay
    inflow = key.transpose(-1, -2) @ new_values
    states = _LinearScan.apply(_chunk_major(trans), _chunk_major(inflow), state.reshape(B * hv, dk, dv))
    before = _batch_major(states[:n], B, hv)
    values = new_values - k_cumdecay @ before
    out = query @ before + intra @ values
    state = states[n].view(B, hv, dk, dv)
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
