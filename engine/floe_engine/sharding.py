"""FSDP2 sharding of a policy: ``fully_shard`` on every transformer block (the tiny model's
``blocks``, an HF model's decoder ``layers``) and on a root module around the whole policy
(embeddings, final norm, output head: tied weights stay in one group), with mixed precision and
optional activation checkpointing.

Parameters are sharded fp32 *master* weights; ``MixedPrecisionPolicy(param_dtype=<the engine's
dtype>, reduce_dtype=fp32)`` all-gathers them in the engine's dtype for the forward (the same
weights and arithmetic the engines sample with, as ``optimizers.MasterWeightsOptimizer`` does in
one process) and reduce-scatters gradients in fp32. Gradients are *summed* over ranks
(``set_gradient_divide_factor(1)``): the loss is normalised by the global counts of the batch
(``loss``), so the gradient is the one-process gradient whatever the world size.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, List

import torch
import torch.nn as nn

from .distributed import DistContext
from .policy import Policy

# The blocks return their K/V (views) and the root returns slices of one log-prob tensor; none
# is modified in place, which is what this warning is about.
warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")


class PolicyRoot(nn.Module):
    """The FSDP root around ``policy.module``: its forward runs any function of the policy, so
    the root group's parameters (embeddings, final norm, head) are gathered for scoring code
    that does not go through ``module.forward`` (an HF policy calls its base model and head)."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.inner = module

    def forward(self, fn: Callable[[], Any]):
        return fn()


def transformer_blocks(policy: Policy) -> List[nn.Module]:
    """The repeated blocks to shard one by one: the tiny model's ``blocks``, an HF model's
    decoder ``layers`` (else the longest ModuleList in the model)."""
    m = policy.module
    if getattr(policy, "kind", None) == "tiny":
        return list(m.blocks)
    layers = getattr(getattr(policy, "base", None), "layers", None)
    if isinstance(layers, nn.ModuleList) and len(layers):
        return list(layers)
    lists = [x for x in m.modules() if isinstance(x, nn.ModuleList)]
    if not lists:
        raise ValueError(f"no transformer blocks (nn.ModuleList) found in {type(m).__name__} to shard")
    return list(max(lists, key=len))


def checkpoint_activations(block: nn.Module) -> None:
    """Recompute ``block``'s activations in the backward pass instead of keeping them (only its
    input is saved): the block's own ``forward`` runs under non-reentrant
    ``torch.utils.checkpoint``. Set before ``fully_shard``, so FSDP's hooks stay outside: the
    parameters are gathered before the block's backward starts, and the recomputation uses them
    (the order torchtitan uses). Parameter names do not change."""
    from torch.utils.checkpoint import checkpoint

    inner = block.forward

    def forward(*args, **kwargs):
        if not torch.is_grad_enabled():
            return inner(*args, **kwargs)
        return checkpoint(inner, *args, use_reentrant=False, **kwargs)
    block.forward = forward


def compile_block(block: nn.Module) -> None:
    """The block's own forward through ``torch.compile`` (dynamic shapes: rollouts differ in
    length), set before activation checkpointing and ``fully_shard`` so that the recompute runs
    the compiled code and FSDP's gathers stay outside the graph."""
    block.forward = torch.compile(block.forward, dynamic=True)


def shard_policy(policy: Policy, ctx: DistContext, activation_checkpointing: bool = False,
                 offload_optimizer: bool = False, compile_blocks: bool = False) -> PolicyRoot:
    """fully_shard the policy in place (fp32 shards, compute in ``policy.dtype``); returns the root.
    ``activation_checkpointing``: every block recomputes its activations in the backward.
    ``offload_optimizer``: the fp32 shards, their gradients and so the optimizer's moments live in
    host memory (FSDP2's ``CPUOffloadPolicy``, pinned on a GPU): each forward and backward copies a
    block's shard to the device as it gathers it, the gradients come back, and the optimizer
    steps on the CPU. GPU memory then holds activations and one gathered block at a time, not
    the 16 bytes a parameter of fp32 master, gradient and AdamW moments.
    ``compile_blocks``: each block's forward compiled (``compile_block``)."""
    from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, fully_shard

    if policy.device != ctx.device:
        raise ValueError(f"the policy is on {policy.device} but this rank runs on {ctx.device}; "
                         "build it with device=ctx.device")
    with torch.no_grad():  # the shards are the fp32 master weights; buffers (rotary inv_freq) keep their dtype
        for p in policy.module.parameters():
            p.data = p.data.float()
    mp = MixedPrecisionPolicy(param_dtype=policy.dtype, reduce_dtype=torch.float32)
    kw: dict = {"mp_policy": mp}
    if offload_optimizer:
        kw["offload_policy"] = CPUOffloadPolicy(pin_memory=ctx.device.type == "cuda")
    for blk in transformer_blocks(policy):
        if compile_blocks:
            compile_block(blk)
        if activation_checkpointing:
            checkpoint_activations(blk)
        fully_shard(blk, **kw)
    root = PolicyRoot(policy.module)
    fully_shard(root, **kw)
    for m in root.modules():
        if isinstance(m, FSDPModule):
            # sum over ranks (the loss is normalised globally); a plain SUM collective, as gloo
            # has no PREMUL_SUM
            m.set_gradient_divide_factor(1.0)
            if hasattr(m, "set_force_sum_reduction_for_comms"):  # torch >= 2.12; NCCL has PREMUL_SUM anyway
                m.set_force_sum_reduction_for_comms(True)
    return root


def reshard_all(root: nn.Module) -> None:
    """Free every gathered parameter (after a no-grad forward the root keeps its own gathered,
    and an optimizer step would then leave them stale)."""
    from torch.distributed.fsdp import FSDPModule
    for m in root.modules():
        if isinstance(m, FSDPModule):
            m.reshard()
