"""Weight publishing, old path vs new path, side by side: a Qwen3-4B-shaped model on one GPU.

    python3 bench/engine/publish_bench.py --out $OUT/publish_h200.json            # one H200
    .floe/venv/bin/python bench/engine/publish_bench.py --smoke --out /tmp/p.json   # CPU check

The trainer is floe_engine.fsdp_trainer.FSDPTrainer at world size 1 (fp32 master shards, bf16
publish dtype), the model ``hf:qwen3`` with Qwen3-4B's shape and the real 151,936-id vocabulary
(random init, tied embeddings: 4.02 B parameters, an 8.04 GB bf16 folder). No train step runs:
publishing reads the same sharded parameters whatever the step did. Sections:

* ``old``: ``FSDPTrainer.publish_gathered`` with sha256 (the path before this change: fp32 full
  state dict gathered to CPU, cast there, transformers' save_pretrained, then a re-read to
  sha256), and its engine side as it was: ``verify_folder`` (re-read + sha256 of every file),
  then safetensors' ``load_file`` per shard, then the copy into a bf16 model on the GPU.
* ``new``: ``FSDPTrainer.publish`` (= ``publish_sharded``: bf16 gather on the GPU, pinned
  device-to-host copies, writer threads hashing xxh3-128 as they write, index + sidecar +
  rename), repeated (the first pays the one-time pinned-buffer allocation), and its engine
  side as the reference engine runs it: ``checkpoint.load`` (one read per file, hashed in
  memory, tensors as views) into page-locked buffers kept between loads (on a GPU; the first
  load pins them), then the copy into the GPU model; ``engine_load_pageable`` is the same load
  into fresh pageable buffers (the engine's path before), timed right after it for comparison.
* ``refit_local``: the NCCL path's GPU work on one GPU — gather the bf16 tensors, pack them into
  1 GiB buckets (weight_broadcast's layout), one device-to-device copy of each bucket standing in
  for the NCCL broadcast (HBM bandwidth, NOT NVLink: one GPU cannot run a two-rank NCCL group),
  and unpack into the engine model. Also ``weight_broadcast.send`` over the one-rank NCCL group
  (header + pack + a broadcast with no peer + handshake).

publish-to-loaded = publish + engine load (+ copy into the GPU model), on one machine (the
folder is in the page cache, as on a node where trainer and engines share a disk).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_record import Record, arguments, model_spec  # noqa: E402  (puts engine/ on the path)

import torch  # noqa: E402

from floe_engine import checkpoint as ckpt  # noqa: E402
from floe_engine import weight_broadcast as wb  # noqa: E402
from floe_engine import weights_io  # noqa: E402
from floe_engine.fsdp_trainer import FSDPTrainer  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.publish import publish_entries  # noqa: E402


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def ms(t0):
    return round((time.perf_counter() - t0) * 1e3, 1)


def old_engine_load(folder: str, engine, dev) -> dict:
    """The engine side before this change: sha256 of every listed file (a full re-read), then
    safetensors' load_file per shard (a second read), then the copy into the GPU model."""
    from safetensors.torch import load_file
    t0 = time.perf_counter()
    ckpt.verify_folder(folder)
    verify = ms(t0)
    t1 = time.perf_counter()
    _, _, names = ckpt._weight_files(folder)
    sd = {}
    for n in names:
        sd.update(load_file(os.path.join(folder, n), device="cpu"))
    read = ms(t1)
    t2 = time.perf_counter()
    engine.load_state_dict(sd)
    sync(dev)
    return {"verify_ms": verify, "read_ms": read, "to_gpu_ms": ms(t2), "total_ms": ms(t0)}


def new_engine_load(folder: str, engine, dev, buffers=None) -> dict:
    t0 = time.perf_counter()
    tm: dict = {}
    _, sd = ckpt.load(folder, timings=tm, buffers=buffers)
    read = ms(t0)
    t2 = time.perf_counter()
    engine.load_state_dict(sd)
    sync(dev)
    return {"read_verify_ms": read, "small_files_checksum_ms": tm.get("checksum_ms"), "checksum": tm.get("checksum"),
            "to_gpu_ms": ms(t2), "total_ms": ms(t0)}


