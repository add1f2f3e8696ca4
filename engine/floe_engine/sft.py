"""Supervised warm start on (prompt, completion) pairs; writes weight version 0.

    python -m floe_engine.sft --data gold.jsonl --out DIR --steps 300

Each JSONL line is {"prompt": str, "completion": str} (or prompt_ids /
completion_ids). The loss is the mean NLL of the completion tokens only; an
EOS is appended to every completion so the policy learns to stop. Writes
DIR/v0/model.safetensors (+ checkpoint.json) and DIR/sft_summary.json.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from typing import List, Tuple

from . import __version__  # noqa: F401  (sets thread env before torch loads)
import torch

from . import checkpoint as ckpt
from . import tokenizer
from .policy import Policy, build_policy
from .trainer import MasterWeightsOptimizer

Pair = Tuple[List[int], List[int]]


def load_pairs(path: str) -> List[Pair]:
    pairs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            p = row["prompt_ids"] if "prompt_ids" in row else tokenizer.encode(row["prompt"])
            c = row["completion_ids"] if "completion_ids" in row else tokenizer.encode(row["completion"])
            c = list(c)
            if not c or c[-1] != tokenizer.EOS_ID:
                c.append(tokenizer.EOS_ID)
            if not p:
                p = [tokenizer.BOS_ID]
            pairs.append((list(p), c))
    if not pairs:
        raise ValueError(f"{path} has no pairs; expected JSON lines with prompt and completion")
    return pairs


@torch.no_grad()
def greedy(policy: Policy, prompt: List[int], max_tokens: int, ignore_eos: bool = False) -> List[int]:
    be = policy.make_backend(1)
    logits = be.add("g", prompt)
    out: List[int] = []
    while len(out) < max_tokens and len(prompt) + len(out) <= policy.context:
        t = int(logits.argmax())
        out.append(t)
        if t == tokenizer.EOS_ID and not ignore_eos:
            break
        logits = be.step(["g"], [t])[0]
    be.remove("g")
    return out


def exact_match(policy: Policy, pairs: List[Pair]) -> float:
    if not pairs:
        return float("nan")
    hits = sum(greedy(policy, p, len(c) + 8) == c for p, c in pairs)
    return hits / len(pairs)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m floe_engine.sft", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True, help="publish folder: writes <out>/v<version>/")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--init", default=None, help="start from this checkpoint instead of random init")
    ap.add_argument("--version", type=int, default=0, help="version number to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--eval", type=int, default=16, help="pairs to check by greedy decoding at the end (0 = none)")
    ap.add_argument("--log-every", type=int, default=25)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    rng = random.Random(a.seed)
    pairs = load_pairs(a.data)
    policy, _ = build_policy(a.model, a.init, seed=a.seed, device=a.device, dtype=a.dtype, for_training=True)
    opt = MasterWeightsOptimizer(policy.module.parameters(), lr=a.lr, betas=(0.9, 0.99), weight_decay=0.0)
    n_tok_total = sum(len(c) for _, c in pairs)
    print(f"[sft] {len(pairs)} pairs ({n_tok_total} completion tokens), model {policy.config_dict()['kind']} "
          f"with {policy.num_parameters()} parameters, {a.steps} steps of {a.batch_size}", flush=True)
    policy.module.eval()
    curve = []
    t0 = time.perf_counter()
    tokens_seen = 0
    for step in range(1, a.steps + 1):
        lr = a.lr * min(1.0, step / max(1, a.warmup)) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = [pairs[rng.randrange(len(pairs))] for _ in range(a.batch_size)]
        res = policy.token_logprobs(batch, grad=True)
        n = sum(lp.numel() for lp, _ in res)
        loss = -sum(lp.sum() for lp, _ in res) / n
        opt.zero_grad()
        loss.backward()
        gn = opt.clip_and_step(1.0)
        tokens_seen += n
        curve.append(round(float(loss.detach()), 5))
        if step % a.log_every == 0 or step == 1 or step == a.steps:
            el = time.perf_counter() - t0
            print(f"[sft] step {step}/{a.steps} loss {float(loss.detach()):.4f} grad_norm {gn:.3f} lr {lr:.2e} "
                  f"{el:.1f}s ({el / step:.3f}s/step)", flush=True)
    train_s = time.perf_counter() - t0
    path = ckpt.publish(policy.state_dict(), a.out, a.version, policy.config_dict(),
                        extra={"sft": {"data": os.path.abspath(a.data), "steps": a.steps}})
    em = exact_match(policy, rng.sample(pairs, min(a.eval, len(pairs)))) if a.eval > 0 else None
    summary = {
        "path": path, "version": a.version, "steps": a.steps, "batch_size": a.batch_size, "lr": a.lr,
        "pairs": len(pairs), "parameters": policy.num_parameters(), "config": policy.config_dict(),
        "final_loss": curve[-1] if curve else None,
        "final_loss_mean_last10": sum(curve[-10:]) / max(1, len(curve[-10:])),
        "loss_curve": curve, "train_s": round(train_s, 2), "s_per_step": round(train_s / max(1, a.steps), 4),
        "tokens_seen": tokens_seen, "greedy_exact_match": em, "eval_pairs": min(a.eval, len(pairs)),
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "sft_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"[sft] wrote {path} (loss {summary['final_loss_mean_last10']:.4f}, greedy exact match "
          f"{em if em is None else round(em, 3)}) in {train_s:.1f}s; summary {os.path.join(a.out, 'sft_summary.json')}",
          flush=True)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
