"""The sharded trainer's own state on disk, so a restarted trainer continues the run exactly.

The published version folders hold the weights in the engines' dtype only; continuing a run
bit for bit also needs the fp32 master weights and the optimizer's moments (AdamW's exp_avg /
exp_avg_sq and step count). ``save`` writes them with ``torch.distributed.checkpoint`` (DCP:
every rank writes its own shards in parallel; DCP can load them at another world size, which
the tests do not cover) to ``<publish_dir>/trainer_state/v<version>``, together with
``floe_trainer_state.json`` = {version, steps, world_size, optimizer, created_unix}. The
folder is written as ``v<version>.tmp`` and renamed once complete, the JSON written last, so a
trainer killed mid-save leaves a ``.tmp`` folder that ``latest`` ignores (and the next save
removes). Older complete states beyond ``keep`` are deleted after a new one is in place.
There is no learning-rate scheduler state to keep: floe sends the learning rate with each
step (``config.lr``) and the optimizer's param groups, saved here, hold the last one.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from typing import Optional, Tuple

import torch.distributed as dist

DIR = "trainer_state"
META = "floe_trainer_state.json"
_NAME = re.compile(r"^v(\d+)$")


def state_root(publish_dir: str) -> str:
    return os.path.join(publish_dir, DIR)


def latest(publish_dir: str) -> Optional[Tuple[str, dict]]:
    """(folder, meta) of the newest complete state under ``publish_dir``, or None."""
    root = state_root(publish_dir)
    best = None
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return None
    for name in names:
        m = _NAME.match(name)
        meta_path = os.path.join(root, name, META)
        if not m or not os.path.isfile(meta_path):
            continue
        try:
            with open(meta_path) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            continue
        if best is None or meta["version"] > best[1]["version"]:
            best = (os.path.join(root, name), meta)
    return best


def _state_dicts(trainer):
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model_sd, optim_sd = get_state_dict(trainer.policy.module, [trainer.opt.opt])
    return {"model": model_sd, "optim": optim_sd}


def save(trainer) -> str:
    """All ranks: write the trainer's state for its current version; returns the folder."""
    import torch.distributed.checkpoint as dcp

    ctx = trainer.ctx
    root = state_root(trainer.publish_dir)
    final = os.path.join(root, f"v{trainer.version}")
    tmp = final + ".tmp"
    if ctx.is_main:
        os.makedirs(root, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    dist.barrier(group=ctx.cmd_group)
    dcp.save(_state_dicts(trainer), checkpoint_id=tmp)
    dist.barrier(group=ctx.cmd_group)
    if ctx.is_main:
        meta = {"version": trainer.version, "steps": trainer.steps, "world_size": ctx.world_size,
                "optimizer": type(trainer.opt.opt).__name__, "created_unix": time.time()}
        with open(os.path.join(tmp, META), "w") as f:
            json.dump(meta, f)
            f.flush()
            os.fsync(f.fileno())
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
        _prune(root, keep=max(1, trainer.state_keep), newest=trainer.version)
    dist.barrier(group=ctx.cmd_group)
    return final


def _prune(root: str, keep: int, newest: int) -> None:
    versions = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name.endswith(".tmp") and name != f"v{newest}.tmp":
            shutil.rmtree(path, ignore_errors=True)  # a save that never finished
            continue
        m = _NAME.match(name)
        if m and os.path.isfile(os.path.join(path, META)):
            versions.append(int(m.group(1)))
    for v in sorted(versions)[:-keep]:
        shutil.rmtree(os.path.join(root, f"v{v}"), ignore_errors=True)


def load(trainer, folder: str, meta: dict) -> None:
    """All ranks: restore weights, optimizer state, version and step count from ``folder``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    state = _state_dicts(trainer)
    try:
        dcp.load(state, checkpoint_id=folder)
    except Exception as e:
        raise RuntimeError(f"cannot resume from {folder}: {type(e).__name__}: {e}. It was written by another "
                           f"model or optimizer? Start with --no-resume (or move {folder} away)") from e
    set_state_dict(trainer.policy.module, [trainer.opt.opt], model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    trainer.version = int(meta["version"])
    trainer.steps = int(meta["steps"])
    trainer.resumed_from = folder