def refit_local(trainer, engine, dev, bucket_bytes: int) -> dict:
    """The GPU work of an NCCL refit on one GPU (see the module docstring)."""
    from torch.distributed.tensor import DTensor
    out = {}
    sync(dev)
    t0 = time.perf_counter()
    named = []
    with torch.no_grad():
        for n, t, dt, _ in publish_entries(trainer.policy, trainer.publish_dtype):
            named.append((n, (t.to(dt) if t.dtype != dt else t).full_tensor() if isinstance(t, DTensor) else t.to(dt)))
    sync(dev)
    out["gather_ms"] = ms(t0)
    apply, expect = wb.copy_into(engine.module)
    expect({"names": [n for n, _ in named], "shapes": [list(t.shape) for _, t in named]})
    sizes = [wb._aligned(t.numel() * t.element_size()) for _, t in named]
    buckets = wb.plan_buckets(sizes, bucket_bytes)
    pack = wire = unpack = 0.0
    for b in buckets:
        t1 = time.perf_counter()
        buf = torch.empty(sum(sizes[i] for i in b), dtype=torch.uint8, device=dev)
        off = 0
        for i in b:
            _, t = named[i]
            buf[off: off + t.numel() * t.element_size()].view(t.dtype).view(t.shape).copy_(t)
            off += sizes[i]
        sync(dev)
        t2 = time.perf_counter()
        recv = buf.clone()  # stands in for the broadcast: one device-to-device copy
        sync(dev)
        t3 = time.perf_counter()
        off = 0
        for i in b:
            n, t = named[i]
            apply(n, recv[off: off + t.numel() * t.element_size()].view(t.dtype).view(t.shape))
            off += sizes[i]
        sync(dev)
        pack += t2 - t1
        wire += t3 - t2
        unpack += time.perf_counter() - t3
        del buf, recv
    out.update(pack_ms=round(pack * 1e3, 1), device_copy_ms=round(wire * 1e3, 1), unpack_ms=round(unpack * 1e3, 1),
               buckets=len(buckets), bytes=sum(sizes), total_ms=ms(t0))
    # the real sender over the one-rank group: header, pack, NCCL broadcast (no peer), handshake
    t4 = time.perf_counter()
    out["send_one_rank_group"] = wb.send(named, trainer.version, group=None, src=0, bucket_bytes=bucket_bytes,
                                         device=dev)
    out["send_one_rank_group"]["wall_ms"] = ms(t4)
    del named
    return out


def check_same(engine, trainer) -> float:
    """max |engine weight - trainer weight (bf16)| over all tensors: 0 when the load is exact."""
    from torch.distributed.tensor import DTensor
    worst = 0.0
    own = engine.module.state_dict()
    with torch.no_grad():
        for n, t, dt, _ in publish_entries(trainer.policy, trainer.publish_dtype):
            full = (t.to(dt) if t.dtype != dt else t).full_tensor() if isinstance(t, DTensor) else t.to(dt)
            worst = max(worst, float((own[n].float() - full.float()).abs().max()))
    return worst


def main() -> None:
    ap = arguments(__doc__)
    ap.add_argument("--old-repeats", type=int, default=1)
    ap.add_argument("--new-repeats", type=int, default=3)
    ap.add_argument("--bucket-bytes", type=int, default=1 << 30)
    ap.add_argument("--publish-dir", default=None, help="default: a temporary folder (deleted)")
    a = ap.parse_args()
    res = Record(a.out, old=[], new=[])
    save = res.save
    ctx = res.open_device(a.smoke)
    dev = ctx.device
    spec = model_spec(a.model, a.smoke)
    pub = a.publish_dir or tempfile.mkdtemp(prefix="publish-bench-")
    t0 = time.perf_counter()
    with torch.device(dev):
        policy, _ = build_policy(spec, None, seed=0, device=str(dev), dtype="bf16", for_training=True)
        engine, _ = build_policy(spec, None, seed=1, device=str(dev), dtype="bf16")
    trainer = FSDPTrainer(policy, 0, pub, ctx, state_every=0, publish_dtype=torch.bfloat16)
    res["model"] = {"spec": spec, "parameters": policy.num_parameters(), "vocab_size": policy.vocab_size,
                    "publish_dtype": "bfloat16", "build_s": round(time.perf_counter() - t0, 2)}
    save()
    version = 0
    pinned = weights_io.PinnedBuffers() if dev.type == "cuda" else None  # as the engine keeps them

    def run(kind, fn, env_checksum):
        nonlocal version
        version += 1
        trainer.version = version
        os.environ["FLOE_CHECKSUM"] = env_checksum
        row = {"version": version}
        try:
            sync(dev)
            t1 = time.perf_counter()
            tm: dict = {}
            path = fn(tm)
            sync(dev)
            row["publish_ms"] = ms(t1)
            row["publish_breakdown"] = tm
            folder = ckpt.folder_of(path)
            meta = ckpt.read_meta(folder)
            row["files"] = sorted(meta["files"])
            row["bytes"] = meta["bytes"]
            row["checksum"] = meta.get("checksum", "sha256")
            if kind == "old":
                row["engine_load"] = old_engine_load(folder, engine, dev)
            else:
                row["engine_load"] = new_engine_load(folder, engine, dev, pinned)
                row["engine_load_pageable"] = new_engine_load(folder, engine, dev)
            row["publish_to_loaded_ms"] = round(row["publish_ms"] + row["engine_load"]["total_ms"], 1)
            row["engine_max_abs_diff_vs_trainer"] = check_same(engine, trainer)
            shutil.rmtree(folder, ignore_errors=True)
        except Exception:
            row["error"] = traceback.format_exc()[-3000:]
        finally:
            os.environ.pop("FLOE_CHECKSUM", None)
        print(kind, json.dumps(row), flush=True)
        res[kind].append(row)
        save()

    for _ in range(a.old_repeats):
        run("old", trainer.publish_gathered, "sha256")
    for _ in range(a.new_repeats):
        run("new", trainer.publish, "")
    try:
        version += 1
        trainer.version = version
        res["refit_local"] = refit_local(trainer, engine, dev, a.bucket_bytes)
        res["refit_local"]["engine_max_abs_diff_vs_trainer"] = check_same(engine, trainer)
    except Exception:
        res["refit_local"] = {"error": traceback.format_exc()[-3000:]}
    print("refit_local", json.dumps(res["refit_local"]), flush=True)
    res.finish()
    if not a.publish_dir:
        shutil.rmtree(pub, ignore_errors=True)


if __name__ == "__main__":
    main()
