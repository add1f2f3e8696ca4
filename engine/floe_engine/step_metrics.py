"""Throughput and memory numbers of one train step: tokens/s, peak memory per rank, MFU.

MFU (model FLOPs utilisation) is the usual dense estimate, ``6 * N * tokens / (seconds *
peak_flops * world_size)``: N = every parameter of the model (tied embeddings counted once,
attention's sequence-length term left out, so it slightly under-counts long sequences), tokens
= the positions the forward ran over (``len(ids) - 1`` per sample, times the epochs). It is
reported on CUDA only, against the device's dense bf16 peak: a table by device name, or the
trainer's ``--peak-tflops`` for a device the table lacks (None when neither knows it).
"""
from __future__ import annotations

import resource
import sys
from typing import Optional

import torch

# dense (no sparsity) bf16 peak, FLOP/s per device, from the vendors' data sheets
PEAK_BF16_FLOPS = {
    "H200": 989e12,
    "H100": 989e12,   # SXM; the PCIe card is lower: pass --peak-tflops 756
    "H800": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "B200": 2250e12,
}


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_bytes(device: torch.device) -> int:
    """CUDA: ``max_memory_allocated`` since the last reset (this step). CPU: the process's peak
    resident set size so far (``ru_maxrss``; it is never reset, so it is a high-water mark)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # Linux reports KiB, macOS bytes


def peak_flops(device: torch.device, override_tflops: Optional[float] = None) -> Optional[float]:
    """Peak dense bf16 FLOP/s of one ``device``: ``override_tflops`` * 1e12 when given, else the
    table entry whose name is in the CUDA device name; None on CPU or for an unknown device."""
    if override_tflops:
        return float(override_tflops) * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device).upper()
    for key, flops in PEAK_BF16_FLOPS.items():
        if key in name:
            return flops
    return None


def mfu(n_params: int, tokens: int, seconds: float, peak: Optional[float], world_size: int = 1) -> Optional[float]:
    if not peak or seconds <= 0:
        return None
    return 6.0 * n_params * tokens / (seconds * peak * world_size)


def step_perf(device: torch.device, n_params: int, tokens: int, seconds: float, world_size: int,
              peak_per_rank, peak_tflops: Optional[float] = None) -> dict:
    """The step's added metrics; ``peak_per_rank``: each rank's peak memory in bytes."""
    peak = peak_flops(device, peak_tflops)
    m = mfu(n_params, tokens, seconds, peak, world_size)
    return {"world_size": int(world_size), "forward_tokens": int(tokens),
            "tokens_per_s": round(tokens / seconds, 2) if seconds > 0 else None,
            "peak_memory_bytes": int(max(peak_per_rank)), "peak_memory_bytes_per_rank": [int(x) for x in peak_per_rank],
            "peak_memory_kind": "cuda_max_allocated" if device.type == "cuda" else "cpu_max_rss",
            "mfu": round(m, 5) if m is not None else None}
