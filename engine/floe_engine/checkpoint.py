"""Weights on disk: safetensors plus a JSON sidecar {version, config, sha256}.

Published layout: ``<dir>/v<version>/model.safetensors`` and
``<dir>/v<version>/checkpoint.json``. A version folder is written under a
temporary name and renamed into place, so a reader never sees half a file.
The sha256 is of the safetensors file's bytes; ``load`` verifies it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from typing import Dict, Optional, Tuple

import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "model.safetensors"
SIDECAR = "checkpoint.json"
FORMAT = "floe-checkpoint-1"


def version_dir(publish_dir: str, version: int) -> str:
    return os.path.join(publish_dir, f"v{version}")


def _dedupe(sd: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Drop aliases of already-listed storage (tied embeddings); safetensors refuses shared tensors."""
    seen, out = set(), {}
    for k, v in sd.items():
        key = (v.data_ptr(), v.shape, v.stride()) if v.numel() else (k,)
        if key in seen:
            continue
        seen.add(key)
        out[k] = v.detach().contiguous().cpu()
    return out


def sha256_file(path: str, chunk: int = 1 << 24) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)  # hashlib releases the GIL on large buffers


def save(state_dict: Dict[str, torch.Tensor], out_dir: str, version: int, config: dict,
         dtype: Optional[torch.dtype] = None, extra: Optional[dict] = None,
         timings: Optional[dict] = None) -> str:
    """Write ``out_dir`` (a version folder) atomically; return the safetensors path.
    ``timings`` (if given) receives to_cpu_ms / write_ms / sha_ms."""
    t0 = time.perf_counter()
    tensors = _dedupe(state_dict)
    if dtype is not None:
        tensors = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in tensors.items()}
    out_dir = os.path.abspath(out_dir)
    tmp = f"{out_dir}.tmp-{os.getpid()}-{time.monotonic_ns()}"
    os.makedirs(tmp)
    weights = os.path.join(tmp, WEIGHTS)
    t1 = time.perf_counter()
    save_file(tensors, weights, metadata={"format": "pt", "floe_version": str(version)})
    t2 = time.perf_counter()
    meta = {"format": FORMAT, "version": int(version), "config": config, "sha256": sha256_file(weights),
            "bytes": os.path.getsize(weights), "created_unix": time.time()}
    t3 = time.perf_counter()
    if extra:
        meta.update(extra)
    with open(os.path.join(tmp, SIDECAR), "w") as f:
        json.dump(meta, f, indent=1)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(os.path.dirname(out_dir) or ".", exist_ok=True)
    os.rename(tmp, out_dir)
    if timings is not None:
        timings.update(to_cpu_ms=round((t1 - t0) * 1e3, 1), write_ms=round((t2 - t1) * 1e3, 1),
                       sha_ms=round((t3 - t2) * 1e3, 1))
    return os.path.join(out_dir, WEIGHTS)


def publish(state_dict, publish_dir: str, version: int, config: dict, **kw) -> str:
    return save(state_dict, version_dir(publish_dir, version), version, config, **kw)


def resolve(path: str) -> Tuple[str, str]:
    """A version folder or its model.safetensors -> (weights path, sidecar path)."""
    if os.path.isdir(path):
        return os.path.join(path, WEIGHTS), os.path.join(path, SIDECAR)
    return path, os.path.join(os.path.dirname(path), SIDECAR)


def read_meta(path: str) -> dict:
    _, side = resolve(path)
    with open(side) as f:
        return json.load(f)


def load(path: str, verify: bool = True, timings: Optional[dict] = None) -> Tuple[dict, Dict[str, torch.Tensor]]:
    """-> (sidecar metadata, state dict on CPU, memory-mapped). Raises if the sha256 does not match."""
    weights, side = resolve(path)
    if not os.path.exists(weights):
        raise FileNotFoundError(f"no weights at {weights}; expected <dir>/v<version>/{WEIGHTS}")
    meta = {}
    if os.path.exists(side):
        with open(side) as f:
            meta = json.load(f)
    t0 = time.perf_counter()
    if verify and meta.get("sha256"):
        digest = sha256_file(weights)
        if digest != meta["sha256"]:
            raise ValueError(f"{weights}: sha256 {digest[:12]}… does not match its sidecar ({meta['sha256'][:12]}…)")
    t1 = time.perf_counter()
    sd = load_file(weights, device="cpu")
    if timings is not None:
        timings.update(sha_ms=round((t1 - t0) * 1e3, 1), read_ms=round((time.perf_counter() - t1) * 1e3, 1))
    return meta, sd
