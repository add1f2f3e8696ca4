"""Packed variable-length attention against the padded batch and the old dense-mask packing on
one device: log-probs (max abs) and gradients (relative norm) of a small Qwen3-shaped model, in
fp32 (the acceptance's precision: per-document SDPA) and bf16 (the GPU's varlen flash kernel).

    python3 bench/engine/packed_check.py --out $OUT/packed_check.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_record  # noqa: E402,F401  (puts engine/ on the path)

import torch  # noqa: E402

from floe_engine import packed_attention  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.scoring import full_sequence_logprobs  # noqa: E402
from floe_engine.sharding import checkpoint_activations, transformer_blocks  # noqa: E402

SPEC = ("hf:qwen3:hidden_size=512,num_hidden_layers=4,num_attention_heads=8,num_key_value_heads=2,head_dim=64,"
        "intermediate_size=1024,vocab_size=4096,max_position_embeddings=8192,tie_word_embeddings=true")


def run(device, dtype, rows, packed, dense):
    pol = build_policy(SPEC, None, seed=7, device=device, dtype=dtype, for_training=True)[0]
    for blk in transformer_blocks(pol):
        checkpoint_activations(blk)
    res = full_sequence_logprobs(pol, rows, entropy=False, packed=packed, dense_mask=dense)
    sum((lp * (i - 1.5)).sum() for i, (lp, _) in enumerate(res)).backward()
    return ([lp.detach().float() for lp, _ in res],
            {k: p.grad.float() for k, p in pol.module.named_parameters() if p.grad is not None})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(0)
    rows = []
    for n in (1500, 37, 800, 2100, 300):
        ids = torch.randint(0, 4096, (n,), generator=g).tolist()
        rows.append((ids, [0] * (n // 5) + [1] * (n - n // 5)))
    out = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
           "spec": SPEC, "lengths": [len(r[0]) for r in rows], "checks": {}}
    for dtype in ("fp32", "bf16"):
        pad = run(device, dtype, rows, False, False)
        for name, dense in (("packed", False), ("packed_dense", True)):
            lp, gr = run(device, dtype, rows, True, dense)
            out["checks"][f"{dtype}:{name}_vs_padded"] = {
                "kernel": "dense_mask_sdpa" if dense else packed_attention.kernel_name(
                    torch.device(device), torch.float32 if dtype == "fp32" else torch.bfloat16),
                "logprob_max_abs": max(float((x - y).abs().max()) for x, y in zip(lp, pad[0])),
                "grad_max_rel": max(float((gr[k] - pad[1][k]).norm() / pad[1][k].norm().clamp_min(1e-30)) for k in gr)}
            print(dtype, name, out["checks"][f"{dtype}:{name}_vs_padded"], flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
