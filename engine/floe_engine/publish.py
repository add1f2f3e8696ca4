"""Publishing the trainer's weights as a version folder (see ``checkpoint`` for the layout).

* ``publish_sharded``: every rank of the sharded trainer writes its own safetensors files of
  the version folder, whole tensors balanced by bytes; each tensor is cast to the publish dtype
  and all-gathered on the device, copied by its file's owner into a pinned host buffer and
  written by a writer thread that hashes (xxh3-128) the same bytes. Rank 0 adds the index, the
  config and tokenizer files and the sidecar, then renames the folder into place: the files an
  HF folder has (more shards than the one-process trainer's, which publishes through
  ``checkpoint.publish_policy``).
* ``publish_gathered``: the previous path, the full fp32 weights gathered to rank 0 and saved
  there alone, kept to compare against (bench/engine/publish_bench.py).
* ``ensure_published``: on start-up, the version the trainer starts from is published when its
  folder is missing, so engines can always load it.
"""
from __future__ import annotations

import os
import queue
import shutil
import threading
import time
from typing import Callable, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import checkpoint as ckpt
from . import checksum, weights_io
from .policy import Policy
from .sharding import reshard_all


def ensure_published(path: str, publish: Callable[[], str], cmd_group=None) -> str:
    """``path`` (the starting version's published weights) when it exists, else ``publish()``'s.
    Over ranks (``cmd_group``) rank 0 decides, so all ranks publish together or none does."""
    box = [os.path.exists(path)]
    if cmd_group is not None:
        dist.broadcast_object_list(box, src=0, group=cmd_group)
    return path if box[0] else publish()


def publish_entries(policy: Policy, dtype: Optional[torch.dtype]) -> List[Tuple[str, torch.Tensor, torch.dtype, tuple]]:
    """What a version folder holds, in state-dict order: (name, parameter or buffer, published
    dtype, shape). Names that share one tensor (tied embeddings) keep the first name only, as
    transformers' save_pretrained leaves the tied output embedding out; floating tensors take
    ``dtype`` (None: their own)."""
    out, seen = [], set()
    for name, t in policy.module.state_dict(keep_vars=True).items():
        key = id(t)
        if key in seen:
            continue
        seen.add(key)
        dt = dtype if (dtype is not None and t.is_floating_point()) else t.dtype
        out.append((name, t, dt, tuple(t.shape)))
    return out


