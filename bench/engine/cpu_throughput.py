"""CPU throughput of the reference engine and trainer with the tiny model.

    python bench/engine/cpu_throughput.py --out bench.json [--models 'tiny;tiny:d_model=64']

For each model: starts a trainer and an engine (subprocesses on free ports),
then measures
  * tokens/s with 1 client and with 8 concurrent clients (distinct ~550-byte
    prompts, 80 completion tokens each, EOS ignored so lengths are fixed);
  * tokens/s for RL-style groups (one request, n=8 samples of one prompt);
  * one train step on 8 groups x 8 samples (train_ms, publish_ms) and the
    engine's weight-update latency (load + cache rebuild).
Writes one JSON object: {"machine": ..., "results": [per model ...]}.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine"))
sys.path.insert(0, HERE)
from conftest import Server  # noqa: E402  (the tests' subprocess server helper)
from bench_record import step_config  # noqa: E402

WORDS = ("the parser fails when input is empty traceback error line file test expected got returns value "
         "function module assert fix bug issue repository python call tool observation output").split()


def make_prompt(rng: random.Random, n_bytes: int = 550) -> str:
    head = f"Issue #{rng.randrange(10000)}: "
    words = []
    while len(head) + len(" ".join(words)) < n_bytes:
        words.append(rng.choice(WORDS))
    return (head + " ".join(words))[:n_bytes] + "\n"


def run_clients(eng: Server, prompts, concurrency: int, max_tokens: int, n: int = 1) -> dict:
    lock = threading.Lock()
    pending = list(prompts)
    lat, toks = [], [0]

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                p = pending.pop()
            t0 = time.perf_counter()
            r = eng.post("/v1/completions", {"prompt": p, "max_tokens": max_tokens, "n": n, "ignore_eos": True})
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                toks[0] += r["usage"]["completion_tokens"]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()
    return {"concurrency": concurrency, "n": n, "requests": len(prompts), "completion_tokens": toks[0],
            "wall_s": round(wall, 3), "tokens_per_s": round(toks[0] / wall, 1),
            "latency_p50_s": round(lat[len(lat) // 2], 3), "latency_max_s": round(lat[-1], 3)}


def bench_model(model: str, args, tmp: str) -> dict:
    rng = random.Random(0)
    logs = os.path.join(tmp, "logs")
    os.makedirs(logs, exist_ok=True)
    pub = os.path.join(tmp, "pub-" + str(abs(hash(model)) % 10000))
    tr = Server("floe_engine.trainer_server", ["--model", model, "--publish-dir", pub, "--threads", args.threads],
                os.path.join(logs, "trainer.log"))
    v0 = os.path.dirname(tr.ready["path"])
    eng = Server("floe_engine.inference_server", ["--model", model, "--checkpoint", v0, "--max-batch",
                                                   args.max_batch, "--threads", args.threads],
                 os.path.join(logs, "engine.log"))
    try:
        res = {"model": model, "parameters": eng.ready["parameters"], "max_batch": args.max_batch,
               "threads": args.threads, "prompt_bytes": args.prompt_bytes, "max_tokens": args.max_tokens}
        run_clients(eng, [make_prompt(rng, args.prompt_bytes) for _ in range(2)], 1, 8)  # warm-up
        res["c1"] = run_clients(eng, [make_prompt(rng, args.prompt_bytes) for _ in range(args.requests)], 1,
                                args.max_tokens)
        res["c8"] = run_clients(eng, [make_prompt(rng, args.prompt_bytes) for _ in range(args.requests * 2)], 8,
                                args.max_tokens)
        res["group_n8"] = run_clients(eng, [make_prompt(rng, args.prompt_bytes) for _ in range(4)], 1,
                                      args.max_tokens, n=8)
        # a long decode: decode-only speed with one sequence
        t0 = time.perf_counter()
        r = eng.post("/v1/completions", {"prompt": make_prompt(rng, 100), "max_tokens": 400, "ignore_eos": True})
        res["decode_only_1seq_tokens_per_s"] = round(r["usage"]["completion_tokens"] / (time.perf_counter() - t0), 1)
        # one RL step: 8 groups x 8 samples, behaviour logprobs from the engine
        samples = []
        for g in range(8):
            c = eng.post("/v1/completions", {"prompt": make_prompt(rng, args.prompt_bytes), "n": 8,
                                             "max_tokens": args.max_tokens, "ignore_eos": True,
                                             "return_token_ids": True})
            for i, ch in enumerate(c["choices"]):
                p, gen = ch["prompt_token_ids"], ch["token_ids"]
                samples.append({"rollout_id": f"{g}-{i}", "group_id": str(g), "reward": float(i % 2),
                                "advantage": 1.0 if i % 2 else -1.0, "ids": p + gen,
                                "loss_mask": [0] * len(p) + [1] * len(gen),
                                "behaviour_logprobs": [0.0] * len(p) + ch["logprobs"]["token_logprobs"],
                                "token_versions": [-1] * len(p) + ch["weight_versions"]})
        steps = []
        for _ in range(args.train_steps):
            t0 = time.perf_counter()
            st = tr.post("/train_step", {"samples": samples, "config": step_config(lr=1e-4)})
            wall = time.perf_counter() - t0
            t1 = time.perf_counter()
            up = eng.post("/update_weights", {"path": st["path"], "version": st["version"]})
            steps.append({"train_ms": st["metrics"]["train_ms"], "publish_ms": st["metrics"]["publish_ms"],
                          "http_wall_ms": round(wall * 1e3, 1), "engine_load_ms": up["load_ms"],
                          "update_wall_ms": round((time.perf_counter() - t1) * 1e3, 1),
                          "mismatch_mean_abs_logprob": st["metrics"]["mismatch_mean_abs_logprob"]})
        res["train_step"] = {"samples": len(samples), "tokens": sum(sum(s["loss_mask"]) for s in samples),
                             "steps": steps,
                             "train_ms_mean": round(sum(s["train_ms"] for s in steps) / len(steps), 1)}
        return res
    finally:
        eng.kill()
        tr.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="tiny", help="';'-separated model specs, e.g. 'tiny;tiny:d_model=64,n_layers=3'")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--prompt-bytes", type=int, default=550)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--train-steps", type=int, default=2)
    args = ap.parse_args()
    specs = [m.strip() for m in args.models.split(";") if m.strip()]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in specs:
            print(f"[bench] {m} ...", flush=True)
            r = bench_model(m, args, tmp)
            print(f"[bench] {m}: {r['parameters']} params | c1 {r['c1']['tokens_per_s']} tok/s | "
                  f"c8 {r['c8']['tokens_per_s']} tok/s | n=8 group {r['group_n8']['tokens_per_s']} tok/s | "
                  f"decode-only {r['decode_only_1seq_tokens_per_s']} tok/s | train step "
                  f"{r['train_step']['train_ms_mean']} ms ({r['train_step']['samples']} samples)", flush=True)
            results.append(r)
    import torch
    out = {"bench": "cpu_throughput", "created_unix": time.time(),
           "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                       "torch": torch.__version__, "blas": _blas()},
           "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"[bench] wrote {args.out}")


def _blas() -> str:
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower()}
        return ", ".join(sorted(os.path.basename(x) for x in libs)) or "unknown"
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
