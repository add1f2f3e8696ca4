"""The tiny model's attention: PyTorch's fused kernel against the explicit softmax, side by side.

    python bench/engine/tiny_attention_bench.py --out bench/results/tiny_attention_cpu.json

In one process, one thread (as the demo's trainer and engines run), alternating the two kernels:
  * one trainer step (``Trainer.train_step``, 1 epoch, 16 minibatches) on a batch shaped like the
    main job's: 16 groups of 4, each group one ~500-byte prompt and ~250-token completions;
  * engine decoding: 8 slots prefilled with ~500-byte prompts, then 100 decode steps.
Reports the median seconds of each and the ratio reference / fused (> 1: the fused kernel is faster).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from bench_record import step_config  # noqa: E402

from floe_engine import model as tiny  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.trainer import Trainer  # noqa: E402

FUSED = tiny.Block._attend


def reference(self, q, k, v, mask):
    y = tiny.attend_reference(q, k, v, mask)
    B, _, T, _ = y.shape
    return y.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)


def batch(rng: random.Random, groups: int, g: int, prompt: int, completion: int) -> list:
    out = []
    for gi in range(groups):
        p = [rng.randrange(1, 256) for _ in range(prompt)]
        for a in range(g):
            c = [rng.randrange(1, 256) for _ in range(completion + rng.randrange(-50, 50))]
            mask = [0] * len(p) + [1] * len(c)
            out.append({"rollout_id": f"{gi}-{a}", "group_id": str(gi), "reward": float(a % 2), "advantage": 1.0,
                        "ids": p + c, "loss_mask": mask, "behaviour_logprobs": [-5.5 if m else 0.0 for m in mask],
                        "token_versions": [0 if m else -1 for m in mask]})
    return out


def train_seconds(trainer: Trainer, samples: list) -> float:
    t = time.perf_counter()
    trainer.train_step(samples, step_config(minibatches=16))
    return time.perf_counter() - t


def decode_seconds(policy, prompts: list, steps: int) -> float:
    cache = tiny.SlotKVCache(policy.module, len(prompts))
    t = time.perf_counter()
    for s, p in enumerate(prompts):
        tiny.prefill(policy.module, cache, s, p)
    slots = list(range(len(prompts)))
    for _ in range(steps):
        tiny.decode(policy.module, cache, slots, [65] * len(slots))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--decode-steps", type=int, default=100)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(0)
    samples = batch(rng, a.groups, 4, 500, 250)
    prompts = [[rng.randrange(1, 256) for _ in range(500)] for _ in range(8)]
    policy, version = build_policy("tiny", None, seed=0, device="cpu", for_training=True)
    trainer = Trainer(policy, version, tempfile.mkdtemp(prefix="floe-attn-bench-"))
    runs: dict = {"reference": {"train_s": [], "decode_s": []}, "fused": {"train_s": [], "decode_s": []}}
    for r in range(a.repeats):
        for name, fn in (("reference", reference), ("fused", FUSED)) if r % 2 == 0 else (("fused", FUSED), ("reference", reference)):
            tiny.Block._attend = fn
            runs[name]["train_s"].append(train_seconds(trainer, samples))
            with torch.no_grad():
                runs[name]["decode_s"].append(decode_seconds(policy, prompts, a.decode_steps))
            print(f"repeat {r + 1}/{a.repeats} {name}: train {runs[name]['train_s'][-1]:.2f} s, "
                  f"decode {runs[name]['decode_s'][-1]:.2f} s", flush=True)
    tiny.Block._attend = FUSED
    med = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in runs.items()}
    result = {
        "command": "python " + " ".join(sys.argv),
        "host": platform.node(), "cpu_count": os.cpu_count(), "threads": 1, "torch": torch.__version__,
        "batch": {"samples": len(samples), "tokens": sum(len(s["ids"]) for s in samples), "epochs": 1, "minibatches": 16},
        "decode": {"slots": len(prompts), "prompt_bytes": 500, "steps": a.decode_steps},
        "runs": runs, "median": med,
        "ratio_train": med["reference"]["train_s"] / med["fused"]["train_s"],
        "ratio_decode": med["reference"]["decode_s"] / med["fused"]["decode_s"],
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({k: result[k] for k in ("median", "ratio_train", "ratio_decode")}))


if __name__ == "__main__":
    main()
