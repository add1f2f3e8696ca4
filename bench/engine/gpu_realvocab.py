"""GPU benchmark of the reference engine and trainer with Qwen's real vocabulary (248,077 ids).

    cd engine && python3 ../bench/engine/gpu_realvocab.py --out gpu_realvocab_h200.json   # one H200
    cd /work/main && .floe/venv/bin/python bench/engine/gpu_realvocab.py --smoke --out /tmp/smoke.json  # CPU check

The tokenizer is the Hugging Face folder built by `floe up` (default
<repo>/.floe/tokenizers/qwen3.6, `--tokenizer` overrides); the policy's vocabulary,
eos and pad come from it and vocab_size is its size rounded up to 64 (248,128).
The model is a random-init Qwen3.5-shaped hybrid (`hf:qwen3_5_text:…`, 3 of 4
layers gated delta net), ~0.56 B parameters of which the tied embedding is
0.25 B. Without flash-linear-attention transformers runs its torch reference
kernels for the gated delta net (slow but real). Prompts and rollouts are the
tokenizer's ids of real text (this repository's sources and docs).

Sections (the JSON is rewritten after each one, so a timeout keeps data):
  throughput   tokens/s through floe_engine.scheduler.Engine (continuous
               batching) at 1, 8, 32 concurrent streams; bf16; ~512-token
               prompts, 128 generated tokens each (ignore_eos), warm-up first.
  mismatch     engine-vs-trainer log-prob gap: sequences sampled by the Engine
               (behaviour logprobs = what the engine returns) scored again by
               Policy.masked_logprobs(grad=True), the trainer's function;
               bf16 model with recurrent state 'model' (bf16) and 'fp32', and
               all-fp32. mean/max |Δ logprob| and mean k3 KL over generated tokens.
  long_rollout one agent-shaped 16k-token rollout (1k prompt, ~22 turns of 300
               masked generated tokens and ~400 unmasked tool tokens) trained as
               ONE masked sequence with Trainer.train_step in bf16; behaviour
               logprobs from the engine's HF decode backend (each turn prefilled
               alone, then batched cached decode, teacher-forced on the rollout's
               tokens: exactly the logprobs the engine reports for those tokens).
               Peak memory, train time, returned metrics; on OOM, 8k and 4k.
A time budget (--budget-s) keeps the whole run inside one device command.
"""
from __future__ import annotations

import argparse
import gc
import glob
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "engine"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench_record import step_config  # noqa: E402

from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.sampling import SamplingParams  # noqa: E402
from floe_engine.scheduler import Engine  # noqa: E402
from floe_engine.tokenizer import load_tokenizer  # noqa: E402
from floe_engine.trainer import Trainer  # noqa: E402

DEFAULT_TOKENIZER = os.path.join(REPO, ".floe", "tokenizers", "qwen3.6")
# ~0.56 B: hidden 1024, 16 layers (12 gated delta net + 4 gated full attention), tied 248,128 x 1024 embedding
MODEL = ("hf:qwen3_5_text:hidden_size=1024,intermediate_size=3072,num_hidden_layers=16,num_attention_heads=8,"
         "num_key_value_heads=2,head_dim=256,linear_num_key_heads=16,linear_num_value_heads=16,"
         "linear_key_head_dim=128,linear_value_head_dim=128,tie_word_embeddings=true,max_position_embeddings=32768")
SMOKE_MODEL = ("hf:qwen3_5_text:hidden_size=64,intermediate_size=128,num_hidden_layers=4,num_attention_heads=4,"
               "num_key_value_heads=2,head_dim=16,linear_num_key_heads=2,linear_num_value_heads=2,"
               "linear_key_head_dim=16,linear_value_head_dim=16,tie_word_embeddings=true,"
               "max_position_embeddings=4096")

T_START = time.perf_counter()


def log(msg: str) -> None:
    print(f"[realvocab {time.perf_counter() - T_START:6.1f}s] {msg}", flush=True)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def gib(n: int) -> float:
    return round(n / 2 ** 30, 3)