class _FileWriter:
    """One thread per safetensors file: writes (and hashes) tensors as the gather loop hands
    them over, after waiting for their device-to-host copy; errors are kept for the end."""

    def __init__(self, path: str, specs, algo: str):
        self.path = path
        self.q: "queue.Queue" = queue.Queue()
        self.error: Optional[str] = None
        self.result: Optional[Tuple[int, str]] = None
        self.wait_s = self.io_s = 0.0
        try:
            self.w = weights_io.SafetensorsWriter(path, specs, algo)
        except Exception as e:
            self.w, self.error = None, f"{type(e).__name__}: {e}"
        self.order = [r[0] for r in weights_io.file_layout(specs)]
        self.thread = threading.Thread(target=self._run, name=f"publish-{os.path.basename(path)}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self.q.get()
            if item is None:
                break
            if self.error:
                continue  # drain: the gather loop never waits on a writer
            name, t, event = item
            try:
                t0 = time.perf_counter()
                if event is not None:
                    event.synchronize()
                t1 = time.perf_counter()
                self.w.write(name, t)
                self.wait_s += t1 - t0
                self.io_s += time.perf_counter() - t1
            except Exception as e:
                self.error = f"{type(e).__name__}: {e}"
                self.w.abort()
        if not self.error:
            try:
                self.result = self.w.close()
            except Exception as e:
                self.error = f"{type(e).__name__}: {e}"

    def finish(self) -> None:
        self.q.put(None)
        self.thread.join()


def _staging(trainer, nbytes: int, timings: dict) -> Optional[torch.Tensor]:
    """A pinned host buffer of at least ``nbytes`` for this rank's device-to-host copies, kept
    on the trainer between publishes (pinning 8 GB costs seconds; paid once)."""
    if trainer.ctx.device.type != "cuda":
        return None
    buf = getattr(trainer, "_publish_staging", None)
    if buf is None or buf.numel() < nbytes:
        trainer._publish_staging = None
        t0 = time.perf_counter()
        buf = torch.empty(max(nbytes, 1), dtype=torch.uint8, pin_memory=True)
        timings["pin_alloc_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
        trainer._publish_staging = buf
    return buf


PARALLEL_FILES_FROM = 1 << 30  # a rank writes files_per_rank files in parallel once the weights reach this


def publish_sharded(trainer, timings: Optional[dict] = None, files_per_rank: int = 4) -> str:
    """Publish ``trainer``'s weights as its version folder with every rank writing its own files.

    Every rank computes the same plan: whole tensors in files balanced by bytes, file k written
    by rank k % world (``weights_io.plan_files``; one file per rank for small models, and from
    ``PARALLEL_FILES_FROM`` bytes on ``files_per_rank`` per rank, written by parallel threads; none
    over ``checkpoint.MAX_SHARD_BYTES``).
    Then, tensor by tensor in one order on all ranks: cast the local fp32 shard to the publish
    dtype, all-gather it (``DTensor.full_tensor``, on the GPU for CUDA ranks), and on the
    file's owner copy it into a pinned host buffer (asynchronously) and hand it to the file's
    writer thread, which writes it and feeds the same bytes to the checksum (xxh3-128). The
    gather of the next tensors overlaps the writes. Rank 0 writes the small files (config,
    generation config, tokenizer) meanwhile, then collects each rank's file names, sizes and
    digests (``gather_object`` over the command group), writes the index and the sidecar, and
    renames the folder into place. ``timings`` gets each phase (ms), the slowest rank's where
    ranks work in parallel, and ``per_rank``."""
    from torch.distributed.tensor import DTensor

    ctx = trainer.ctx
    W, rank, cuda = ctx.world_size, ctx.rank, ctx.device.type == "cuda"
    tm: dict = {}
    t_start = time.perf_counter()
    policy = trainer.policy
    reshard_all(trainer.root)  # the sharded fp32 parameters, whatever a forward left gathered
    entries = publish_entries(policy, trainer.publish_dtype)
    spec = {n: (dt, shape) for n, _, dt, shape in entries}
    tensors = {n: t for n, t, _, _ in entries}
    nbytes = {n: weights_io._nbytes(dt, shape) for n, (dt, shape) in spec.items()}
    per_rank = files_per_rank if sum(nbytes.values()) >= PARALLEL_FILES_FROM else 1
    files = weights_io.plan_files([(n, nbytes[n]) for n, *_ in entries], W, ckpt.MAX_SHARD_BYTES, per_rank)
    fnames = weights_io.shard_names(len(files))
    out_dir = os.path.abspath(ckpt.version_dir(trainer.publish_dir, trainer.version))
    box = [None]
    if ctx.is_main:  # rank 0 names the temporary folder (and picks the checksum); all ranks write into it
        tmp = ckpt.temp_folder(out_dir)
        try:
            os.makedirs(tmp)
            box = [(tmp, checksum.default_algorithm(), None)]
        except OSError as e:
            box = [(tmp, None, f"{type(e).__name__}: {e}")]
    if W > 1:
        dist.broadcast_object_list(box, src=0, group=ctx.cmd_group)
    tmp, algo, err = box[0]
    if err:
        raise RuntimeError(f"publishing v{trainer.version}: cannot create {tmp}: {err}")
    mine = [k for k in range(len(files)) if k % W == rank]
    specs = {k: [(n, *spec[n]) for n in files[k]] for k in mine}
    # every file's tensor order (its layout); the gather order interleaves them, so every writer has work early
    layouts = [[r[0] for r in weights_io.file_layout([(n, *spec[n]) for n in files[k]])] for k in range(len(files))]
    order = [(k, lay[i]) for i in range(max(len(x) for x in layouts)) for k, lay in enumerate(layouts)
             if i < len(lay)]
    staged = None
    offsets: dict = {}
    if cuda:
        off = 0
        for k in mine:
            for n in layouts[k]:
                offsets[n] = off
                off += -(-nbytes[n] // 64) * 64
        staged = _staging(trainer, off, tm)
    writers = {k: _FileWriter(os.path.join(tmp, fnames[k]), specs[k], algo) for k in mine}
    t_plan = time.perf_counter()
    meta_err = None
    if ctx.is_main and getattr(policy, "kind", None) == "hf":
        try:
            tok = policy.tokenizer
            ckpt.write_hf_meta(tmp, policy.module, trainer.publish_dtype, getattr(tok, "folder", None),
                               list(getattr(tok, "stop_token_ids", []) or []))
        except Exception as e:
            meta_err = f"{type(e).__name__}: {e}"
    t_meta = time.perf_counter()
    gather_s = copy_s = 0.0
    ev = [] if cuda else None
    with torch.no_grad():
        for k, name in order:
            t = tensors[name]
            dt, shape = spec[name]
            if cuda:
                e0 = torch.cuda.Event(enable_timing=True)
                e0.record()
            if isinstance(t, DTensor):
                if cuda and t.device.type != "cuda":
                    t = t.to(ctx.device)  # shards offloaded to host memory: gather them on the GPU
                full = (t.to(dt) if t.dtype != dt else t).full_tensor()
            else:
                full = t.detach().to(dt)
            if k % W != rank:
                del full
                continue
            if cuda:
                e1 = torch.cuda.Event(enable_timing=True)
                e1.record()
                host = staged[offsets[name]: offsets[name] + nbytes[name]].view(dt).view(shape)
                host.copy_(full.reshape(shape), non_blocking=True)
                e2 = torch.cuda.Event(enable_timing=True)
                e2.record()
                ev.append((e0, e1, e2))
                writers[k].q.put((name, host, e2))
            else:
                writers[k].q.put((name, full.reshape(shape).contiguous(), None))
            del full
    if cuda:
        torch.cuda.synchronize(ctx.device)
        for e0, e1, e2 in ev:
            gather_s += e0.elapsed_time(e1) / 1e3
            copy_s += e1.elapsed_time(e2) / 1e3
    t_gathered = time.perf_counter()
    for w in writers.values():
        w.finish()
    t_written = time.perf_counter()
    mine_files, errs = {}, [f"rank {rank}: {w.path}: {w.error}" for w in writers.values() if w.error]
    if meta_err:
        errs.append(f"rank 0: config/tokenizer files: {meta_err}")
    for k, w in writers.items():
        if w.result:
            mine_files[fnames[k]] = {checksum.RECORD_KEY[algo]: w.result[1], "bytes": w.result[0]}
    mine_t = {"plan_ms": (t_plan - t_start) * 1e3, "meta_files_ms": (t_meta - t_plan) * 1e3,
              "gather_loop_ms": (t_gathered - t_meta) * 1e3,
              "write_tail_ms": (t_written - t_gathered) * 1e3,
              "gather_gpu_ms": gather_s * 1e3 if cuda else None, "to_cpu_gpu_ms": copy_s * 1e3 if cuda else None,
              "writer_wait_ms": max((w.wait_s for w in writers.values()), default=0) * 1e3,
              "write_checksum_ms": max((w.io_s for w in writers.values()), default=0) * 1e3,
              "bytes": sum(f["bytes"] for f in mine_files.values()), "files": sorted(mine_files)}
    mine_t = {key: (round(v, 1) if isinstance(v, float) else v) for key, v in mine_t.items()}
    t_c = time.perf_counter()
    results = [None] * W
    if W > 1:
        dist.gather_object((mine_files, errs, mine_t), results if ctx.is_main else None, dst=0, group=ctx.cmd_group)
    else:
        results = [(mine_files, errs, mine_t)]
    path, err = None, None
    if ctx.is_main:
        tm["collect_ms"] = round((time.perf_counter() - t_c) * 1e3, 1)
        try:
            all_errs = [e for _, es, _ in results for e in es]
            if all_errs:
                raise RuntimeError("; ".join(all_errs))
            files_rec, writers_of = {}, {}
            for r, (fs, _, _) in enumerate(results):
                files_rec.update(fs)
                for n in fs:
                    writers_of[n] = r
            t0 = time.perf_counter()
            if len(files) > 1:
                weights_io.write_index(os.path.join(tmp, ckpt.INDEX),
                                       {n: fnames[k] for k, names in enumerate(files) for n in names},
                                       sum(nbytes.values()))
            small = [n for n in ckpt._list_files(tmp) if n not in files_rec]
            for n, d in zip(small, checksum.hash_files([os.path.join(tmp, n) for n in small], algo)):
                files_rec[n] = {checksum.RECORD_KEY[algo]: d, "bytes": os.path.getsize(os.path.join(tmp, n))}
            tm["index_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
            ckpt.finish_folder(tmp, out_dir, trainer.version, policy.config_dict(),
                               "hf" if getattr(policy, "kind", None) == "hf" else "floe", files_rec, algo,
                               extra={"writers": writers_of, "world_size": W}, timings=tm)
            path = ckpt.published_path(out_dir)
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
            shutil.rmtree(tmp, ignore_errors=True)
    box = [(path, err)]
    if W > 1:
        dist.broadcast_object_list(box, src=0, group=ctx.cmd_group)
    path, err = box[0]
    if err:
        raise RuntimeError(f"publishing v{trainer.version} failed: {err}")
    if timings is not None and ctx.is_main:
        per_rank = [r[2] for r in results]
        slowest = {key: max((p[key] for p in per_rank if p.get(key) is not None), default=None)
                   for key in ("plan_ms", "gather_loop_ms", "write_tail_ms", "gather_gpu_ms", "to_cpu_gpu_ms",
                               "writer_wait_ms", "write_checksum_ms")}
        timings.update(mode="sharded", world_size=W, checksum=algo, files=len(files), **slowest,
                       meta_files_ms=per_rank[0]["meta_files_ms"], **tm, per_rank=per_rank)
    return path


def full_state_dict(policy: Policy) -> dict:
    """The full fp32 weights of a sharded policy, gathered to rank 0's CPU (an empty dict on the
    other ranks); names that share one parameter (tied embeddings) share one tensor, as in the module."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    sd = get_model_state_dict(policy.module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if sd:
        first = {}
        for name, p in policy.module.named_parameters(remove_duplicate=False):
            if name in sd:
                sd[name] = sd[first.setdefault(id(p), name)]
    return sd


def publish_gathered(trainer, timings: Optional[dict] = None) -> str:
    """The previous publish, kept to compare against (bench/engine/publish_bench.py): the full
    fp32 weights gathered to rank 0's CPU, then ``checkpoint.save_policy`` there alone."""
    t0 = time.perf_counter()
    sd = full_state_dict(trainer.policy)
    gather_ms = (time.perf_counter() - t0) * 1e3
    path, err = None, None
    if trainer.ctx.is_main:
        try:
            path = ckpt.save_policy(trainer.policy, ckpt.version_dir(trainer.publish_dir, trainer.version),
                                    trainer.version, dtype=trainer.publish_dtype, timings=timings, state_dict=sd)
        except Exception as e:  # every rank must hear of it, or they would wait for rank 0 forever
            err = f"{type(e).__name__}: {e}"
    del sd
    box = [(path, err)]
    dist.broadcast_object_list(box, src=0, group=trainer.ctx.cmd_group)
    path, err = box[0]
    if err:
        raise RuntimeError(f"publishing v{trainer.version} on rank 0 failed: {err}")
    if timings is not None:
        timings["gather_ms"] = round(gather_ms, 1)
    return path
