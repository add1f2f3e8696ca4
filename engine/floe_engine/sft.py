"""Supervised warm start on gold trajectories; writes weight version 0.

    python -m floe_engine.sft --data gold.jsonl --out DIR --steps 300 [--tokenizer byte|FOLDER]

Each JSONL line is one of
  * {"ids": [T ints], "loss_mask": [T 0/1]}: one gold trajectory (prompt, model turns, tool
    outputs...), loss on the masked tokens only; the ids are used as given (the caller has
    already put the end-of-turn ids where the model ends its turns);
  * {"prompt": str, "completion": str} (or prompt_ids / completion_ids): encoded with the
    tokenizer, loss on the completion, the tokenizer's EOS appended to the completion so the
    policy learns to stop.
The loss is the mean NLL over all trained tokens of the batch. Writes
DIR/v<version>/ (model.safetensors, or a Hugging Face model folder for hf: models; see
checkpoint.py) and DIR/sft_summary.json; the
greedy exact-match check runs on prompt/completion rows only (masked rows are skipped:
they have no single completion to match), and the summary says which.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from typing import List, Optional, Tuple

from . import __version__  # noqa: F401  (sets thread env before torch loads)
from .lifetime import exit_with_parent
import torch

from . import checkpoint as ckpt
from . import tokenizer as tokenizers
from .optimizers import MasterWeightsOptimizer
from .policies import build_policy
from .policy import Policy
from .trainer import check_sequence

Pair = Tuple[List[int], List[int]]


class Row:
    """One SFT example as a masked sequence; ``pair`` is set for prompt/completion rows."""
    __slots__ = ("ids", "loss_mask", "pair")

    def __init__(self, ids: List[int], loss_mask: List[int], pair: Optional[Pair] = None):
        self.ids, self.loss_mask, self.pair = ids, loss_mask, pair


def load_rows(path: str, tok=None, vocab: Optional[int] = None, context: Optional[int] = None) -> List[Row]:
    tok = tok if tok is not None else tokenizers.ByteTokenizer()
    vocab = vocab or tok.vocab_size
    rows: List[Row] = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            where = f"{path}:{n}"
            if "ids" in row or "loss_mask" in row:
                ids, mask = row.get("ids"), row.get("loss_mask")
                check_sequence(where, ids, mask, vocab, context)
                rows.append(Row(list(ids), [int(m) for m in mask]))
                continue
            p = row["prompt_ids"] if "prompt_ids" in row else tok.encode(row["prompt"])
            c = row["completion_ids"] if "completion_ids" in row else tok.encode(row["completion"])
            c = list(c)
            if not c or c[-1] != tok.eos_token_id:
                c.append(tok.eos_token_id)
            p = list(p)
            if not p:
                if tok.bos_token_id is None:
                    raise ValueError(f"{where}: empty prompt and tokenizer {tok.name!r} has no BOS token")
                p = [tok.bos_token_id]
            ids, mask = p + c, [0] * len(p) + [1] * len(c)
            check_sequence(where, ids, mask, vocab, context)
            rows.append(Row(ids, mask, (p, c)))
    if not rows:
        raise ValueError(f"{path} has no rows; expected JSON lines {{ids, loss_mask}} or {{prompt, completion}}")
    return rows


def load_pairs(path: str, tok=None) -> List[Pair]:
    """The prompt/completion rows of ``path`` as (prompt ids, completion ids + EOS) pairs."""
    return [r.pair for r in load_rows(path, tok) if r.pair is not None]


@torch.no_grad()
def greedy(policy: Policy, prompt: List[int], max_tokens: int, ignore_eos: bool = False) -> List[int]:
    be = policy.make_backend(1)
    stops = set(policy.tokenizer.stop_token_ids)
    logits = be.add("g", prompt)
    out: List[int] = []
    while len(out) < max_tokens and len(prompt) + len(out) <= policy.context:
        t = int(logits.argmax())
        out.append(t)
        if t in stops and not ignore_eos:
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
    # steps and lr: the run config's policy.warmStartSteps / warmStartLr, given by the caller (infra/warmstart.ts)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--tokenizer", default="byte",
                    help="byte (the tiny model's) | a Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json)")
    ap.add_argument("--init", default=None, help="start from this checkpoint instead of random init")
    ap.add_argument("--version", type=int, default=0, help="version number to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--eval", type=int, default=16,
                    help="prompt/completion rows to check by greedy decoding at the end (0 = none; masked rows are never evaluated)")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="end (SIGKILL from the kernel) when this process, the launcher, ends: floe's warm "
                         "start passes its own pid, so a demo killed with SIGKILL leaves no SFT training on")
    a = ap.parse_args(argv)
    if a.parent_pid is not None:
        exit_with_parent(a.parent_pid)
    torch.set_num_threads(a.threads)
    rng = random.Random(a.seed)
    policy, _ = build_policy(a.model, a.init, seed=a.seed, device=a.device, dtype=a.dtype, for_training=True,
                             tokenizer=a.tokenizer)
    rows = load_rows(a.data, policy.tokenizer, policy.vocab_size, policy.context)
    pairs = [r.pair for r in rows if r.pair is not None]
    opt = MasterWeightsOptimizer(policy.module.parameters())  # lr set each step below (warm-up + cosine), no weight decay
    n_tok_total = sum(sum(r.loss_mask) for r in rows)
    print(f"[sft] {len(rows)} rows ({len(rows) - len(pairs)} masked trajectories, {len(pairs)} prompt/completion; "
          f"{n_tok_total} trained tokens), model {policy.config_dict()['kind']} with {policy.num_parameters()} "
          f"parameters, tokenizer {policy.tokenizer.name} ({policy.tokenizer.vocab_size} ids), "
          f"{a.steps} steps of {a.batch_size}", flush=True)
    policy.module.eval()
    curve = []
    t0 = time.perf_counter()
    tokens_seen = 0
    for step in range(1, a.steps + 1):
        lr = a.lr * min(1.0, step / max(1, a.warmup)) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = [rows[rng.randrange(len(rows))] for _ in range(a.batch_size)]
        # the head runs on the masked positions only (HF: no [T, vocab] logits of whole sequences)
        res = policy.masked_logprobs([(r.ids, r.loss_mask) for r in batch], grad=True)
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
    path = ckpt.publish_policy(policy, a.out, a.version,
                               extra={"sft": {"data": os.path.abspath(a.data), "steps": a.steps}})
    n_eval = min(a.eval, len(pairs)) if a.eval > 0 else 0
    em = exact_match(policy, rng.sample(pairs, n_eval)) if n_eval else None
    if n_eval:
        eval_note = f"greedy exact match on {n_eval} prompt/completion rows"
        if len(pairs) < len(rows):
            eval_note += f"; {len(rows) - len(pairs)} masked rows not evaluated"
    elif a.eval <= 0:
        eval_note = "skipped (--eval 0)"
    else:
        eval_note = "skipped: masked rows ({ids, loss_mask}) have no single completion to match"
    summary = {
        "path": path, "version": a.version, "steps": a.steps, "batch_size": a.batch_size, "lr": a.lr,
        "pairs": len(pairs), "rows": len(rows), "masked_rows": len(rows) - len(pairs),
        "parameters": policy.num_parameters(), "config": policy.config_dict(),
        "tokenizer": policy.tokenizer.describe(),
        "final_loss": curve[-1] if curve else None,
        "final_loss_mean_last10": sum(curve[-10:]) / max(1, len(curve[-10:])),
        "loss_curve": curve, "train_s": round(train_s, 2), "s_per_step": round(train_s / max(1, a.steps), 4),
        "tokens_seen": tokens_seen, "greedy_exact_match": em, "eval_pairs": n_eval, "eval": eval_note,
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