# ------------------------------------------------------------------------- text
def corpus_ids(tok, min_tokens: int) -> list:
    """Token ids of real text: this repository's docs and sources, in a fixed order."""
    pats = ["engine/README.md", "README.md", "engine/floe_engine/*.py", "bench/engine/*.py", "core/*.ts",
            "activities/*.ts", "cli/*.ts", "workers/*.ts", "configs/**/*", "engine/tests/*.py"]
    files = []
    for p in pats:
        for f in sorted(glob.glob(os.path.join(REPO, p), recursive=True)):
            if os.path.isfile(f) and f not in files and os.path.getsize(f) < 400_000:
                files.append(f)
    ids: list = []
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                ids.extend(tok.encode(fh.read()))
        except (UnicodeDecodeError, OSError):
            continue
        if len(ids) >= min_tokens:
            break
    if not ids:
        ids = tok.encode("def f(x):\n    return x + 1\n" * 64)
    while len(ids) < min_tokens:  # small checkouts: repeat
        ids = ids + ids
    return ids


class Cursor:
    """Consecutive, non-overlapping slices of the corpus (wrapping around)."""

    def __init__(self, ids: list, start: int = 0):
        self.ids, self.pos = ids, start % len(ids)

    def take(self, n: int) -> list:
        out = []
        while len(out) < n:
            k = min(n - len(out), len(self.ids) - self.pos)
            out.extend(self.ids[self.pos:self.pos + k])
            self.pos = (self.pos + k) % len(self.ids)
        return out


