"""One Qwen3.5-4B gated-delta-net kernel call at long context, forward + backward, on one GPU:
transformers' torch reference (``torch_chunk_gated_delta_rule``) against floe's
(``floe_engine.gated_delta``), side by side; their agreement (output and gradients, fp32 inputs)
at a shorter length; with ``--profile`` the top CUDA ops of one floe call.

    python3 bench/engine/gdn_bench.py --out $OUT/gdn_bench.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_record  # noqa: E402,F401  (puts engine/ on the path)

import torch  # noqa: E402

from floe_engine import gated_delta  # noqa: E402


def inputs(T, dtype, seed=0, hk=32, hv=32, d=128):
    # Qwen3.5-4B has 16 key heads and 32 value heads; the layer repeats q and k to the value heads
    # before the kernel (transformers' reference refuses unequal counts), so the kernel sees 32 of each
    g = torch.Generator(device="cuda").manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g, device="cuda", dtype=torch.float32)  # noqa: E731
    q, k, v = mk(1, T, hk, d), mk(1, T, hk, d), mk(1, T, hv, d)
    gl = -torch.nn.functional.softplus(mk(1, T, hv)) * 0.3
    beta = torch.sigmoid(mk(1, T, hv))
    return [x.to(dtype).requires_grad_() if i < 3 else x.requires_grad_() for i, x in enumerate((q, k, v, gl, beta))]


def fwd_bwd(fn, xs):
    out, _ = fn(*xs, use_qk_l2norm_in_kernel=True)
    out.float().pow(2).mean().backward()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--length", type=int, default=32768)
    ap.add_argument("--check-length", type=int, default=4096)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    ref = getattr(m, "_floe_reference_torch_chunk_gated_delta_rule", m.torch_chunk_gated_delta_rule)
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "length": a.length, "check": {}, "timing": {}}
    floe = gated_delta.chunk_gated_delta_rule
    xs = inputs(a.check_length, torch.float32, seed=1)
    ro = fwd_bwd(ref, xs)
    rg = [x.grad.clone() for x in xs]
    ys = inputs(a.check_length, torch.float32, seed=1)
    o = fwd_bwd(floe, ys)
    res["check"]["floe"] = {"out_max_abs": float((o - ro).detach().abs().max()),
                            "grad_max_rel": max(float((y.grad - r).norm() / r.norm()) for y, r in zip(ys, rg))}
    print("floe", res["check"]["floe"], flush=True)
    for name, fn in (("reference", ref), ("floe", floe)):
        xs = inputs(a.length, torch.bfloat16)
        fwd_bwd(fn, xs)  # warm-up
        torch.cuda.synchronize()
        times = []
        for _ in range(2):
            xs = inputs(a.length, torch.bfloat16, seed=2)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fwd_bwd(fn, xs)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        res["timing"][name] = {"fwd_bwd_s": times}
        print(name, times, flush=True)
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    res["timing"]["floe"]["speedup_vs_reference"] = min(res["timing"]["reference"]["fwd_bwd_s"]) / min(res["timing"]["floe"]["fwd_bwd_s"])
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        xs = inputs(a.length, torch.bfloat16, seed=3)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fwd_bwd(floe, xs)
            torch.cuda.synchronize()
        ev = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:15]
        res["profile_top_cuda_ops"] = [{"op": e.key, "calls": e.count, "cuda_ms": e.device_time_total / 1e3,
                                        "cpu_ms": e.cpu_time_total / 1e3} for e in ev]
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15), flush=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res["timing"]), flush=True)


if __name__ == "__main__":
    main()
