"""GPU benchmark of the reference engine/trainer on random-init Hugging Face models.

    python bench/engine/gpu_bench.py --out gpu_bench.json          # on an H200 (torch 2.x, transformers 5.x)
    python bench/engine/gpu_bench.py --smoke --out smoke.json      # CPU-sized, minutes at most

No network is needed: every model is initialised from a config. Sections
(each is written to --out as soon as it finishes, so a timeout keeps data):
  throughput     tokens/s of a ~0.5B qwen3-like model through the engine's
                 scheduler (continuous batching) at several concurrencies;
  weight_update  trainer train step -> publish (safetensors) -> engine load
                 + cache rebuild of in-flight sequences -> serving the new
                 version, in milliseconds;
  mismatch       engine-vs-trainer gap on a small qwen3_5_text (hybrid linear
                 attention): logprobs from the engine's cached token-by-token
                 decode vs a full-sequence forward, with the recurrent state
                 kept in bf16 ('model') vs fp32, reported as mean/max |Δ logprob|
                 of the sampled tokens and the mean KL(engine || trainer).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "engine"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from bench_record import step_config  # noqa: E402

from floe_engine import checkpoint as ckpt  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.sampling import SamplingParams  # noqa: E402
from floe_engine.scheduler import Engine  # noqa: E402
from floe_engine.trainer import Trainer  # noqa: E402

# ~0.5B parameters: Qwen3-0.6B's shape with 24 layers (0.38B in the blocks + 0.16B tied embeddings)
QWEN3_05B = ("hf:qwen3:hidden_size=1024,intermediate_size=3072,num_hidden_layers=24,num_attention_heads=16,"
             "num_key_value_heads=8,head_dim=128,vocab_size=151936,tie_word_embeddings=true,"
             "max_position_embeddings=4096")
# a small hybrid model: 8 layers, 3 of every 4 gated-delta-net (linear attention)
QWEN35_SMALL = ("hf:qwen3_5_text:hidden_size=512,intermediate_size=1536,num_hidden_layers=8,num_attention_heads=8,"
                "num_key_value_heads=2,head_dim=64,linear_num_key_heads=4,linear_num_value_heads=8,"
                "linear_key_head_dim=64,linear_value_head_dim=64,vocab_size=32000,max_position_embeddings=4096")
SMOKE_QWEN3 = ("hf:qwen3:hidden_size=64,intermediate_size=128,num_hidden_layers=2,num_attention_heads=4,"
               "num_key_value_heads=2,head_dim=16,vocab_size=512,max_position_embeddings=1024")
SMOKE_QWEN35 = ("hf:qwen3_5_text:hidden_size=64,intermediate_size=128,num_hidden_layers=4,num_attention_heads=4,"
                "num_key_value_heads=2,head_dim=16,linear_num_key_heads=2,linear_num_value_heads=4,"
                "linear_key_head_dim=16,linear_value_head_dim=16,vocab_size=512,max_position_embeddings=1024")


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def rand_ids(n: int, gen: torch.Generator):
    return torch.randint(0, 256, (n,), generator=gen).tolist()


def run_requests(engine: Engine, prompts, max_tokens: int, concurrency: int) -> dict:
    """Send prompts from `concurrency` client threads; tokens/s over the whole run."""
    pending = list(prompts)
    lock = threading.Lock()
    tokens = [0]

    def client():
        while True:
            with lock:
                if not pending:
                    return
                p = pending.pop()
            req = engine.submit(p, SamplingParams(max_tokens=max_tokens, ignore_eos=True, seed=len(pending)))
            req.done.wait()
            if req.error:
                raise RuntimeError(req.error)
            with lock:
                tokens[0] += sum(len(s.out) for s in req.seqs)

    sync()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sync()
    wall = time.perf_counter() - t0
    return {"concurrency": concurrency, "requests": len(prompts), "completion_tokens": tokens[0],
            "wall_s": round(wall, 3), "tokens_per_s": round(tokens[0] / wall, 1)}


def bench_throughput(spec: str, device: str, dtype: str, conc, prompt_len: int, max_tokens: int, out: dict):
    pol, _ = build_policy(spec, device=device, dtype=dtype, seed=0)
    rows = []
    out["throughput"] = {"model": spec, "parameters": pol.num_parameters(), "dtype": dtype,
                         "prompt_tokens": prompt_len, "max_tokens": max_tokens, "runs": rows}
    gen = torch.Generator().manual_seed(0)
    engine = Engine(pol, max_batch=max(conc), seed=0).start()
    try:
        run_requests(engine, [rand_ids(prompt_len, gen) for _ in range(2)], 8, 2)  # warm-up
        for c in conc:
            r = run_requests(engine, [rand_ids(prompt_len, gen) for _ in range(max(c, 2) * 2)], max_tokens, c)
            r["backend_mode"] = engine.backend.mode if hasattr(engine.backend, "mode") else "slots"
            rows.append(r)
            print(f"[gpu-bench] throughput c={c}: {r['tokens_per_s']} tok/s", flush=True)
    finally:
        engine.stop()
    del engine, pol
    torch.cuda.empty_cache() if torch.cuda.is_available() else None


def bench_weight_update(spec: str, device: str, dtype: str, prompt_len: int, max_tokens: int, inflight: int,
                        out: dict, repeats: int = 2):
    tmp = tempfile.mkdtemp(prefix="floe-gpu-bench-")
    trainer_pol, _ = build_policy(spec, device=device, dtype=dtype, seed=0, for_training=True)
    trainer = Trainer(trainer_pol, 0, tmp, publish_dtype=trainer_pol.dtype)
    v0 = trainer.ensure_published()
    pol, _ = build_policy(spec, checkpoint=v0, device=device, dtype=dtype)
    engine = Engine(pol, max_batch=max(inflight, 8), seed=0).start()
    gen = torch.Generator().manual_seed(1)
    rows = []
    out["weight_update"] = {"model": spec, "parameters": pol.num_parameters(), "dtype": dtype,
                            "checkpoint_bytes": ckpt.read_meta(v0)["bytes"], "inflight_sequences": inflight,
                            "updates": rows}
    try:
        # behaviour samples for the train step
        reqs = [engine.submit(rand_ids(prompt_len, gen), SamplingParams(max_tokens=max_tokens, ignore_eos=True,
                                                                         seed=i)) for i in range(8)]
        samples = []
        for i, r in enumerate(reqs):
            r.done.wait()
            s = r.seqs[0]
            samples.append({"rollout_id": f"r{i}", "group_id": str(i // 4), "reward": float(i % 2),
                            "advantage": 1.0 if i % 2 else -1.0, "ids": list(s.prompt) + list(s.out),
                            "loss_mask": [0] * len(s.prompt) + [1] * len(s.out),
                            "behaviour_logprobs": [0.0] * len(s.prompt) + list(s.logprobs),
                            "token_versions": [-1] * len(s.prompt) + list(s.versions)})
        for rep in range(repeats):
            live = [engine.submit(rand_ids(prompt_len, gen), SamplingParams(max_tokens=4 * max_tokens,
                                                                            ignore_eos=True, seed=100 + i))
                    for i in range(inflight)]
            while any(len(s.out) < 4 for r in live for s in r.seqs):
                time.sleep(0.005)
            sync()
            t0 = time.perf_counter()
            res = trainer.train_step(samples, step_config(lr=1e-5))
            sync()
            t1 = time.perf_counter()
            load_t: dict = {}
            meta, sd = ckpt.load(res["path"], timings=load_t)
            t2 = time.perf_counter()
            upd_t: dict = {}
            rebuilt = engine.update_weights(sd, res["version"], upd_t)
            sync()
            t3 = time.perf_counter()
            engine.abort(None)
            rows.append({"version": res["version"], "train_ms": res["metrics"]["train_ms"],
                         "publish_ms": res["metrics"]["publish_ms"], "publish_breakdown":
                             res["metrics"]["publish_breakdown"], "load_ms": round((t2 - t1) * 1e3, 1),
                         "load_breakdown": load_t, "engine_breakdown": upd_t,
                         "swap_and_rebuild_ms": round((t3 - t2) * 1e3, 1), "rebuilt_sequences": rebuilt,
                         "publish_to_serving_ms": round(res["metrics"]["publish_ms"] + (t3 - t1) * 1e3, 1),
                         "step_to_serving_ms": round((t3 - t0) * 1e3, 1),
                         "mismatch_mean_abs_logprob": res["metrics"]["mismatch_mean_abs_logprob"],
                         "mismatch_kl": res["metrics"]["mismatch_kl"]})
            print(f"[gpu-bench] weight update {rep}: {rows[-1]}", flush=True)
            # the engine now serves the new version
            r = engine.submit(rand_ids(16, gen), SamplingParams(max_tokens=2, ignore_eos=True))
            r.done.wait()
            assert r.seqs[0].versions == [res["version"]] * 2
    finally:
        engine.stop()
    del engine, pol, trainer, trainer_pol
    torch.cuda.empty_cache() if torch.cuda.is_available() else None


def _trainer_logits(pol, prompt, comp):
    """Full-sequence forward exactly as the trainer scores (Policy.forward_hidden + _head)."""
    ids = torch.tensor([prompt + comp[:-1]], device=pol.device)
    with torch.no_grad():
        hidden, _ = pol.forward_hidden(ids, use_cache=False)
        return pol._head(hidden[0, len(prompt) - 1:])


def bench_mismatch(spec: str, device: str, prompt_len: int, gen_len: int, batch: int, out: dict):
    rows = []
    out["mismatch"] = {"model": spec, "prompt_tokens": prompt_len, "decoded_tokens": gen_len,
                       "sequences": batch, "runs": rows}
    for dtype, rsd in (("bf16", "model"), ("bf16", "fp32"), ("fp32", "fp32")):
        pol, _ = build_policy(spec, device=device, dtype=dtype, seed=0, recurrent_state_dtype=rsd)
        out["mismatch"]["parameters"] = pol.num_parameters()
        # the trainer's own policy object (same dtype as the engine; fp32 masters live in its optimizer)
        trainer_pol, _ = build_policy(spec, device=device, dtype=dtype, seed=0, recurrent_state_dtype=rsd,
                                      for_training=True)
        trainer_pol.load_state_dict(pol.state_dict())
        scorers = [("trainer_full_forward", trainer_pol, None)]
        if dtype == "bf16":  # the usual alternative, for contrast: fp32 weights under bf16 autocast
            amp, _ = build_policy(spec, device=device, dtype="fp32", seed=0, recurrent_state_dtype=rsd)
            amp.load_state_dict({k: v.float() for k, v in pol.state_dict().items()})
            scorers.append(("fp32_weights_bf16_autocast", amp, torch.bfloat16))
        gen = torch.Generator().manual_seed(7)
        prompts = [rand_ids(prompt_len, gen) for _ in range(batch)]
        be = pol.make_backend(batch)
        eng_logits = [[] for _ in range(batch)]
        toks = [[] for _ in range(batch)]
        g2 = torch.Generator(device="cpu").manual_seed(3)
        last = []
        for i, p in enumerate(prompts):
            lg = be.add(f"s{i}", p)
            eng_logits[i].append(lg)
            last.append(int(torch.multinomial(torch.softmax(lg.float().cpu(), -1), 1, generator=g2)))
            toks[i].append(last[-1])
        for _ in range(gen_len - 1):
            lg = be.step([f"s{i}" for i in range(batch)], last)
            last = []
            for i in range(batch):
                eng_logits[i].append(lg[i])
                t = int(torch.multinomial(torch.softmax(lg[i].float().cpu(), -1), 1, generator=g2))
                toks[i].append(t)
                last.append(t)
        res = {}
        for name, scorer, amp_dtype in scorers:
            abs_d, kls, maxd = [], [], 0.0
            for i in range(batch):
                e = torch.log_softmax(torch.stack(eng_logits[i]).float(), -1)
                with torch.autocast(device_type=scorer.device.type, dtype=amp_dtype or torch.bfloat16,
                                    enabled=amp_dtype is not None):
                    t = torch.log_softmax(_trainer_logits(scorer, prompts[i], toks[i]).float(), -1)
                idx = torch.tensor(toks[i], device=e.device)
                d = (e.gather(-1, idx[:, None]) - t.gather(-1, idx[:, None])).abs().squeeze(-1)
                abs_d.append(d.mean().item())
                maxd = max(maxd, d.max().item())
                kls.append((e.exp() * (e - t)).sum(-1).mean().item())
            res[name] = {"mean_abs_logprob": sum(abs_d) / batch, "max_abs_logprob": maxd,
                         "kl_engine_trainer": sum(kls) / batch}
        rows.append({"dtype": dtype, "recurrent_state_dtype": rsd,
                     "backend_mode": getattr(be, "mode", "slots"), **res})
        print(f"[gpu-bench] mismatch dtype={dtype} state={rsd}: {res}", flush=True)
        del pol, trainer_pol, be, scorers
        torch.cuda.empty_cache() if torch.cuda.is_available() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="CPU-sized models and lengths (checks the code runs)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--sections", default="throughput,weight_update,mismatch")
    ap.add_argument("--throughput-model", default=None)
    ap.add_argument("--mismatch-model", default=None)
    ap.add_argument("--concurrency", default=None, help="e.g. 1,8,32")
    args = ap.parse_args()
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if args.smoke:
        tp_model, mm_model = args.throughput_model or SMOKE_QWEN3, args.mismatch_model or SMOKE_QWEN35
        conc = [1, 4]
        prompt_len, max_tokens, gen_len, inflight = 48, 16, 24, 2
    else:
        tp_model, mm_model = args.throughput_model or QWEN3_05B, args.mismatch_model or QWEN35_SMALL
        conc = [1, 8, 32]
        prompt_len, max_tokens, gen_len, inflight = 512, 128, 256, 8
    if args.concurrency:
        conc = [int(c) for c in args.concurrency.split(",")]
    dtype = "bf16" if device != "cpu" else "fp32"
    import transformers
    out = {"bench": "gpu_bench", "smoke": args.smoke, "created_unix": time.time(),
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "torch": torch.__version__, "transformers": transformers.__version__, "device": device,
                       "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
           "errors": {}}

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)

    sections = {
        "throughput": lambda: bench_throughput(tp_model, device, dtype, conc, prompt_len, max_tokens, out),
        "weight_update": lambda: bench_weight_update(tp_model, device, dtype, prompt_len, max_tokens, inflight, out),
        "mismatch": lambda: bench_mismatch(mm_model, device, prompt_len, gen_len, 4, out),
    }
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        try:
            sections[name]()
        except Exception as e:  # keep going: record it and run the other sections
            traceback.print_exc()
            out["errors"][name] = f"{type(e).__name__}: {e}"
        out.setdefault("section_s", {})[name] = round(time.perf_counter() - t0, 1)
        save()
    print(f"[gpu-bench] wrote {args.out}", flush=True)
    if out["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
