"""Weights from the trainer to engines over a torch.distributed group (NCCL between GPUs; gloo on CPU).

The disk path (a version folder, ``checkpoint``) stays the source of truth that a restarted
engine loads; this path moves the same tensors GPU to GPU for the regular update. See
engine/README.md, "Weights over NCCL", for how the trainer's rank 0 and the engines' workers join
one group and how it maps onto vLLM's and SGLang's weight-update routes.

One update, on every member of ``group`` (the sender is ``src``, the others receive):

1. **Header** (``broadcast_object_list``): ``{version, names, dtypes, shapes, buckets}``, the
   tensors in the sender's order and their split into buckets of about ``bucket_bytes`` (whole
   tensors; a larger tensor is a bucket alone). Receivers check every name against their model
   before any bytes move, so a mismatch fails on all members at the same collective.
2. **Buckets**: the sender packs each bucket's tensors (cast to the published dtype) into one flat
   uint8 buffer on its device and ``broadcast``s it; receivers unpack views of the same buffer
   and hand ``(name, tensor)`` to ``apply`` (copy into the model, or vLLM's
   ``model.load_weights``). Packing means a few large collectives instead of one per tensor.
3. **Handshake**: every member contributes ``[version, -version, ok]`` to an ``all_reduce(MIN)``:
   the sender learns that every receiver applied exactly this version (min == max == version and
   all ok) before it tells floe the update is done; a receiver that failed to apply makes the
   update fail on every member, with the same answer.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

BUCKET_BYTES = 1 << 30


def plan_buckets(sizes: Sequence[int], bucket_bytes: int) -> List[List[int]]:
    """Consecutive tensors (by index) into buckets of at most ``bucket_bytes`` (a larger tensor alone)."""
    out: List[List[int]] = []
    cur, used = [], 0
    for i, n in enumerate(sizes):
        if cur and used + n > bucket_bytes:
            out.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += n
    if cur:
        out.append(cur)
    return out


def _nbytes(dtype: torch.dtype, shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n * torch.empty((), dtype=dtype).element_size()


def _aligned(n: int) -> int:
    return -(-n // 16) * 16  # every tensor starts 16-byte aligned in a bucket, so views of any dtype work


def _handshake(version: int, ok: bool, group, device) -> Tuple[int, int, bool]:
    t = torch.tensor([version, -version, 1 if ok else 0], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
    lo, neg_hi, all_ok = t.tolist()
    return int(lo), int(-neg_hi), bool(all_ok)


def send(named: Sequence[Tuple[str, torch.Tensor]], version: int, group=None, src: int = 0,
         dtype: Optional[torch.dtype] = None, bucket_bytes: int = BUCKET_BYTES,
         device: Optional[torch.device] = None) -> dict:
    """The sender's side (rank ``src`` of ``group``): ``named`` is [(name, full tensor)] in the
    order to send; floating tensors are cast to ``dtype`` (None: as they are). Returns timings
    (ms) once every receiver has confirmed ``version``; raises if one did not."""
    tm: Dict[str, float] = {}
    t0 = time.perf_counter()
    dev = device or (named[0][1].device if named else torch.device("cpu"))
    dts = [(dtype if dtype is not None and t.is_floating_point() else t.dtype) for _, t in named]
    header = {"version": int(version), "names": [n for n, _ in named], "dtypes": [str(d).replace("torch.", "") for d in dts],
              "shapes": [list(t.shape) for _, t in named]}
    sizes = [_aligned(_nbytes(d, t.shape)) for d, (_, t) in zip(dts, named)]
    header["buckets"] = plan_buckets(sizes, bucket_bytes)
    dist.broadcast_object_list([header], src=src, group=group)
    tm["header_ms"] = (time.perf_counter() - t0) * 1e3
    pack_s = comm_s = 0.0
    for bucket in header["buckets"]:
        t1 = time.perf_counter()
        buf = torch.empty(sum(sizes[i] for i in bucket), dtype=torch.uint8, device=dev)
        off = 0
        for i in bucket:
            _, t = named[i]
            nb = _nbytes(dts[i], t.shape)
            buf[off: off + nb].view(dts[i]).view(t.shape).copy_(t)
            off += sizes[i]
        _sync(dev)
        t2 = time.perf_counter()
        dist.broadcast(buf, src=src, group=group)
        _sync(dev)
        pack_s += t2 - t1
        comm_s += time.perf_counter() - t2
        del buf
    tm.update(pack_ms=pack_s * 1e3, broadcast_ms=comm_s * 1e3)
    t3 = time.perf_counter()
    lo, hi, ok = _handshake(int(version), True, group, dev)
    tm["handshake_ms"] = (time.perf_counter() - t3) * 1e3
    tm["total_ms"] = (time.perf_counter() - t0) * 1e3
    tm["bytes"] = sum(sizes)
    tm["buckets"] = len(header["buckets"])
    if not (ok and lo == hi == int(version)):
        raise RuntimeError(f"weight broadcast of version {version}: receivers reported versions {lo}..{hi}, "
                           f"all applied: {ok}")
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in tm.items()}


def receive(apply: Callable[[str, torch.Tensor], None], group=None, src: int = 0,
            device: Optional[torch.device] = None, expect: Optional[Callable[[dict], None]] = None) -> dict:
    """A receiver's side: returns ``{version, tensors, ...timings}`` after the handshake. ``apply``
    gets (name, tensor view into the received bucket: copy it before the next bucket arrives).
    ``expect(header)`` may raise to refuse an update (wrong names or shapes) before any bytes
    move; the refusal still takes part in every collective, and the update fails on all members."""
    dev = device or torch.device("cpu")
    tm: Dict[str, float] = {}
    t0 = time.perf_counter()
    box = [None]
    dist.broadcast_object_list(box, src=src, group=group)
    header = box[0]
    tm["header_ms"] = (time.perf_counter() - t0) * 1e3
    err = None
    if expect is not None:
        try:
            expect(header)
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
    dts = [getattr(torch, d) for d in header["dtypes"]]
    sizes = [_aligned(_nbytes(d, s)) for d, s in zip(dts, header["shapes"])]
    comm_s = unpack_s = 0.0
    for bucket in header["buckets"]:
        t1 = time.perf_counter()
        buf = torch.empty(sum(sizes[i] for i in bucket), dtype=torch.uint8, device=dev)
        dist.broadcast(buf, src=src, group=group)
        _sync(dev)
        t2 = time.perf_counter()
        off = 0
        for i in bucket:
            nb = _nbytes(dts[i], header["shapes"][i])
            if err is None:
                try:
                    apply(header["names"][i], buf[off: off + nb].view(dts[i]).view(header["shapes"][i]))
                except Exception as e:
                    err = f"{header['names'][i]}: {type(e).__name__}: {e}"
            off += sizes[i]
        _sync(dev)
        comm_s += t2 - t1
        unpack_s += time.perf_counter() - t2
        del buf
    t3 = time.perf_counter()
    version = int(header["version"])
    lo, hi, ok = _handshake(version, err is None, group, dev)
    tm.update(broadcast_ms=comm_s * 1e3, unpack_ms=unpack_s * 1e3, handshake_ms=(time.perf_counter() - t3) * 1e3,
              total_ms=(time.perf_counter() - t0) * 1e3)
    if err is not None:
        raise RuntimeError(f"weight broadcast of version {version}: this receiver refused it: {err}")
    if not ok:
        raise RuntimeError(f"weight broadcast of version {version}: another receiver failed to apply it")
    return {"version": version, "tensors": len(header["names"]),
            **{k: round(v, 2) for k, v in tm.items()}}


def _sync(dev) -> None:
    if isinstance(dev, torch.device) and dev.type == "cuda":
        torch.cuda.synchronize(dev)


def copy_into(module: torch.nn.Module) -> Tuple[Callable[[str, torch.Tensor], None], Callable[[dict], None]]:
    """(apply, expect) for a receiver that holds ``module`` itself (the reference engine): apply
    copies each tensor into the parameter or buffer of that name; expect checks that every name
    exists with that shape, and that every tensor of the module arrives (tied aliases aside)."""
    own = module.state_dict(keep_vars=True)
    by_id: Dict[int, List[str]] = {}
    for n, t in own.items():
        by_id.setdefault(id(t), []).append(n)

    def expect(header: dict) -> None:
        names = set(header["names"])
        for n, s in zip(header["names"], header["shapes"]):
            if n not in own:
                raise ValueError(f"{n}: no such tensor in this model")
            if list(own[n].shape) != list(s):
                raise ValueError(f"{n}: shape {list(s)} but this model has {list(own[n].shape)}")
        missing = [ns[0] for ns in by_id.values() if not names.intersection(ns)]
        if missing:
            raise ValueError(f"the update does not carry {missing[:3]}")

    def apply(name: str, t: torch.Tensor) -> None:
        with torch.no_grad():
            own[name].copy_(t)

    return apply, expect
