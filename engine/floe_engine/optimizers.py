"""The trainers' optimizers: AdamW (betas 0.9/0.99) or SGD with momentum, over fp32 master weights
(``MasterWeightsOptimizer``, one process) or over the fp32 shards of an FSDP2 module
(``ShardedOptimizer``). Both clip the global gradient norm and skip a step whose norm is not
finite.

They are built without a learning rate or weight decay: whoever steps them sets both on every
param group first (the trainers from each step's config, the SFT warm start from its schedule),
so no value of either lives here.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

KINDS = ("adamw", "sgd")


def _fusable(params: list) -> bool:
    """PyTorch's fused AdamW (one kernel over all tensors, on the GPU and since PyTorch 2.4 on the CPU)
    takes these parameters: floating point, on CUDA or the CPU."""
    fused_cpu = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 4)
    return bool(params) and all(p.is_floating_point() and (p.device.type == "cuda" or (p.device.type == "cpu" and fused_cpu))
                                for p in params)


def torch_optimizer(params, kind: str = "adamw", betas=(0.9, 0.99), eps: float = 1e-8) -> torch.optim.Optimizer:
    """AdamW, or plain SGD with momentum ``betas[0]`` (steps scale with the gradient itself);
    lr and weight decay 0 until the caller sets them on the param groups. AdamW is PyTorch's fused
    implementation where the parameters allow it: the same update as the default multi-tensor one
    (to fp32 rounding) in one pass over memory. On the CPU, where the default is a loop over
    tensors, it took a Qwen3.5-4B step at 32k tokens with the optimizer offloaded from 23.3 s to
    12.6 s on an H100 host (docs/results.md, "The trainer at real shapes")."""
    params = list(params)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=0.0, betas=betas, weight_decay=0.0, eps=eps,
                                 **({"fused": True} if _fusable(params) else {}))
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.0, momentum=betas[0], weight_decay=0.0)
    raise ValueError(f"unknown optimizer {kind!r}; use one of {KINDS}")


class _OptimizerBase:
    """What both optimizers share: the parameters they step and a torch optimizer ``opt``."""

    params: list
    opt: torch.optim.Optimizer

    @property
    def param_groups(self) -> list:
        # read through: loading a state dict (trainer_state's resume) replaces the optimizer's list
        return self.opt.param_groups

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


class MasterWeightsOptimizer(_OptimizerBase):
    """AdamW (or SGD with momentum) over fp32 master copies of a module whose own weights may be bf16.

    The module keeps the engine's dtype, so the trainer's forward uses exactly
    the weights (and the arithmetic precision) the engines sample with; that
    is what keeps engine and trainer log-probs matched. Gradients are copied
    into the fp32 masters, clipped and applied there, and the module's weights
    are refreshed from the masters after each step. With an fp32 module this
    is plain AdamW.
    """

    def __init__(self, params, kind: str = "adamw", betas=(0.9, 0.99), eps: float = 1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.mixed = any(p.dtype != torch.float32 for p in self.params)
        self.master = ([p.detach().float().clone() for p in self.params] if self.mixed else self.params)
        self.opt = torch_optimizer(self.master, kind=kind, betas=betas, eps=eps)

    def zero_grad(self) -> None:
        super().zero_grad()
        if self.mixed:
            for m in self.master:
                m.grad = None

    def clip_and_step(self, max_norm: float) -> float:
        """Clip the global grad norm to ``max_norm`` and step; returns the pre-clip norm
        (the step is skipped when it is not finite)."""
        if self.mixed:
            for p, m in zip(self.params, self.master):
                m.grad = None if p.grad is None else p.grad.detach().float()
        with_grad = [m for m in self.master if m.grad is not None]
        norm = float(torch.nn.utils.clip_grad_norm_(with_grad, max_norm)) if with_grad else 0.0
        if math.isfinite(norm):
            self.opt.step()
            if self.mixed:
                with torch.no_grad():
                    for p, m in zip(self.params, self.master):
                        p.copy_(m)
        self.zero_grad()
        return norm


class ShardedOptimizer(_OptimizerBase):
    """AdamW (or SGD with momentum) on the fp32 shards; the global gradient norm is the square
    root of the all-reduced sum of every shard's squared gradient. Same interface (and same
    clipping rule as ``torch.nn.utils.clip_grad_norm_``) as ``MasterWeightsOptimizer``."""

    def __init__(self, params, kind: str = "adamw", betas=(0.9, 0.99), eps: float = 1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.opt = torch_optimizer(self.params, kind=kind, betas=betas, eps=eps)

    @staticmethod
    def _local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if hasattr(t, "to_local") else t

    def _local_grads(self) -> list:
        return [self._local(p.grad).detach() for p in self.params if p.grad is not None]

    def grad_norm(self) -> float:
        """Each local gradient's norm in one multi-tensor kernel (fp32, as ``clip_grad_norm_``), their
        squares summed in fp64 and all-reduced: no fp64 copy of any gradient."""
        grads = self._local_grads()
        dev = grads[0].device if grads else self.params[0].device
        sq = torch.zeros((), dtype=torch.float64, device=dev)
        if grads:
            sq = torch.stack(torch._foreach_norm(grads, 2.0)).double().square().sum()
        if dist.is_initialized():
            if sq.device.type == "cpu" and dist.get_backend() == "nccl":
                sq = sq.cuda()  # shards offloaded to host memory; NCCL reduces device tensors only
            dist.all_reduce(sq)
        return float(sq.sqrt())

    def clip_and_step(self, max_norm: float) -> float:
        norm = self.grad_norm()
        if math.isfinite(norm):
            coef = min(1.0, max_norm / (norm + 1e-6))
            grads = self._local_grads()
            if coef < 1.0 and grads:
                torch._foreach_mul_(grads, coef)
            self.opt.step()
        self.zero_grad()
        return norm
