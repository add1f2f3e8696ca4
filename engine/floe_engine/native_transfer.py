"""Weights from the trainer into unmodified vLLM and SGLang servers, over their own weight-transfer routes.

Both servers receive weights broadcast by a trainer over a process group in which the trainer is
rank 0 and the server's workers are ranks ``rank_offset`` … ``world_size - 1``. The names, dtypes and
shapes travel over HTTP with the update request; the bytes travel as one ``broadcast`` per tensor,
from rank 0, in the order of those names (the "unpacked" wire format of both):

- vLLM 0.34.0 (``--weight-transfer-config '{"backend": "nccl"}'``): ``POST /init_weight_transfer_engine
  {init_info: {master_address, master_port, rank_offset, world_size}}``, then per update
  ``/start_weight_update``, ``/update_weights {update_info: {names, dtype_names, shapes, src}}``,
  ``/finish_weight_update {weight_version}`` (vllm/entrypoints/rl/online/api_router.py;
  vllm/distributed/weight_transfer/nccl_engine.py ``receive_weights``, unpacked branch: an empty
  tensor per name, broadcast from ``src``, into the layerwise reload).
- SGLang 0.5.23: ``POST /init_weights_update_group {master_address, master_port, rank_offset,
  world_size, group_name, backend}``, then per update ``/begin_weight_update``,
  ``/update_weights_from_distributed {names, dtypes, shapes, group_name, flush_cache,
  weight_version}``, ``/end_weight_update`` (python/sglang/srt/entrypoints/http_server.py;
  io_struct.py ``UpdateWeightsFromDistributedReqInput``).

This module is both ends of that wire: :class:`Sender` is the trainer's rank 0 of one engine's group
(the trainer server's ``/weight_transfer/*`` routes), :func:`receive` is what a server's worker does
(floe's reference engine implements it, so the doubles in test/ can stand in for vLLM and SGLang
with real bytes moving). The group is gloo on CPU and NCCL between GPUs; the rendezvous is a
TCPStore the trainer hosts (vLLM's and SGLang's ``master_address``/``master_port``).

The disk path (a published version folder) stays the source of truth: a restarted server loads it.
floe's own bucketed broadcast (weight_broadcast.py) is for engines that run floe's worker code.
"""
from __future__ import annotations

import datetime
import threading
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(minutes=10)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` → ``"bfloat16"``: the names both servers read back with ``getattr(torch, name)``."""
    return str(dtype).removeprefix("torch.")


def dtype_of(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype name {name!r} (expected a torch dtype such as 'bfloat16' or 'float32')")
    return dt


def metadata(entries: Iterable[Tuple[str, torch.Tensor, torch.dtype, tuple]]) -> dict:
    """What the update request carries, from (name, tensor, published dtype, shape) entries."""
    names, dtypes, shapes = [], [], []
    for name, _t, dt, shape in entries:
        names.append(name)
        dtypes.append(dtype_name(dt))
        shapes.append([int(s) for s in shape])
    return {"names": names, "dtype_names": dtypes, "shapes": shapes}


def _group(backend: str, store, rank: int, world_size: int):
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, world_size, TIMEOUT)
    if backend == "nccl":
        return dist.ProcessGroupNCCL(store, rank, world_size)
    raise ValueError(f"weight-transfer backend must be 'gloo' or 'nccl', not {backend!r}")


class Sender:
    """The trainer's end (rank 0) of one engine's weight-transfer group.

    Opening hosts the rendezvous and returns at once with its port; the group forms in the
    background as the engine's workers join (the server's init route), so the caller can tell the
    server where to join while the trainer waits for it."""

    def __init__(self, backend: str, host: str, world_size: int):
        if world_size < 2:
            raise ValueError(f"world_size must count the trainer and at least one engine worker, got {world_size}")
        self.backend = backend
        self.world_size = world_size
        self.store = dist.TCPStore(host, 0, world_size, is_master=True, wait_for_workers=False, timeout=TIMEOUT)
        self.host = host
        self.port = int(self.store.port)
        self._pg = None
        self._error: Optional[BaseException] = None
        self._formed = threading.Event()
        threading.Thread(target=self._form, daemon=True, name=f"weight-transfer-{self.port}").start()

    def _form(self) -> None:
        try:
            self._pg = _group(self.backend, self.store, 0, self.world_size)
        except BaseException as e:  # surfaced by send()
            self._error = e
        finally:
            self._formed.set()

    def ready(self, timeout_s: float) -> bool:
        return self._formed.wait(timeout_s) and self._error is None

    def send(self, entries: Sequence[Tuple[str, torch.Tensor, torch.dtype, tuple]], timeout_s: float = 600.0) -> Dict[str, float]:
        """Broadcast each tensor, cast to its published dtype, in the order of ``metadata(entries)``."""
        if not self._formed.wait(timeout_s):
            raise TimeoutError(f"no engine joined the weight-transfer group at {self.host}:{self.port} within {timeout_s:.0f} s: "
                               "the server's init route (vLLM /init_weight_transfer_engine, SGLang /init_weights_update_group) was not called or cannot reach this address")
        if self._error is not None:
            raise RuntimeError(f"the weight-transfer group at {self.host}:{self.port} did not form: {self._error}")
        t0 = time.perf_counter()
        nbytes = 0
        device = torch.device("cuda") if self.backend == "nccl" else torch.device("cpu")
        with torch.no_grad():
            for _name, t, dt, _shape in entries:
                x = t.detach().to(device=device, dtype=dt).contiguous()
                self._pg.broadcast(x, 0).wait()
                nbytes += x.numel() * x.element_size()
        return {"send_ms": round((time.perf_counter() - t0) * 1e3, 2), "bytes": nbytes, "tensors": len(entries)}


def join(backend: str, master_address: str, master_port: int, rank: int, world_size: int):
    """A server worker's end: join the trainer's group as ``rank`` (blocks until every member joined)."""
    store = dist.TCPStore(master_address, int(master_port), int(world_size), is_master=False, timeout=TIMEOUT)
    return _group(backend, store, int(rank), int(world_size))


def receive(group, names: List[str], dtype_names: List[str], shapes: List[List[int]], src: int = 0,
            device: Optional[torch.device] = None) -> List[Tuple[str, torch.Tensor]]:
    """The tensors one update broadcasts, as (name, tensor), in order (an empty tensor per name,
    filled by a broadcast from ``src``)."""
    if not (len(names) == len(dtype_names) == len(shapes)):
        raise ValueError(f"names, dtype_names and shapes must have one entry per tensor (got {len(names)}, {len(dtype_names)}, {len(shapes)})")
    out = []
    for name, dn, shape in zip(names, dtype_names, shapes):
        t = torch.empty([int(s) for s in shape], dtype=dtype_of(dn), device=device or torch.device("cpu"))
        group.broadcast(t, int(src)).wait()
        out.append((name, t))
    return out
