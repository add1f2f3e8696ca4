"""Offline proxy of the stress test, for tuning the trainer's recipe fast.

    python bench/recipe/stress_proxy.py --gold DIR/gold.jsonl --init DIR/v0 --out result.json [--lr 3e-4 ...]

The real stress test (``npm run demo``) runs every attempt through Temporal,
the format gate and a sandbox, ~30 s an update on 2 cores. This proxy keeps
the parts that decide whether the policy learns — the same tiny policy and
warm start, the same sampler, the same ``Trainer.train_step`` — and replaces
the sandbox by the gold trajectory: an attempt goes turn by turn, and a turn
whose completion is not byte-for-byte the gold turn ends the attempt with
reward 0 (the real gate is more lenient: a different valid command may still
pass). Reward 1 when every gold turn was reproduced. Generation is one or
more versions behind training (``--lag``), as in the asynchronous loop.

It is a tuning tool, not a test of floe: settings found here are checked by
the real run. Each run writes its reward curve as JSON.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "engine"))

from floe_engine import tokenizer  # noqa: E402  (sets thread env before torch loads)
import torch  # noqa: E402

from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.sampling import sample  # noqa: E402
from floe_engine.trainer import Trainer  # noqa: E402

Turn = Tuple[List[int], List[int]]  # gold prompt ids, gold completion ids (EOS appended)


def load_trajectories(path: str) -> List[List[Turn]]:
    """Gold trajectories in file order: rows {task_id, ids, loss_mask} as the warm start writes
    them (each masked run is a reply), or older gold pairs grouped into tasks by ``task_id`` (or,
    in files without it, a pair whose prompt extends the previous pair's prompt + completion)."""
    trajs: List[List[Turn]] = []
    prev = None
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            if "ids" in row:  # the warm start's rendering: one sequence, the loss mask over the replies
                ids, mask = row["ids"], row["loss_mask"]
                turns, j = [], 0
                while j < len(ids):
                    if mask[j]:
                        e = j
                        while e < len(ids) and mask[e]:
                            e += 1
                        turns.append((ids[:j], ids[j:e]))  # the reply ends with its end-of-turn token
                        j = e
                    else:
                        j += 1
                trajs.append(turns)
                prev = None
                continue
            p, c = row["prompt"], row["completion"]
            turn = (tokenizer.encode(p), tokenizer.encode(c) + [tokenizer.EOS_ID])
            same = (row.get("task_id") == prev[2]) if prev is not None and "task_id" in row else \
                (prev is not None and p.startswith(prev[0] + prev[1]))
            if same:
                trajs[-1].append(turn)
            else:
                trajs.append([turn])
            prev = (p, c, row.get("task_id"))
    return trajs


@torch.no_grad()
def generate(policy, prompts: Sequence[List[int]], max_tokens: int, temperature: float,
             rng: random.Random) -> List[Tuple[List[int], List[float]]]:
    be = policy.make_backend(len(prompts))
    keys = [f"s{i}" for i in range(len(prompts))]
    logits = torch.stack([be.add(k, p) for k, p in zip(keys, prompts)])
    outs: List[Tuple[List[int], List[float]]] = [([], []) for _ in prompts]
    live = list(range(len(prompts)))
    rngs = [random.Random(rng.random()) for _ in prompts]
    while live:
        toks, lps = sample(logits, [temperature] * len(live), [1.0] * len(live), [rngs[i] for i in live])
        nxt, feed = [], []
        for j, i in enumerate(live):
            outs[i][0].append(toks[j])
            outs[i][1].append(lps[j])
            done = (toks[j] == tokenizer.EOS_ID or len(outs[i][0]) >= max_tokens
                    or len(prompts[i]) + len(outs[i][0]) >= policy.context)
            if not done:
                nxt.append(i)
                feed.append(toks[j])
        for i in set(live) - set(nxt):
            be.remove(keys[i])
        live = nxt
        if live:
            logits = be.step([keys[i] for i in live], feed)
    return outs


def rollouts(policy, version: int, trajs: List[List[Turn]], task_ids: List[int], G: int, a
             ) -> Tuple[List[dict], List[float]]:
    """G attempts at each task by ``policy`` (weight ``version``); returns trainer samples (one
    per generated turn: the gold prompt, then the generated tokens, trained on) and rewards."""
    rng = random.Random(a.rng.random())
    attempts = [(g, t) for g, t in enumerate(task_ids) for _ in range(G)]
    alive = list(range(len(attempts)))
    turns: Dict[int, List[Tuple[List[int], List[int], List[float]]]] = {i: [] for i in alive}
    reward = [0.0] * len(attempts)
    k = 0
    while alive:
        prompts = [trajs[attempts[i][1]][k][0] for i in alive]
        outs = generate(policy, prompts, a.max_tokens, a.temperature, rng)
        nxt = []
        for i, (ids, lps) in zip(alive, outs):
            gold = trajs[attempts[i][1]][k]
            turns[i].append((gold[0], ids, lps))
            if ids == gold[1]:
                if k + 1 == len(trajs[attempts[i][1]]):
                    reward[i] = 1.0
                else:
                    nxt.append(i)
        alive = nxt
        k += 1
    samples = []
    for i, (g, _) in enumerate(attempts):
        for k, (p, ids, lps) in enumerate(turns[i]):
            samples.append({"rollout_id": f"{i}-{k}", "group_id": str(g), "reward": reward[i], "ids": p + ids,
                            "loss_mask": [0] * len(p) + [1] * len(ids), "behaviour_logprobs": [0.0] * len(p) + lps,
                            "token_versions": [-1] * len(p) + [version] * len(ids)})
    return samples, reward



def proxy_lr(a, update: int) -> float:
    """The offline proxy's stand-in for core/lrSchedule.ts (the workflow sends each train step its
    lr): constant, or from --lr at update 1 down to --lr × --lr-final at the last, linearly or on a
    half cosine."""
    if a.lr_schedule == "constant" or a.updates <= 1:
        return a.lr
    t = (update - 1) / (a.updates - 1)
    f = 1 - t if a.lr_schedule == "linear" else 0.5 * (1 + math.cos(math.pi * t))
    return a.lr * (a.lr_final + (1 - a.lr_final) * f)


def proxy_advantages(samples, mode, negative_scale, eps=1e-6):
    """The offline proxy's stand-in for floe's core/advantages.ts (the trainer takes advantages as
    given; the real pipeline computes them only there). Same rule: group-relative (÷ std for
    group-std) or the reward itself, then negatives × negative_scale."""
    groups = {}
    for s in samples:
        groups.setdefault(s["group_id"], []).append(s)
    for members in groups.values():
        rs = [float(m["reward"]) for m in members]
        mean = sum(rs) / len(rs)
        std = (sum((r - mean) ** 2 for r in rs) / len(rs)) ** 0.5
        for m, r in zip(members, rs):
            adv = r if mode == "reward" else (r - mean) / (std + eps) if mode == "group-std" else r - mean
            m["advantage"] = adv * negative_scale if adv < 0 else adv
    return samples

REPO = os.path.join(os.path.dirname(__file__), "..", "..")


def run_config_trainer() -> dict:
    """The run config's trainer defaults (`floe config defaults`): the proxy keeps no copy."""
    out = subprocess.run([os.path.join(REPO, "bin", "floe"), "config", "defaults"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["trainer"]


def main(argv=None) -> dict:
    t = run_config_trainer()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gold", required=True)
    ap.add_argument("--init", required=True, help="warm-start checkpoint folder (v0)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--groups", type=int, default=4, help="groups (tasks) per update")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--lag", type=int, default=1, help="versions generation runs behind training")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--lr", type=float, default=t["lr"])
    ap.add_argument("--lr-schedule", default=t["lrSchedule"], choices=["constant", "linear", "cosine"],
                    help="the learning rate over the updates, as core/lrSchedule.ts computes it")
    ap.add_argument("--lr-final", type=float, default=t["lrFinal"], help="the last update's lr as a fraction of --lr")
    ap.add_argument("--betas", default="0.9,0.99")
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    ap.add_argument("--advantage", default=t["advantage"], choices=["group", "group-std", "reward"])
    ap.add_argument("--loss-agg", default=t["lossAgg"], choices=["token-mean", "seq-mean-token-mean"])
    ap.add_argument("--clip-low", type=float, default=t["clipLow"])
    ap.add_argument("--clip-high", type=float, default=t["clipHigh"])
    ap.add_argument("--ratio-mode", default=t["ratioMode"], choices=["clip", "truncate"])
    ap.add_argument("--truncate-cap", type=float, default=t["truncateCap"])
    ap.add_argument("--weight-decay", type=float, default=t["weightDecay"])
    ap.add_argument("--grad-clip", type=float, default=t["gradClip"])
    ap.add_argument("--micro-batch-tokens", type=int, default=t["microBatchTokens"])
    ap.add_argument("--negative-scale", type=float, default=t["negativeScale"])
    ap.add_argument("--epochs", type=int, default=t["epochs"])
    ap.add_argument("--minibatches", type=int, default=t["minibatches"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="")
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    a.rng = random.Random(a.seed)
    trajs = load_trajectories(a.gold)[: a.tasks]
    ckpt_file = os.path.join(a.init, "model.safetensors") if os.path.isdir(a.init) else a.init
    train_pol, _ = build_policy("tiny", ckpt_file, seed=a.seed, for_training=True)
    gen_pol, _ = build_policy("tiny", ckpt_file, seed=a.seed)
    betas = tuple(float(x) for x in a.betas.split(","))
    trainer = Trainer(train_pol, 0, tempfile.mkdtemp(prefix="proxy-"), betas=betas, eps=a.eps, optimizer=a.optimizer)
    versions = [{k: v.clone() for k, v in train_pol.state_dict().items()}]
    cfg = {"lr": a.lr, "weight_decay": a.weight_decay, "clip_low": a.clip_low, "clip_high": a.clip_high,
           "ratio_mode": a.ratio_mode, "truncate_cap": a.truncate_cap, "loss_agg": a.loss_agg, "epochs": a.epochs,
           "minibatches": a.minibatches, "grad_clip": a.grad_clip, "micro_batch_tokens": a.micro_batch_tokens}
    curve, rows = [], []
    cursor = 0
    t0 = time.perf_counter()
    for u in range(1, a.updates + 1):
        gen_version = max(0, u - 1 - a.lag)
        gen_pol.load_state_dict(versions[gen_version])
        task_ids = [(cursor + j) % len(trajs) for j in range(a.groups)]
        cursor += a.groups
        samples, rewards = rollouts(gen_pol, gen_version, trajs, task_ids, a.group_size, a)
        r = sum(rewards) / len(rewards)
        cfg["lr"] = proxy_lr(a, u)
        res = trainer.train_step(proxy_advantages(samples, a.advantage, a.negative_scale), cfg)
        versions.append({k: v.clone() for k, v in train_pol.state_dict().items()})
        m = res["metrics"]
        curve.append(round(r, 4))
        rows.append({"update": u, "reward": round(r, 4), "entropy": round(m["entropy"], 4),
                     "grad_norm": round(m["grad_norm"], 4), "clip_fraction": round(m["clip_fraction"], 4)})
        print(f"[{a.label}] v{u} reward {r:.3f} entropy {m['entropy']:.4f} grad {m['grad_norm']:.3f}", flush=True)
    n = len(curve)
    peak = max(curve)
    tail = curve[n - max(1, n // 5):]
    # the hold rule as core/stress.ts checks it: the 3-update average (shorter at the start) over
    # the last third (rounded up) never more than 0.05 below its peak
    avg3 = [sum(curve[max(0, i - 2):i + 1]) / len(curve[max(0, i - 2):i + 1]) for i in range(n)]
    third = avg3[n - max(1, math.ceil(n / 3)):]
    out = {"label": a.label, "args": {k: v for k, v in vars(a).items() if k != "rng"}, "curve": curve,
           "rows": rows, "peak": peak, "last_fifth_min": min(tail), "last_fifth_mean": sum(tail) / len(tail),
           "last_third_mean": sum(curve[n - max(1, math.ceil(n / 3)):]) / max(1, math.ceil(n / 3)),
           "hold_drop": round(max(avg3) - min(third), 4), "holds": max(avg3) - min(third) <= 0.05 + 1e-9,
           "seconds": round(time.perf_counter() - t0, 1)}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f)
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