def build_rollout(tok, corpus: list, total: int, prompt_len: int, gen_len: int, tool_len: int) -> dict:
    """One agent-shaped rollout of exactly ``total`` ids in the trainer's row format: a first prompt
    (system + user), then model turns (masked, ending in <|im_end|>) and tool results (unmasked),
    ending on a model turn."""
    n_turns = max(1, round((total - prompt_len + tool_len) / (gen_len + tool_len)))
    tools_total = total - prompt_len - n_turns * gen_len
    if tools_total < 0 or (n_turns > 1 and tools_total < 16 * (n_turns - 1)):
        raise ValueError(f"rollout of {total} tokens cannot hold {n_turns} turns of {gen_len}")
    cur = Cursor(corpus, 12345)
    im_end = tok.encode("<|im_end|>")
    ids, mask, turns = [], [], []
    head = tok.encode("<|im_start|>system\nYou are a coding agent. Use the tools to inspect and fix the "
                      "repository.<|im_end|>\n<|im_start|>user\n")
    tail = tok.encode("<|im_end|>\n<|im_start|>assistant\n")
    first = head + cur.take(prompt_len - len(head) - len(tail)) + tail
    ids += first
    mask += [0] * len(first)
    t_head = tok.encode("\n<|im_start|>user\n<tool_response>\n")
    t_tail = tok.encode("\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    tool_sizes = [tools_total // max(1, n_turns - 1)] * (n_turns - 1)
    for i in range(tools_total - sum(tool_sizes)):
        tool_sizes[i % len(tool_sizes)] += 1
    for k in range(n_turns):
        gen = cur.take(gen_len - len(im_end)) + im_end
        turns.append(len(ids))
        ids += gen
        mask += [1] * len(gen)
        if k < n_turns - 1:
            n = tool_sizes[k]
            body = cur.take(max(0, n - len(t_head) - len(t_tail)))
            tool = (t_head + body + t_tail)[:n] if n >= len(t_head) + len(t_tail) else cur.take(n)
            ids += tool
            mask += [0] * len(tool)
    assert len(ids) == total == len(mask), (len(ids), total)
    return {"ids": ids, "loss_mask": mask, "turn_starts": turns, "n_turns": n_turns, "gen_len": gen_len,
            "prompt_len": prompt_len, "tool_sizes": tool_sizes}


# ------------------------------------------------------------------------- throughput
def run_requests(engine: Engine, prompts, max_tokens: int, concurrency: int, seed0: int = 0) -> dict:
    """``concurrency`` client threads, each sending prompts one after another; tokens/s over the run and
    per stream (each request's completion tokens over its own latency)."""
    pending = list(enumerate(prompts))
    lock = threading.Lock()
    done = []  # (tokens, latency_s)
    errors = []

    def client():
        while True:
            with lock:
                if not pending:
                    return
                i, p = pending.pop(0)
            t = time.perf_counter()
            req = engine.submit(p, SamplingParams(max_tokens=max_tokens, ignore_eos=True, seed=seed0 + i))
            req.done.wait()
            dt = time.perf_counter() - t
            with lock:
                if req.error:
                    errors.append(req.error)
                done.append((sum(len(s.out) for s in req.seqs), dt))

    steps0 = engine.counters["decode_steps"]
    sync()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sync()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    toks = sum(n for n, _ in done)
    steps = engine.counters["decode_steps"] - steps0
    return {"concurrency": concurrency, "requests": len(prompts), "completion_tokens": toks,
            "wall_s": round(wall, 3), "tokens_per_s": round(toks / wall, 1),
            "tokens_per_s_per_stream": round(sum(n / dt for n, dt in done) / len(done), 2),
            "mean_request_latency_s": round(sum(dt for _, dt in done) / len(done), 3),
            "decode_steps": steps, "wall_ms_per_decode_step": round(wall * 1e3 / max(1, steps), 2)}


def bench_throughput(ctx: dict, out: dict, save) -> None:
    a = ctx["args"]
    pol, _ = build_policy(ctx["model"], tokenizer=ctx["tokenizer"], device=ctx["device"], dtype=ctx["dtype"],
                          recurrent_state_dtype="fp32", seed=0)
    ctx["parameters"] = pol.num_parameters()
    rows = []
    sec = out["throughput"] = {"model": ctx["model"], "parameters": pol.num_parameters(),
                               "vocab_size": pol.vocab_size, "dtype": ctx["dtype"],
                               "recurrent_state_dtype": "fp32", "prompt_tokens": ctx["prompt_len"],
                               "max_tokens": ctx["max_tokens"], "prompts": "windows of real text ids",
                               "runs": rows}
    log(f"throughput: model {pol.num_parameters() / 1e6:.1f} M parameters, vocab {pol.vocab_size}")
    corpus = ctx["corpus"]
    L = ctx["prompt_len"]

    def prompts(n, salt):
        return [corpus[((salt * 7919 + k * 1733) % (len(corpus) - L)):][:L] for k in range(n)]

    engine = Engine(pol, max_batch=max(ctx["concurrency"]), seed=0).start()
    try:
        t = time.perf_counter()
        run_requests(engine, prompts(2, 99), 8, 2)  # warm-up: kernels, cuBLAS handles, allocator
        run_requests(engine, prompts(max(ctx["concurrency"]), 98), 4, max(ctx["concurrency"]))
        sec["warmup_s"] = round(time.perf_counter() - t, 2)
        for c in ctx["concurrency"]:
            if ctx["left"]() < ctx["reserve_after_throughput"]:
                sec.setdefault("skipped", []).append(c)
                log(f"throughput c={c}: skipped (time budget)")
                continue
            n = 3 if c == 1 else 2 * c  # c=1: 3 requests one after another; else two rounds of c
            r = run_requests(engine, prompts(n, c), ctx["max_tokens"], c, seed0=1000 * c)
            r["backend_mode"] = getattr(engine.backend, "mode", "?")
            rows.append(r)
            log(f"throughput c={c}: {r['tokens_per_s']} tok/s, {r['tokens_per_s_per_stream']} tok/s/stream, "
                f"{r['wall_ms_per_decode_step']} ms/step")
            save()
    finally:
        engine.stop()
    if torch.cuda.is_available():
        sec["max_memory_allocated_gib"] = gib(torch.cuda.max_memory_allocated())
    del engine, pol
    free_memory()


# ------------------------------------------------------------------------- mismatch
def bench_mismatch(ctx: dict, out: dict, save) -> None:
    rows = []
    nseq, gen = ctx["mm_sequences"], ctx["mm_gen"]
    L = ctx["prompt_len"]
    corpus = ctx["corpus"]
    prompts = [corpus[(5000 + k * 2711) % (len(corpus) - L):][:L] for k in range(nseq)]
    out["mismatch"] = {"model": ctx["model"], "sequences": nseq, "prompt_tokens": L, "generated_tokens": gen,
                       "sampling": "temperature 1, top_p 1, ignore_eos, seed per sequence",
                       "behaviour": "Engine (scheduler, continuous batching, HF merged cache) token_logprobs",
                       "trainer": "Policy.masked_logprobs(grad=True) on rows ids=prompt+completion, "
                                  "loss_mask 0..0 1..1 (the trainer's scoring function, full-sequence forward)",
                       "k3": "mean of r - 1 - log r, log r = trainer - behaviour (the trainer's mismatch_kl)",
                       "runs": rows}
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    for dtype, rsd in ctx["mm_configs"]:
        if ctx["left"]() < ctx["reserve_after_mismatch"]:
            rows.append({"dtype": dtype, "recurrent_state_dtype": rsd, "skipped": "time budget"})
            log(f"mismatch {dtype}/{rsd}: skipped (time budget)")
            continue
        t0 = time.perf_counter()
        pol, _ = build_policy(ctx["model"], tokenizer=ctx["tokenizer"], device=ctx["device"], dtype=dtype,
                              recurrent_state_dtype=rsd, seed=0)
        engine = Engine(pol, max_batch=nseq, seed=0).start()
        try:
            reqs = [engine.submit(p, SamplingParams(max_tokens=gen, ignore_eos=True, seed=500 + i))
                    for i, p in enumerate(prompts)]
            for r in reqs:
                r.done.wait()
                if r.error:
                    raise RuntimeError(r.error)
            decode_steps = engine.counters["decode_steps"]
        finally:
            engine.stop()
        t_gen = time.perf_counter() - t0
        seqs = [r.seqs[0] for r in reqs]
        # the trainer's model keeps the engine's dtype and weights; score as Trainer._backward does
        trainer_pol, _ = build_policy(ctx["model"], tokenizer=ctx["tokenizer"], device=ctx["device"], dtype=dtype,
                                      recurrent_state_dtype=rsd, seed=0, for_training=True)
        trainer_pol.load_state_dict(pol.state_dict())
        rows_in = [(list(s.prompt) + list(s.out), [0] * len(s.prompt) + [1] * len(s.out)) for s in seqs]
        t1 = time.perf_counter()
        res = trainer_pol.masked_logprobs(rows_in, grad=True, entropy=True)
        sync()
        t_score = time.perf_counter() - t1
        d_all, ents = [], []
        for s, (lp, ent) in zip(seqs, res):
            b = torch.tensor(s.logprobs, dtype=torch.float32)
            d_all.append(lp.detach().float().cpu() - b)
            ents.append(ent.float().cpu())
        d = torch.cat(d_all).double()
        k3 = (d.exp() - 1 - d)
        per_seq = [float(x.abs().mean()) for x in d_all]
        vocab = trainer_pol.tokenizer.vocab_size
        pad_rows = sum(1 for s in seqs for t in s.out if t >= vocab)
        row = {"dtype": dtype, "recurrent_state_dtype": rsd, "tokens": int(d.numel()),
               "mean_abs_logprob": float(d.abs().mean()), "max_abs_logprob": float(d.abs().max()),
               "mean_signed_logprob": float(d.mean()), "k3_kl": float(k3.mean()),
               "per_sequence_mean_abs": [round(x, 6) for x in per_seq],
               "mean_abs_first_half": float(torch.cat([x[: gen // 2] for x in d_all]).abs().mean()),
               "mean_abs_second_half": float(torch.cat([x[gen // 2:] for x in d_all]).abs().mean()),
               "mean_behaviour_logprob": float(sum(sum(s.logprobs) for s in seqs) / d.numel()),
               "mean_entropy": float(torch.cat(ents).mean()), "sampled_padding_row_ids": pad_rows,
               "backend_mode": "merge", "decode_steps": decode_steps,
               "generate_s": round(t_gen, 2), "score_s": round(t_score, 2)}
        rows.append(row)
        log(f"mismatch {dtype}/{rsd}: mean |d| {row['mean_abs_logprob']:.3e}, max {row['max_abs_logprob']:.3e}, "
            f"k3 {row['k3_kl']:.3e} over {row['tokens']} tokens ({t_gen:.1f}s gen, {t_score:.1f}s score)")
        save()
        del pol, trainer_pol, engine, res
        free_memory()
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32  # fp32 build turned TF32 off


# ------------------------------------------------------------------------- long rollout
def engine_behaviour_logprobs(pol, rollout: dict, deadline: float) -> list:
    """Behaviour logprobs of every masked token of ``rollout`` as the engine computes them: each model turn
    is a new request whose prompt is the whole context so far (HFBackend.add = prefill alone, logits of its
    first token), then all turns decode together in one batched cache (HFBackend.step), fed the rollout's own
    tokens. Returns a list over all ids (0.0 where unmasked)."""
    ids, starts, G = rollout["ids"], rollout["turn_starts"], rollout["gen_len"]
    blp = [0.0] * len(ids)
    be = pol.make_backend(len(starts))
    keys = [f"turn{k}" for k in range(len(starts))]
    with torch.no_grad():
        for k, s in zip(keys, starts):
            logits = be.add(k, ids[:s])
            blp[s] = float(torch.log_softmax(logits.float(), -1)[ids[s]])
            if time.perf_counter() > deadline:
                raise TimeoutError("behaviour prefill ran past its time budget")
        for j in range(1, G):
            logits = be.step(keys, [ids[s + j - 1] for s in starts])
            tgt = torch.tensor([ids[s + j] for s in starts], device=logits.device)
            lp = torch.log_softmax(logits.float(), -1).gather(-1, tgt[:, None]).squeeze(-1).tolist()
            for s, x in zip(starts, lp):
                blp[s + j] = x
            if time.perf_counter() > deadline:
                raise TimeoutError("behaviour decode ran past its time budget")
    for k in keys:
        be.remove(k)
    del be
    return blp


def train_once(ctx: dict, pol, tok, total: int, info: dict, save) -> bool:
    """Build a rollout of ``total`` tokens, get its behaviour logprobs, train one step. Returns True on success
    (False on OOM)."""
    a = ctx["long"]
    rollout = build_rollout(tok, ctx["corpus"], total, a["prompt"], a["gen"], a["tool"])
    mask = rollout["loss_mask"]
    info.update(sequence_tokens=total, masked_tokens=sum(mask), n_turns=rollout["n_turns"],
                first_prompt_tokens=rollout["prompt_len"], generated_tokens_per_turn=rollout["gen_len"],
                tool_tokens_per_result=[min(rollout["tool_sizes"] or [0]), max(rollout["tool_sizes"] or [0])])
    dev = ctx["device"]
    tmp = tempfile.mkdtemp(prefix="floe-realvocab-")
    trainer = None
    try:
        # behaviour logprobs from the engine's decode path
        free_memory()
        if dev == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        try:
            blp = engine_behaviour_logprobs(pol, rollout, time.perf_counter() + min(ctx["left"]() * 0.4, 150))
            info["behaviour_source"] = ("engine HFBackend: per-turn prefill + batched cached decode "
                                        "(teacher-forced on the rollout's tokens), recurrent state fp32")
        except (TimeoutError, torch.cuda.OutOfMemoryError) as e:
            free_memory()
            info["behaviour_engine_error"] = f"{type(e).__name__}: {e}"
            with torch.no_grad():
                lp, _ = pol.masked_logprobs([(rollout["ids"], mask)])[0]
            blp = [0.0] * total
            for j, x in zip([i for i, m in enumerate(mask) if m], lp.float().cpu().tolist()):
                blp[j] = x
            info["behaviour_source"] = "trainer scoring (fallback: mismatch is ~0 by construction)"
        sync()
        info["behaviour_s"] = round(time.perf_counter() - t, 2)
        if dev == "cuda":
            info["behaviour_peak_gib"] = gib(torch.cuda.max_memory_allocated())
        log(f"long {total}: behaviour logprobs in {info['behaviour_s']} s ({info['behaviour_source'][:30]}...)")
        row = {"rollout_id": f"long-{total}", "group_id": "0", "reward": 1.0, "advantage": 1.0,
               "ids": rollout["ids"], "loss_mask": mask, "behaviour_logprobs": blp,
               "token_versions": [0 if m else -1 for m in mask]}
        free_memory()
        trainer = Trainer(pol, version=0, publish_dir=tmp)
        steps = info["steps"] = []
        for rep in range(ctx["long_steps"]):
            if rep > 0 and ctx["left"]() < 60:
                info["second_step_skipped"] = "time budget"
                break
            free_memory()
            if dev == "cuda":
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            t = time.perf_counter()
            res = trainer.train_step([row], config=step_config(lr=1e-5))
            wall = time.perf_counter() - t
            m = res["metrics"]
            st = {"step": rep + 1, "ok": True, "train_ms": m["train_ms"], "publish_ms": m["publish_ms"],
                  "wall_ms_incl_publish": round(wall * 1e3, 1),
                  "metrics": {k: m[k] for k in ("masked_tokens", "sequence_tokens", "mismatch_mean_abs_logprob",
                                                "mismatch_kl", "loss", "grad_norm", "entropy", "clip_fraction",
                                                "ratio_max", "staleness_mean", "skipped_step", "optimizer_steps",
                                                "publish_breakdown")}}
            if dev == "cuda":
                st["memory_allocated_before_gib"] = gib(before)
                st["max_memory_allocated_gib"] = gib(torch.cuda.max_memory_allocated())
                st["max_memory_reserved_gib"] = gib(torch.cuda.max_memory_reserved())
            steps.append(st)
            log(f"long {total} step {rep + 1}: train {m['train_ms']:.0f} ms, publish {m['publish_ms']:.0f} ms, "
                f"peak {st.get('max_memory_allocated_gib')} GiB, mismatch {m['mismatch_mean_abs_logprob']:.3e} "
                f"k3 {m['mismatch_kl']:.3e}")
            save()
        info["ok"] = True
        return True
    except torch.cuda.OutOfMemoryError as e:
        info["ok"] = False
        info["oom"] = str(e).splitlines()[0][:400]
        if dev == "cuda":
            info["peak_memory_at_oom_gib"] = gib(torch.cuda.max_memory_allocated())
        log(f"long {total}: OOM ({info.get('peak_memory_at_oom_gib')} GiB peak)")
        return False
    finally:
        if trainer is not None:
            trainer.opt.zero_grad()
        del trainer
        shutil.rmtree(tmp, ignore_errors=True)
        free_memory()
        save()


def bench_long(ctx: dict, out: dict, save) -> None:
    tok = load_tokenizer(ctx["tokenizer"])
    pol, _ = build_policy(ctx["model"], tokenizer=ctx["tokenizer"], device=ctx["device"], dtype=ctx["dtype"],
                          recurrent_state_dtype="fp32", seed=0, for_training=True)
    sec = out["long_rollout"] = {"model": ctx["model"], "dtype": ctx["dtype"], "recurrent_state_dtype": "fp32",
                                 "config": step_config(lr=1e-5), "attempts": []}
    if ctx["device"] == "cuda":
        sec["weights_gib"] = gib(torch.cuda.memory_allocated())
    for total in ctx["long_lengths"]:
        if ctx["left"]() < 45:
            sec["attempts"].append({"sequence_tokens": total, "skipped": "time budget"})
            break
        info = {}
        sec["attempts"].append(info)
        ok = train_once(ctx, pol, tok, total, info, save)
        if ok:
            sec["largest_fitting_tokens"] = total
            break
    del pol
    free_memory()


# ------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="CPU-sized model and lengths, same tokenizer")
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER)
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--sections", default="throughput,mismatch,long_rollout")
    ap.add_argument("--dtype", default=None, help="model dtype of throughput/long_rollout (default bf16 on GPU, fp32 on CPU)")
    ap.add_argument("--mismatch-configs", default=None,
                    help="dtype/state pairs, default bf16/model,bf16/fp32,fp32/fp32 (CPU smoke: fp32/model,fp32/fp32)")
    ap.add_argument("--budget-s", type=float, default=None, help="whole-run time budget (default 530 GPU, 900 smoke)")
    args = ap.parse_args()
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    budget = args.budget_s or (900.0 if args.smoke else 530.0)
    deadline = T_START + budget
    ctx = {"args": args, "tokenizer": args.tokenizer, "device": device,
           "dtype": args.dtype or ("bf16" if device == "cuda" else "fp32"), "left": lambda: deadline - time.perf_counter()}
    if args.smoke:
        ctx.update(model=args.model or SMOKE_MODEL, concurrency=[1, 4], prompt_len=64, max_tokens=12,
                   mm_sequences=3, mm_gen=16, long={"prompt": 128, "gen": 30, "tool": 40},
                   long_lengths=[1024, 512], long_steps=2, reserve_after_throughput=120, reserve_after_mismatch=60)
        mm_dtypes = [("fp32", "model"), ("fp32", "fp32")] if device == "cpu" else None
    else:
        ctx.update(model=args.model or MODEL, concurrency=[1, 8, 32], prompt_len=512, max_tokens=128,
                   mm_sequences=8, mm_gen=256, long={"prompt": 1024, "gen": 300, "tool": 400},
                   long_lengths=[16384, 8192, 4096], long_steps=2, reserve_after_throughput=330,
                   reserve_after_mismatch=170)
        mm_dtypes = None
    # bf16 model with bf16 ('model') and fp32 recurrent state, then all-fp32 (CPU smoke: no bf16 engine)
    if args.mismatch_configs:
        mm_dtypes = [tuple(x.split("/")) for x in args.mismatch_configs.split(",")]
    ctx["mm_configs"] = mm_dtypes or [("bf16", "model"), ("bf16", "fp32"), ("fp32", "fp32")]
    import transformers
    tok = load_tokenizer(args.tokenizer)
    ctx["corpus"] = corpus_ids(tok, 60_000 if not args.smoke else 8_000)
    out = {"bench": "gpu_realvocab", "smoke": args.smoke, "created_unix": time.time(),
           "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "cwd": os.getcwd(),
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "torch": torch.__version__, "transformers": transformers.__version__, "device": device,
                       "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                       "gpu_memory_gib": (gib(torch.cuda.get_device_properties(0).total_memory)
                                          if torch.cuda.is_available() else None),
                       "flash_linear_attention": _has("fla"), "causal_conv1d": _has("causal_conv1d")},
           "tokenizer": {"path": args.tokenizer, **{k: v for k, v in tok.describe().items()
                                                    if k not in ("special_token_ids", "special_token_texts")}},
           "model": ctx["model"], "corpus_tokens": len(ctx["corpus"]), "budget_s": budget, "errors": {}}
    try:
        from floe_engine.hf_model import make_config, parse_spec
        cfg, _, _ = parse_spec(ctx["model"][3:])
        c = make_config(cfg, tok)
        out["model_config"] = {"vocab_size": c.vocab_size, "layer_types": list(getattr(c, "layer_types", []) or []),
                               "hidden_size": c.hidden_size, "num_hidden_layers": c.num_hidden_layers}
        with torch.device("meta"):
            m = transformers.AutoModelForCausalLM.from_config(c)
        out["parameters"] = sum(p.numel() for p in m.parameters())
        out["embedding_parameters"] = m.get_input_embeddings().weight.numel()
        del m
        log(f"model {out['parameters'] / 1e6:.1f} M parameters ({out['embedding_parameters'] / 1e6:.1f} M tied "
            f"embedding), vocab {c.vocab_size}, tokenizer {tok.vocab_size} ids, device {device}")
    except Exception as e:  # informative only
        out["errors"]["parameter_count"] = f"{type(e).__name__}: {e}"

    def save():
        out["elapsed_s"] = round(time.perf_counter() - T_START, 1)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(args.out + ".tmp", args.out)

    save()
    sections = {"throughput": bench_throughput, "mismatch": bench_mismatch, "long_rollout": bench_long}
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        try:
            sections[name](ctx, out, save)
        except Exception as e:  # record it and run the other sections
            traceback.print_exc()
            out["errors"][name] = f"{type(e).__name__}: {e}"
            free_memory()
        out.setdefault("section_s", {})[name] = round(time.perf_counter() - t0, 1)
        save()
    log(f"wrote {args.out}")
    summary(out)
    if out["errors"]:
        sys.exit(1)


def _has(mod: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(mod) is not None


def summary(out: dict) -> None:
    print("\n== summary ==")
    print(f"model {out.get('parameters')} params, {out['machine']['gpu'] or out['machine']['device']}, "
          f"torch {out['machine']['torch']}, transformers {out['machine']['transformers']}")
    for r in (out.get("throughput") or {}).get("runs", []):
        print(f"throughput c={r['concurrency']:>2}: {r['tokens_per_s']:>8} tok/s  "
              f"{r['tokens_per_s_per_stream']:>7} tok/s/stream  {r['wall_ms_per_decode_step']} ms/step")
    for r in (out.get("mismatch") or {}).get("runs", []):
        if "skipped" in r:
            print(f"mismatch {r['dtype']}/{r['recurrent_state_dtype']}: skipped")
        else:
            print(f"mismatch {r['dtype']}/{r['recurrent_state_dtype']:5}: mean|d| {r['mean_abs_logprob']:.3e} "
                  f"max|d| {r['max_abs_logprob']:.3e} k3 {r['k3_kl']:.3e}")
    for a in (out.get("long_rollout") or {}).get("attempts", []):
        for s in a.get("steps", []):
            print(f"long {a['sequence_tokens']} step {s['step']}: train {s['train_ms']} ms, peak "
                  f"{s.get('max_memory_allocated_gib')} GiB, masked {s['metrics']['masked_tokens']}, mismatch "
                  f"{s['metrics']['mismatch_mean_abs_logprob']:.3e} k3 {s['metrics']['mismatch_kl']:.3e}")
        if a.get("oom"):
            print(f"long {a['sequence_tokens']}: OOM at {a.get('peak_memory_at_oom_gib')} GiB")
    if out["errors"]:
        print("errors:", out["errors"])


if __name__ == "__main__":
    main()
