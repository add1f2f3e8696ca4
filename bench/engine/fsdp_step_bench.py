"""One FSDP2 train step of a Qwen3-4B- or Qwen3.5-4B-shaped model (random init, real vocabulary) on one GPU.

    python3 bench/engine/fsdp_step_bench.py --out $OUT/fsdp_step_h200.json          # one H200
    python3 bench/engine/fsdp_step_bench.py --model qwen3.5-4b --out $OUT/fsdp_step_h200_qwen3.5.json
    .floe/venv/bin/python bench/engine/fsdp_step_bench.py --smoke --out /tmp/s.json   # CPU check

The trainer is floe_engine.fsdp_trainer.FSDPTrainer at world size 1 (a one-process gloo/NCCL
group; fully_shard on every decoder layer and the root, fp32 master shards, bf16 compute,
activation checkpointing on), the model ``hf:qwen3`` with Qwen3-4B's shape: hidden 2560, 36
layers, 32 query / 8 KV heads of 128, MLP 9728, tied embeddings, vocab_size 151,936 (the real
vocabulary: the head and its log-softmax run over all 151,936 ids at every trained position).
Each layout is a 32k-token batch of random token ids (the first 10% of each sequence is an
untrained prompt, the rest trained, advantages +1/-1), run as ONE micro-batch:
``1x32768`` one 32k-token rollout, ``8x4096`` eight 4k-token rollouts. Each layout runs two
train steps (the first includes CUDA/cuBLAS warm-up); each step publishes the 8 GB bf16 HF
folder (FSDPTrainer.publish: bf16 gather on the GPU, writer threads hashing xxh3-128 as they
write; bench/results/fsdp_step_h200.json was measured with the earlier path: fp32 gather to
CPU -> save_pretrained -> sha256), and the last published folder is loaded back with
checkpoint.load (which verifies every checksum): publish + load = publish-to-loaded on one
machine. bench/engine/publish_bench.py compares the two publish paths side by side. The JSON is rewritten after each section, so a timeout keeps what was measured.
"""
from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_record import Record, arguments, model_spec, step_config  # noqa: E402  (puts engine/ on the path)

import torch  # noqa: E402

from floe_engine import checkpoint as ckpt  # noqa: E402
from floe_engine.fsdp_trainer import FSDPTrainer  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402


def batch(n: int, length: int, vocab: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        ids = torch.randint(0, vocab, (length,), generator=g).tolist()
        p = max(1, length // 10)
        mask = [0] * p + [1] * (length - p)
        out.append({"rollout_id": f"r{i}", "group_id": "g", "reward": float(i % 2 == 0),
                    "advantage": 1.0 if i % 2 == 0 else -1.0, "ids": ids, "loss_mask": mask,
                    # about a random model's log-probs: ratios near 1, as on-policy
                    "behaviour_logprobs": [-math.log(vocab) if m else 0.0 for m in mask],
                    "token_versions": [0 if m else -1 for m in mask]})
    return out


def main() -> None:
    ap = arguments(__doc__)
    ap.add_argument("--layouts", default="1x32768,8x4096")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--no-activation-checkpointing", action="store_true")
    ap.add_argument("--publish-dir", default=None, help="default: a temporary folder (deleted)")
    a = ap.parse_args()
    res = Record(a.out, sections={})
    save = res.save
    ctx = res.open_device(a.smoke)
    dev = ctx.device
    layouts = ["2x256"] if a.smoke else a.layouts.split(",")
    pub = a.publish_dir or tempfile.mkdtemp(prefix="fsdp-bench-")
    t0 = time.perf_counter()
    with torch.device(dev):  # random init on the device (a 4B init on the CPU takes minutes)
        policy, _ = build_policy(model_spec(a.model, a.smoke), None, seed=0, device=str(dev),
                                 dtype="fp32" if a.smoke else "bf16", for_training=True)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    trainer = FSDPTrainer(policy, 0, pub, ctx, state_every=0, activation_checkpointing=not a.no_activation_checkpointing,
                          publish_dtype=policy.dtype)
    res["model"] = {"spec": model_spec(a.model, a.smoke), "parameters": policy.num_parameters(),
                    "vocab_size": policy.vocab_size, "dtype": str(policy.dtype), "build_s": round(build_s, 2),
                    "shard_s": round(time.perf_counter() - t0, 2),
                    "activation_checkpointing": not a.no_activation_checkpointing,
                    "memory_after_shard_bytes": torch.cuda.memory_allocated(dev) if dev.type == "cuda" else None}
    save()
    last_path = None
    for layout in layouts:
        n, length = (int(x) for x in layout.split("x"))
        sec = res["sections"][layout] = {"samples": n, "tokens_per_sample": length, "steps": []}
        try:
            for step in range(a.steps):
                samples = batch(n, length, policy.vocab_size, seed=step)
                r = trainer.train_step(samples, step_config(micro_batch_tokens=n * length))
                m = r["metrics"]
                sec["steps"].append({k: m.get(k) for k in (
                    "loss", "grad_norm", "train_ms", "publish_ms", "publish_breakdown", "tokens_per_s", "mfu",
                    "peak_memory_bytes", "forward_tokens", "masked_tokens", "world_size", "skipped_step")})
                prev = ckpt.version_dir(pub, r["version"] - 1)
                if os.path.isdir(prev):
                    shutil.rmtree(prev)  # the disk holds few 8 GB versions
                last_path = r["path"]
                s = sec["steps"][-1]
                print(f"{layout} step {step}: train {s['train_ms'] / 1e3:.2f} s, {s['tokens_per_s']:.0f} tok/s, "
                      f"mfu {s['mfu']}, peak {s['peak_memory_bytes'] / 2**30:.1f} GiB, "
                      f"publish {s['publish_ms'] / 1e3:.2f} s {s['publish_breakdown']}", flush=True)
                save()
        except torch.cuda.OutOfMemoryError as e:
            sec["oom"] = str(e)[:500]
            print(f"{layout}: out of memory", flush=True)
            torch.cuda.empty_cache()
        except Exception:
            sec["error"] = traceback.format_exc()[-2000:]
            print(sec["error"], flush=True)
        save()
    if last_path:
        t0 = time.perf_counter()
        meta, sd = ckpt.load(last_path)
        res["load"] = {"load_verify_ms": round((time.perf_counter() - t0) * 1e3, 1), "tensors": len(sd),
                       "bytes": meta.get("bytes"), "files": sorted(meta.get("files", {}))}
        print("load (checksum verify + read):", res["load"], flush=True)
        del sd
    res.finish()
    if not a.publish_dir:
        shutil.rmtree(pub, ignore_errors=True)


if __name__ == "__main__":
    main()
