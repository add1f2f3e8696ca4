"""What fsdp_step_bench.py measures beside tokens/s: the model FLOPs a train step executes, and
where a step's GPU time goes (the PyTorch profiler).

**Executed FLOPs.** 6·N·tokens counts every parameter once per token and nothing else. A step
executes more: causal attention (per full-attention layer and document of L tokens, QKᵀ and PV
over the L(L+1)/2 causal pairs: 4·heads·head_dim·L(L+1)/2 in the forward), the gated delta rule
of linear-attention layers (an estimate: per token and value head, the chunked rule reads the
state for the output and for the delta, updates it, and attends within its 64-token chunk:
6·dk·dv + 64·(dk + dv)), the head at the trained positions only (2·hidden·vocab each), and,
with activation checkpointing, the blocks' forward once more in the backward. The blocks' linear
layers count 2 FLOPs per weight per token (``nn.Linear`` weights inside the transformer blocks,
read off the model). The backward costs twice the forward. The head is chunked and checkpointed
(``HFPolicy.head_logprobs``), so it is recomputed too. The embedding lookup is no matmul.

**Phases.** ``instrument`` wraps the trainer's micro-batch forward, the blocks' recomputation
(a checkpointed block run while the autograd engine executes a backward), the head, the optimizer
step and the publish in ``torch.profiler.record_function`` ranges; ``phases`` sums the GPU kernel
time of each range from one profiled step (a CPU run: the ranges' host time). The backward is
the kernel time left after the forward, recompute, optimizer and publish (a CPU run: the step's
time, which excludes the publish, left after the forward, recompute and optimizer). Attention and collectives are kernel-name classes
(flash / fmha / varlen / attention; nccl) that cut across the other phases.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn as nn

RANGES = {"forward": "floe.forward", "recompute": "floe.recompute", "head": "floe.head",
          "optimizer": "floe.optimizer", "publish": "floe.publish"}
ATTENTION = re.compile(r"flash|fmha|varlen|attention|attn", re.I)
COLLECTIVE = re.compile(r"nccl", re.I)


def block_linear_weights(blocks: Sequence[nn.Module]) -> int:
    return sum(m.weight.numel() for b in blocks for m in b.modules() if isinstance(m, nn.Linear))


def executed_flops(cfg, blocks: Sequence[nn.Module], doc_lengths: Sequence[int], trained_positions: int,
                   activation_checkpointing: bool) -> Dict[str, float]:
    """FLOPs of one train step over documents of ``doc_lengths`` tokens (forward positions),
    ``trained_positions`` of them scored by the head; ``cfg`` the transformers config."""
    tokens = sum(doc_lengths)
    types = list(getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers)
    n_full = sum(t == "full_attention" for t in types)
    n_linear = len(types) - n_full
    heads, hd = cfg.num_attention_heads, getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    linear_fwd = 2.0 * block_linear_weights(blocks) * tokens
    attn_fwd = n_full * sum(4.0 * heads * hd * L * (L + 1) / 2 for L in doc_lengths)
    gdn_fwd = 0.0
    if n_linear:
        dk, dv, hv = cfg.linear_key_head_dim, cfg.linear_value_head_dim, cfg.linear_num_value_heads
        gdn_fwd = n_linear * tokens * hv * (6.0 * dk * dv + 64.0 * (dk + dv))
    head_fwd = 2.0 * cfg.hidden_size * cfg.vocab_size * trained_positions
    blocks_fwd = linear_fwd + attn_fwd + gdn_fwd
    passes = 4.0 if activation_checkpointing else 3.0  # forward, backward (2x), recompute
    total = passes * blocks_fwd + 4.0 * head_fwd  # the head is chunked and recomputed
    return {"tokens": tokens, "linear_forward": linear_fwd, "attention_forward": attn_fwd,
            "linear_attention_forward": gdn_fwd, "head_forward": head_fwd,
            "recompute": blocks_fwd if activation_checkpointing else 0.0, "total": total,
            "per_token": total / max(1, tokens)}


def instrument(trainer) -> None:
    """Name the phases of ``trainer``'s step for the profiler (record_function ranges; timing is
    unchanged outside a profile)."""
    from torch.profiler import record_function

    def wrap(obj, attr, name):
        inner = getattr(obj, attr)

        def f(*a, **k):
            with record_function(name):
                return inner(*a, **k)
        setattr(obj, attr, f)

    wrap(trainer, "_forward", RANGES["forward"])
    wrap(trainer, "publish", RANGES["publish"])
    wrap(trainer.opt, "clip_and_step", RANGES["optimizer"])
    wrap(trainer.policy, "head_logprobs", RANGES["head"])


def mark_recompute(block_forward):
    """For sharding.checkpoint_activations: ``block_forward`` run inside a backward (the
    recomputation) is named ``floe.recompute``."""
    from torch.profiler import record_function

    def f(*a, **k):
        if torch._C._current_graph_task_id() >= 0:
            with record_function(RANGES["recompute"]):
                return block_forward(*a, **k)
        return block_forward(*a, **k)
    return f


def _cuda(e) -> bool:
    return str(getattr(e, "device_type", "")).endswith("CUDA")


def _dev_us(e, total: bool) -> float:
    names = ("device_time_total", "cuda_time_total") if total else ("self_device_time_total", "self_cuda_time_total")
    for n in names:
        v = getattr(e, n, None)
        if v is not None:
            return float(v)
    return 0.0


def phases(prof, step_s: float) -> Dict[str, Optional[float]]:
    """Seconds of GPU kernel time per phase of the profiled step, from ``prof`` (a finished
    torch.profiler.profile over one step). A range's time is the kernels launched inside it (its
    CPU-side event and descendants); the GPU-side copies of the ranges are not kernels."""
    named = {k: 0.0 for k in RANGES}
    cpu_named = {k: 0.0 for k in RANGES}
    kernels = attention = collectives = 0.0
    by_range = {v: k for k, v in RANGES.items()}
    for e in prof.events():
        if e.name in by_range:
            if not _cuda(e):
                named[by_range[e.name]] += _dev_us(e, total=True) / 1e6
                cpu_named[by_range[e.name]] += float(e.cpu_time_total) / 1e6
            continue
        if not _cuda(e):
            continue
        dt = _dev_us(e, total=False) / 1e6
        kernels += dt
        if ATTENTION.search(e.name):
            attention += dt
        if COLLECTIVE.search(e.name):
            collectives += dt
    if kernels == 0.0:  # no GPU (the CPU smoke run): the ranges' host time instead
        named = cpu_named
    out: Dict[str, Optional[float]] = {k: round(v, 4) for k, v in named.items()}
    out["clock"] = "gpu_kernels" if kernels else "cpu_ranges"
    total = kernels if kernels else step_s
    out["kernels_total"] = round(kernels, 4)
    # the step's GPU kernels include the publish's; its wall time (the CPU fallback) does not
    spent = ("forward", "recompute", "optimizer") + (("publish",) if kernels else ())
    out["backward"] = round(total - sum(named[k] for k in spent), 4)
    out["attention"] = round(attention, 4)
    out["collectives"] = round(collectives, 4)
    out["step_wall"] = round(step_s, 4)
    out["ranges_seen"] = sorted({e.name for e in prof.events() if e.name in by_range})
    return out


def top_kernels(prof, n: int = 12) -> List[dict]:
    rows = []
    for e in prof.key_averages():
        if _cuda(e) and e.key not in RANGES.values():
            rows.append({"kernel": e.key[:120], "s": round(_dev_us(e, total=False) / 1e6, 4), "calls": e.count})
    return sorted(rows, key=lambda r: -r["s"])[:n]
