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

Paths (``--paths``, run side by side on the same trainer and weights, one after another): the
micro-batching and attention of a step. ``padded``: right-padded micro-batches, transformers'
SDPA causal attention (the trainer's default before issue 44); ``packed_dense``: samples packed
into one sequence with the dense [T, T] block-diagonal mask (the old ``--pack``); ``packed``:
packed with variable-length attention and no mask (``floe_engine.packed_attention``, the default
now). A model with linear-attention layers (Qwen3.5) cannot pack: its paths run padded.

Beside 6·N MFU each step reports the FLOPs it executed (``step_profile.executed_flops``:
attention and linear attention, the head, the recompute of activation checkpointing) as a share
of the GPU's peak (``executed_mfu``); with ``--profile`` one more step per layout and path runs
under the PyTorch profiler and ``phases`` gives its GPU time by phase (forward, backward,
recompute, attention, head, optimizer, collectives; ``step_profile`` says how each is counted)
and the top kernels.
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
import step_profile  # noqa: E402

import torch  # noqa: E402

from floe_engine import checkpoint as ckpt  # noqa: E402
from floe_engine import gated_delta, packed_attention, sharding, step_metrics  # noqa: E402
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


def use_previous_optimizer(opt) -> None:
    """Put the optimizer step floe ran before fused AdamW back on ``opt`` (a ShardedOptimizer):
    the default multi-tensor AdamW, each gradient's squares summed in fp64, a mul_ per tensor."""
    import types
    g = opt.opt.param_groups[0]
    opt.opt = torch.optim.AdamW(opt.params, lr=0.0, betas=g["betas"], weight_decay=0.0, eps=g["eps"])

    def grad_norm(self) -> float:
        grads = [self._local(p.grad) for p in self.params if p.grad is not None]
        sq = torch.zeros((), dtype=torch.float64, device=grads[0].device)
        for gr in grads:
            sq += gr.detach().double().pow(2).sum()
        if torch.distributed.is_initialized():
            if sq.device.type == "cpu" and torch.distributed.get_backend() == "nccl":
                sq = sq.cuda()
            torch.distributed.all_reduce(sq)
        return float(sq.sqrt())

    def clip_and_step(self, max_norm: float) -> float:
        norm = self.grad_norm()
        if math.isfinite(norm):
            coef = min(1.0, max_norm / (norm + 1e-6))
            with torch.no_grad():
                for p in self.params:
                    if p.grad is not None:
                        self._local(p.grad).mul_(coef)
            self.opt.step()
        self.zero_grad()
        return norm
    opt.grad_norm = types.MethodType(grad_norm, opt)
    opt.clip_and_step = types.MethodType(clip_and_step, opt)


PATHS = {"padded": (False, False), "packed_dense": (True, True), "packed": (True, False)}  # (pack, dense mask)


def main() -> None:
    ap = arguments(__doc__)
    ap.add_argument("--layouts", default="1x32768,8x4096")
    ap.add_argument("--paths", default="padded,packed", help=f"comma-separated, of {sorted(PATHS)}")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--gdn-kernels", default="floe",
                    help="linear-attention models: comma-separated of floe (floe_engine.gated_delta) and "
                         "reference (transformers' torch kernel), each run over every path")
    ap.add_argument("--profile", action="store_true", help="one more step per layout and path under the profiler")
    ap.add_argument("--no-activation-checkpointing", action="store_true")
    ap.add_argument("--compile-blocks", action="store_true", help="each transformer block's forward through torch.compile")
    ap.add_argument("--offload-optimizer", action="store_true",
                    help="fp32 shards, gradients and optimizer state in host memory, the optimizer step on the CPU")
    ap.add_argument("--publish-dir", default=None, help="default: a temporary folder (deleted)")
    ap.add_argument("--skip-publish", action="store_true",
                    help="no 8 GB publish after each step (train_ms never includes it; this saves the call's time)")
    ap.add_argument("--attention-backend", default="auto", choices=list(packed_attention.BACKENDS),
                    help="the trainer's attention_backend: auto (cuDNN first on Hopper), cudnn, or flash "
                         "(FlashAttention 2 through SDPA and varlen_attn: the path before cuDNN)")
    ap.add_argument("--previous-optimizer", action="store_true",
                    help="the optimizer step before fused AdamW: multi-tensor AdamW, the norm summed per "
                         "gradient in fp64, clipping per tensor (the old path, for side-by-side runs)")
    a = ap.parse_args()
    paths = a.paths.split(",")
    for p in paths:
        if p not in PATHS:
            ap.error(f"unknown path {p!r}; choose from {sorted(PATHS)}")
    res = Record(a.out, sections={})
    save = res.save
    ctx = res.open_device(a.smoke)
    dev = ctx.device
    layouts = ["2x256"] if a.smoke else a.layouts.split(",")
    pub = a.publish_dir or tempfile.mkdtemp(prefix="fsdp-bench-")
    ac = not a.no_activation_checkpointing
    t0 = time.perf_counter()
    with torch.device(dev):  # random init on the device (a 4B init on the CPU takes minutes)
        policy, _ = build_policy(model_spec(a.model, a.smoke), None, seed=0, device=str(dev),
                                 dtype="fp32" if a.smoke else "bf16", for_training=True)
    build_s = time.perf_counter() - t0
    blocks = sharding.transformer_blocks(policy)
    hf_cfg = policy.module.config
    linear_weights = step_profile.block_linear_weights(blocks)
    orig_ckpt = sharding.checkpoint_activations

    def marked_checkpoint(block):  # the recompute shows in the profile as floe.recompute
        block.forward = step_profile.mark_recompute(block.forward)
        orig_ckpt(block)
    sharding.checkpoint_activations = marked_checkpoint
    t0 = time.perf_counter()
    trainer = FSDPTrainer(policy, 0, pub, ctx, state_every=0, activation_checkpointing=ac,
                          offload_optimizer=a.offload_optimizer, compile_blocks=a.compile_blocks,
                          publish_dtype=policy.dtype, attention_backend=a.attention_backend)
    if a.previous_optimizer:
        use_previous_optimizer(trainer.opt)
    if a.skip_publish:
        trainer.publish = lambda timings=None: ckpt.version_dir(pub, trainer.version)
    step_profile.instrument(trainer)
    peak = step_metrics.peak_flops(dev)
    res["model"] = {"spec": model_spec(a.model, a.smoke), "parameters": policy.num_parameters(),
                    "block_linear_weights": linear_weights,
                    "vocab_size": policy.vocab_size, "dtype": str(policy.dtype), "build_s": round(build_s, 2),
                    "shard_s": round(time.perf_counter() - t0, 2), "activation_checkpointing": ac,
                    "offload_optimizer": a.offload_optimizer, "compile_blocks": a.compile_blocks,
                    "optimizer": "previous (multi-tensor AdamW, fp64 per-gradient norm)" if a.previous_optimizer
                    else type(trainer.opt.opt).__name__ + (" fused" if trainer.opt.opt.defaults.get("fused") else ""),
                    "attention_backend": a.attention_backend, "published_each_step": not a.skip_publish,
                    "packable": packed_attention.packable(policy), "packed_kernel": packed_attention.kernel_name(dev, backend=a.attention_backend),
                    "sdpa_cudnn_first": packed_attention.cudnn_preferred(dev, a.attention_backend),
                    "peak_flops": peak,
                    "memory_after_shard_bytes": torch.cuda.memory_allocated(dev) if dev.type == "cuda" else None}
    save()
    last_path = None
    gdn_layers = gated_delta.use(policy.module, True)
    kernels = a.gdn_kernels.split(",") if gdn_layers else ["floe"]
    res["model"]["gdn_layers"] = gdn_layers
    for kern, path in [(k, p) for k in kernels for p in paths]:
        gated_delta.use(policy.module, kern == "floe")
        pack, dense = PATHS[path]
        trainer.packing = pack and packed_attention.packable(policy)
        trainer.dense_pack_mask = dense
        for layout in layouts:
            n, length = (int(x) for x in layout.split("x"))
            key = f"{path}:{layout}" + (f":gdn-{kern}" if gdn_layers else "")
            if dense and n == 1:
                continue  # one sample: the block-diagonal mask is the causal one, nothing to compare
            sec = res["sections"][key] = {"path": path, "gdn_kernel": kern if gdn_layers else None,
                                          "packing": trainer.packing, "samples": n,
                                          "tokens_per_sample": length, "steps": []}
            try:
                for step in range(a.steps + (1 if a.profile else 0)):
                    samples = batch(n, length, policy.vocab_size, seed=step)
                    profiling = a.profile and step == a.steps
                    prof = None
                    if profiling:
                        acts = [torch.profiler.ProfilerActivity.CPU]
                        if dev.type == "cuda":
                            acts.append(torch.profiler.ProfilerActivity.CUDA)
                        prof = torch.profiler.profile(activities=acts)
                        prof.__enter__()
                    try:
                        r = trainer.train_step(samples, step_config(micro_batch_tokens=n * length))
                    finally:
                        if prof is not None:
                            prof.__exit__(None, None, None)
                    m = r["metrics"]
                    row = {k: m.get(k) for k in (
                        "loss", "grad_norm", "train_ms", "publish_ms", "publish_breakdown", "tokens_per_s", "mfu",
                        "peak_memory_bytes", "forward_tokens", "masked_tokens", "world_size", "skipped_step")}
                    fl = step_profile.executed_flops(hf_cfg, blocks, [length - 1] * n,
                                                     sum(sum(s["loss_mask"][1:]) for s in samples), ac)
                    row["executed_flops"] = fl
                    row["executed_mfu"] = (round(fl["total"] / (m["train_ms"] / 1e3) / peak, 5) if peak else None)
                    if profiling:
                        row["profiled"] = True
                        row["phases_s"] = step_profile.phases(prof, m["train_ms"] / 1e3)
                        row["top_kernels"] = step_profile.top_kernels(prof)
                    sec["steps"].append(row)
                    prev = ckpt.version_dir(pub, r["version"] - 1)
                    last_path = None if a.skip_publish else r["path"]
                    if os.path.isdir(prev):
                        shutil.rmtree(prev)  # the disk holds few 8 GB versions
                    print(f"{key} step {step}{' (profiled)' if profiling else ''}: train {row['train_ms'] / 1e3:.2f} s, "
                          f"{row['tokens_per_s']:.0f} tok/s, mfu {row['mfu']}, executed mfu {row['executed_mfu']}, "
                          f"peak {row['peak_memory_bytes'] / 2**30:.1f} GiB, publish {row['publish_ms'] / 1e3:.2f} s"
                          + (f"\n  phases {row['phases_s']}" if profiling else ""), flush=True)
                    save()
            except torch.cuda.OutOfMemoryError as e:
                sec["oom"] = str(e)[:500]
                print(f"{key}: out of memory", flush=True)
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
