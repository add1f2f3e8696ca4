"""glibc malloc settings the engine and trainer set for themselves, at import (``floe_engine``).

glibc serves every allocation above its mmap threshold (128 KiB at start, raised only as such
blocks are freed) with a fresh ``mmap``: zero-filled pages faulted in on first touch, and
``munmap``-ed again on free. A CPU decode step allocates and frees tensors of that size per
layer per token (the growing key/value cache of transformers' ``DynamicCache`` is a ``torch.cat``
per token; activations, logits), so it spent most of its time in page faults (issue 42: a
one-token forward of SmolLM2-135M took 270 ms, 95 ms with the threshold raised). With the
threshold fixed at glibc's maximum (32 MiB on 64-bit) and a trim threshold above it, those
blocks come from the heap and are reused warm. ``bench/engine/cpu_speed.py`` measures both.

``FLOE_ENGINE_MALLOC=default`` leaves glibc's settings alone; a ``MALLOC_MMAP_THRESHOLD_`` in
the environment (glibc's own variable) wins as well. Not glibc (musl, macOS): nothing to do.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # mallopt parameters, <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD

state = "not set"  # what ``tune`` did, for the servers' ready line and the bench


def tune() -> str:
    """Raise glibc's mmap and trim thresholds in this process; returns what was done."""
    global state
    if os.environ.get("FLOE_ENGINE_MALLOC", "tuned") == "default":
        state = "default (FLOE_ENGINE_MALLOC=default)"
    elif "MALLOC_MMAP_THRESHOLD_" in os.environ:
        state = "from MALLOC_MMAP_THRESHOLD_"
    else:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            state = "default (no glibc mallopt)"
            return state
        ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        state = f"mmap threshold {MMAP_THRESHOLD >> 20} MiB" if ok else "default (mallopt refused)"
    return state
