"""The sharded trainer's process group: joining the torchrun job (``init_distributed``, or a
one-process group without torchrun), and the command channel over which rank 0 hands every
HTTP request to the other ranks.

CUDA ranks use NCCL for the tensors and a gloo group for the commands (pickled requests); CPU
ranks use gloo for both.
"""
from __future__ import annotations

import datetime
import os
import socket
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.distributed as dist

from .lifetime import exit_with_parent


@dataclass
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    cmd_group: Any  # gloo group that carries the pickled commands

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launched_by_torchrun() -> bool:
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def init_distributed(device: Optional[str] = None, timeout_s: float = 7 * 86400) -> DistContext:
    """Join the torchrun job named by RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT
    (a one-process group on a free local port when they are absent). ``device``: auto | cpu |
    cuda: CUDA ranks use cuda:LOCAL_RANK and NCCL. The timeout is long because ranks other than
    0 wait in a collective until rank 0 receives the next HTTP request."""
    if launched_by_torchrun():
        # a launcher killed with SIGKILL would leave this rank waiting in a collective for rank
        # 0's next request (the process group's timeout is days), holding its share of the model
        exit_with_parent()
    else:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = (device in (None, "", "auto") and torch.cuda.is_available()) or (device or "").startswith("cuda")
    if use_cuda:
        if not torch.cuda.is_available():
            raise RuntimeError(f"--device {device} but CUDA is not available on this machine; use --device cpu")
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    timeout = datetime.timedelta(seconds=timeout_s)
    if not dist.is_initialized():
        kw = {"device_id": dev} if use_cuda else {}
        dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timeout, **kw)
    cmd = dist.new_group(backend="gloo", timeout=timeout) if use_cuda else dist.group.WORLD
    return DistContext(rank, world, local, dev, cmd)


class CommandChannel:
    """Rank 0 hands each request to the other ranks: ``send`` on rank 0, ``recv`` elsewhere
    (``broadcast_object_list`` over the gloo group)."""

    def __init__(self, ctx: DistContext):
        self.ctx = ctx

    def send(self, obj) -> None:
        if self.ctx.world_size > 1:
            dist.broadcast_object_list([obj], src=0, group=self.ctx.cmd_group)

    def recv(self):
        box = [None]
        dist.broadcast_object_list(box, src=0, group=self.ctx.cmd_group)
        return box[0]
