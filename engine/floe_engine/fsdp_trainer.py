"""The trainer sharded with FSDP2 over the ranks of one torchrun job (any world size, one node).

Launch (rank 0 serves the same HTTP routes as the one-process trainer; the other ranks
wait for its commands)::

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m floe_engine.trainer_server \\
        --port 8200 --model tiny --checkpoint DIR/v0 --publish-dir DIR --lr 1e-4

or, one process, the same sharded code path at world size 1 (adds resume; see below)::

    python -m floe_engine.trainer_server --fsdp --port 8200 ...

What each rank holds and does:

* **Sharding.** ``fully_shard`` (FSDP2) on every transformer block (the tiny model's
  ``blocks``, an HF model's decoder ``layers``) and on a root module around the whole policy
  (embeddings, final norm, output head: tied weights stay in one group). Parameters are
  sharded fp32 *master* weights; ``MixedPrecisionPolicy(param_dtype=<the engine's dtype>,
  reduce_dtype=fp32)`` all-gathers them in the engine's dtype for the forward (the same
  weights and arithmetic the engines sample with, as ``trainer.MasterWeightsOptimizer`` does in
  one process) and reduce-scatters gradients in fp32. AdamW runs on the fp32 shards.
* **Data.** Every rank receives the whole batch (rank 0 broadcasts each request with
  ``broadcast_object_list``), then trains on its share of the samples: samples are dealt
  longest-first to the rank with the fewest tokens so far. Each sample's loss is normalised
  by the *global* counts of the minibatch (masked tokens, or samples for seq-mean) and
  gradients are *summed* over ranks (``set_gradient_divide_factor(1)``), so the gradient is
  the one-process gradient whatever the world size. Every rank runs the same number of
  micro-batches (each rank can compute every rank's share); a rank with nothing left runs a
  two-token micro-batch with weight 0, so the collectives of all ranks line up.
* **Forward.** One padded full-sequence forward per micro-batch, each block called once
  (``full_sequence_logprobs``): the head runs only at the masked positions. With ``--pack``
  the micro-batches are token-budget bins (``config.micro_batch_tokens``) of samples packed
  into one unpadded sequence, each sample attending only to itself (``packed_logprobs``);
  the loss is exact under packing since every sample keeps its own log-probs and the global
  normalisation.
* **Activation checkpointing** (``--activation-checkpointing``): each block keeps only its
  input and recomputes the rest in the backward pass (``checkpoint_activations``).
* **Publishing** (``publish_sharded``): every rank writes its own safetensors files of the
  version folder, whole tensors balanced by bytes; each tensor is cast to the publish dtype and
  all-gathered on the device, copied by its file's owner into a pinned host buffer and written
  by a writer thread that hashes (xxh3-128) the same bytes. Rank 0 adds the index, the config
  and tokenizer files and the sidecar, then renames the folder into place: the files an HF
  folder has (more shards than the one-process trainer's). ``publish_gathered`` keeps the
  previous rank-0 full gather for comparison.
* **Resume.** After every ``state_every`` steps all ranks write a distributed checkpoint
  (``torch.distributed.checkpoint``: model + optimizer shards, plus the policy version and
  step count) to ``<publish_dir>/trainer_state/v<version>``; see ``trainer_state``.

CUDA ranks use NCCL for the tensors and a gloo group for the commands (pickled requests);
CPU ranks use gloo for both.
"""
from __future__ import annotations

import datetime
import math
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import warnings

import torch
import torch.distributed as dist
import torch.nn as nn

from . import checkpoint as ckpt
from . import step_metrics
from .lifetime import exit_with_parent
from .policy import Policy, gather_logprobs
from .trainer import StepConfig, Trainer, normalize_samples, torch_optimizer


# The blocks return their K/V (views) and the root returns slices of one log-prob tensor; none
# is modified in place, which is what this warning is about.
warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")

# ------------------------------------------------------------------------------ process group
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


# ------------------------------------------------------------------------------ sharding
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


def shard_policy(policy: Policy, ctx: DistContext, activation_checkpointing: bool = False) -> PolicyRoot:
    """fully_shard the policy in place (fp32 shards, compute in ``policy.dtype``); returns the root.
    ``activation_checkpointing``: every block recomputes its activations in the backward."""
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    if policy.device != ctx.device:
        raise ValueError(f"the policy is on {policy.device} but this rank runs on {ctx.device}; "
                         "build it with device=ctx.device")
    with torch.no_grad():  # the shards are the fp32 master weights; buffers (rotary inv_freq) keep their dtype
        for p in policy.module.parameters():
            p.data = p.data.float()
    mp = MixedPrecisionPolicy(param_dtype=policy.dtype, reduce_dtype=torch.float32)
    for blk in transformer_blocks(policy):
        if activation_checkpointing:
            checkpoint_activations(blk)
        fully_shard(blk, mp_policy=mp)
    root = PolicyRoot(policy.module)
    fully_shard(root, mp_policy=mp)
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


# ------------------------------------------------------------------------------ scoring
def packed_logprobs(policy: Policy, rows: Sequence[Tuple[Sequence[int], Sequence[int]]],
                    entropy: bool = False) -> List[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
    """``full_sequence_logprobs`` with the rows packed into ONE sequence of sum(len(ids) - 1)
    tokens, no padding: each row's positions restart at 0 and a block-diagonal causal mask lets
    a token attend only to earlier tokens of its own row, so every log-prob (hence the loss and
    its gradient) is the unpacked one, up to float rounding. The mask is a dense [T, T] tensor
    (fine for the tiny model and SDPA's math / memory-efficient kernels; a varlen flash kernel
    would drop it)."""
    dev = policy.device
    segs = [list(ids[:-1]) for ids, _ in rows]
    T = sum(len(s) for s in segs)
    seg_id = torch.cat([torch.full((len(s),), k, dtype=torch.long) for k, s in enumerate(segs)]).to(dev)
    positions = torch.cat([torch.arange(len(s)) for s in segs]).to(dev)
    idx = torch.arange(T, device=dev)
    blocked = (seg_id[:, None] != seg_id[None, :]) | (idx[None, :] > idx[:, None])  # True = may not attend
    inp = torch.tensor([t for s in segs for t in s], dtype=torch.long, device=dev)[None]
    cols, tgts, spans, start, k = [], [], [], 0, 0
    for (ids, mask), seg in zip(rows, segs):
        pos = [j for j, m in enumerate(mask) if m]
        if pos and pos[0] == 0:
            raise ValueError("loss_mask[0] is 1, but the first token has no prefix to predict it from")
        cols += [start + j - 1 for j in pos]
        tgts += [ids[j] for j in pos]
        spans.append((k, k + len(pos)))
        k += len(pos)
        start += len(seg)
    ci = torch.tensor(cols, device=dev)
    tg = torch.tensor(tgts, dtype=torch.long, device=dev)
    if getattr(policy, "kind", None) == "tiny":
        x = policy.module(inp, hidden=True, positions=positions, attn_mask=blocked)
        logits = policy.module._logits(x[0, ci])
        lp, ent = gather_logprobs(logits[..., : policy.vocab_size], tg, entropy)
    else:  # transformers passes a 4D mask through as is: additive, in the compute dtype
        add = torch.zeros((1, 1, T, T), dtype=policy.dtype, device=dev)
        add.masked_fill_(blocked[None, None], torch.finfo(policy.dtype).min)
        hidden, _ = policy.forward_hidden(inp, use_cache=False, position_ids=positions[None], attention_mask=add)
        lp, ent = policy.head_logprobs(hidden[0, ci], tg, entropy)
    return [(lp[a:b], ent[a:b] if ent is not None else None) for a, b in spans]


def full_sequence_logprobs(policy: Policy, rows: Sequence[Tuple[Sequence[int], Sequence[int]]],
                           entropy: bool = False, packed: bool = False
                           ) -> List[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
    """Per (ids, loss_mask) row: log p(ids[t] | ids[:t]) at its masked t, from one right-padded
    forward of all rows (each block runs once, whatever the rows are: every rank's collectives
    match); the head runs at the masked positions only. Same arithmetic as
    ``Policy.masked_logprobs`` up to float rounding (the tiny model there shares prompt K/V).
    ``packed``: one unpadded sequence instead (``packed_logprobs``)."""
    if packed:
        return packed_logprobs(policy, rows, entropy)
    dev = policy.device
    T = max(len(ids) for ids, _ in rows) - 1
    inp = torch.full((len(rows), max(T, 1)), policy.tokenizer.pad_token_id, dtype=torch.long)
    r_idx, c_idx, tgts, spans, k = [], [], [], [], 0
    for r, (ids, mask) in enumerate(rows):
        inp[r, : len(ids) - 1] = torch.tensor(list(ids[:-1]), dtype=torch.long)
        pos = [j for j, m in enumerate(mask) if m]
        if pos and pos[0] == 0:
            raise ValueError(f"row {r}: loss_mask[0] is 1, but the first token has no prefix to predict it from")
        r_idx += [r] * len(pos)
        c_idx += [j - 1 for j in pos]
        tgts += [ids[j] for j in pos]
        spans.append((k, k + len(pos)))
        k += len(pos)
    inp = inp.to(dev)
    ri, ci = torch.tensor(r_idx, device=dev), torch.tensor(c_idx, device=dev)
    tg = torch.tensor(tgts, dtype=torch.long, device=dev)
    if getattr(policy, "kind", None) == "tiny":
        x = policy.module(inp, hidden=True)
        logits = policy.module._logits(x[ri, ci])
        lp, ent = gather_logprobs(logits[..., : policy.vocab_size], tg, entropy)
    else:
        hidden, _ = policy.forward_hidden(inp, use_cache=False)
        lp, ent = policy.head_logprobs(hidden[ri, ci], tg, entropy)
    return [(lp[a:b], ent[a:b] if ent is not None else None) for a, b in spans]


# ------------------------------------------------------------------------------ optimizer
class ShardedOptimizer:
    """AdamW (or SGD with momentum) on the fp32 shards; the global gradient norm is the square
    root of the all-reduced sum of every shard's squared gradient. Same interface (and same
    clipping rule as ``torch.nn.utils.clip_grad_norm_``) as ``trainer.MasterWeightsOptimizer``."""

    def __init__(self, params, lr: float, betas=(0.9, 0.99), weight_decay: float = 0.0, eps: float = 1e-8,
                 kind: str = "adamw"):
        self.params = [p for p in params if p.requires_grad]
        self.opt = torch_optimizer(self.params, lr=lr, betas=betas, weight_decay=weight_decay, eps=eps, kind=kind)
        self.param_groups = self.opt.param_groups

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @staticmethod
    def _local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if hasattr(t, "to_local") else t

    def grad_norm(self) -> float:
        grads = [self._local(p.grad) for p in self.params if p.grad is not None]
        dev = grads[0].device if grads else self.params[0].device
        sq = torch.zeros((), dtype=torch.float64, device=dev)
        for g in grads:
            sq += g.detach().double().pow(2).sum()
        if dist.is_initialized():
            dist.all_reduce(sq)
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


# ------------------------------------------------------------------------------ trainer
class FSDPTrainer(Trainer):
    """``Trainer`` over the ranks of a process group. On rank 0, ``train_step`` / ``score`` first
    send the request to the other ranks, which run ``serve_workers`` until told to stop."""

    def __init__(self, policy: Policy, version: int, publish_dir: str, ctx: DistContext,
                 state_every: int = 1, state_keep: int = 1, activation_checkpointing: bool = False,
                 pack: bool = False, **kw):
        self.ctx = ctx
        self.channel = CommandChannel(ctx)
        self.root = shard_policy(policy, ctx, activation_checkpointing)
        self.activation_checkpointing = activation_checkpointing
        self.packing = pack
        self.state_every = int(state_every)
        self.state_keep = int(state_keep)
        self.resumed_from: Optional[str] = None
        super().__init__(policy, version, publish_dir, **kw)

    def _make_optimizer(self, **kw):
        return ShardedOptimizer(self.policy.module.parameters(), **kw)

    # --- requests (rank 0) ----------------------------------------------------------
    def train_step(self, samples: Sequence[dict], config: Optional[dict] = None) -> dict:
        cfg = StepConfig.from_dict(config)  # bad requests fail here, on rank 0 alone
        rows = normalize_samples(samples, self.policy.vocab_size, self.policy.context)
        with self.lock:
            self.channel.send(("train_step", list(samples), config))
            return self._train_step(rows, cfg)

    def score(self, samples: Sequence[dict]) -> List[List[float]]:
        with self.lock:
            self.channel.send(("score", list(samples)))
            return self._score(samples)

    def logprobs(self, pairs) -> List[List[float]]:
        return self.score([{"prompt_ids": list(p), "completion_ids": list(c)} for p, c in pairs])

    def stop_workers(self) -> None:
        with self.lock:
            self.channel.send(("stop",))

    def serve_workers(self) -> None:
        """Ranks > 0: run rank 0's commands until it sends stop. A request that fails raises on
        every rank alike (same data); the worker reports it and waits for the next one."""
        while True:
            cmd = self.channel.recv()
            try:
                if cmd[0] == "stop":
                    return
                if cmd[0] == "train_step":
                    self._train_step(normalize_samples(cmd[1], self.policy.vocab_size, self.policy.context),
                                     StepConfig.from_dict(cmd[2]))
                elif cmd[0] == "score":
                    self._score(cmd[1])
                else:
                    raise ValueError(f"unknown command {cmd[0]!r}")
            except Exception as e:  # rank 0 answers the client; keep serving
                print(f"[rank {self.ctx.rank}] {cmd[0]} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def _score(self, samples: Sequence[dict]) -> List[List[float]]:
        from .logprobs import score_samples
        try:
            with torch.no_grad():
                return self.root(lambda: score_samples(self.policy, samples))
        finally:
            reshard_all(self.root)

    # --- the step ----------------------------------------------------------------
    def assign(self, samples: Sequence[dict], idxs: Sequence[int]) -> List[List[int]]:
        """Deal ``idxs`` to the ranks, longest first, each to the rank with the fewest tokens
        (ties: lowest rank). Every rank computes the same answer from the same batch."""
        W = self.ctx.world_size
        out: List[List[int]] = [[] for _ in range(W)]
        load = [0] * W
        for i in sorted(idxs, key=lambda i: (-len(samples[i]["ids"]), i)):
            r = min(range(W), key=lambda r: (load[r], r))
            out[r].append(i)
            load[r] += len(samples[i]["ids"])
        return out

    def micro_batches(self, samples: Sequence[dict], idxs: Sequence[int], budget: int) -> List[List[int]]:
        return (self.bins if self.packing else self.pack)(samples, idxs, budget)

    @staticmethod
    def bins(samples: Sequence[dict], idxs: Sequence[int], budget: int) -> List[List[int]]:
        """Packing: first-fit decreasing of ``idxs`` into micro-batches of at most ``budget``
        tokens (len(ids) - 1 each, no padding; a longer sample goes alone)."""
        out: List[List[int]] = []
        used: List[int] = []
        for i in sorted(idxs, key=lambda i: (-len(samples[i]["ids"]), i)):
            t = len(samples[i]["ids"]) - 1
            for b in range(len(out)):
                if used[b] + t <= budget:
                    out[b].append(i)
                    used[b] += t
                    break
            else:
                out.append([i])
                used.append(t)
        return out

    @staticmethod
    def pack(samples: Sequence[dict], idxs: Sequence[int], budget: int) -> List[List[int]]:
        """Micro-batches of ``idxs`` (sorted by length) whose padded size rows * longest stays
        within ``budget`` tokens (a longer sample goes alone)."""
        order = sorted(idxs, key=lambda i: (len(samples[i]["ids"]), i))
        out, cur, longest = [], [], 0
        for i in order:
            t = len(samples[i]["ids"])
            if cur and (len(cur) + 1) * max(longest, t) > budget:
                out.append(cur)
                cur, longest = [], 0
            cur.append(i)
            longest = max(longest, t)
        if cur:
            out.append(cur)
        return out

    def _backward(self, samples: List[dict], idxs: List[int], adv: List[float], cfg: StepConfig,
                  acc: Optional[dict], measure: bool) -> None:
        n_tokens = sum(len(samples[i]["_masked"]) for i in idxs)
        seq_count = len(idxs)
        if n_tokens == 0:
            return
        per_rank = [self.micro_batches(samples, mine, cfg.micro_batch_tokens) for mine in self.assign(samples, idxs)]
        mine = per_rank[self.ctx.rank]
        dummy = samples[idxs[0]]["ids"][:2]
        for k in range(max(len(m) for m in per_rank)):
            mb = mine[k] if k < len(mine) else []
            rows = [(samples[i]["ids"], samples[i]["loss_mask"]) for i in mb] or [(dummy, [0, 1])]
            res = self.root(lambda: full_sequence_logprobs(self.policy, rows, entropy=acc is not None,
                                                           packed=self.packing))
            loss = None
            for i, (lp, ent) in zip(mb, res):
                part = self._sample_loss(samples[i], lp, ent, adv[i], cfg, n_tokens, seq_count, acc, measure)
                if part is not None:
                    loss = part if loss is None else loss + part
            if loss is None:  # nothing of this rank's: weight 0, but the collectives still run
                loss = sum(lp.sum() for lp, _ in res) * 0.0
            loss.backward()

    def _all_reduce(self, values: List[float], op) -> List[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.ctx.device)
        dist.all_reduce(t, op=op)
        return t.tolist()

    def _reduce_metrics(self, acc: dict) -> None:
        keys = ["loss", "abs", "k3", "ent", "clipped", "measured", "abs_cur", "n_cur", "abs_old", "n_old"]
        for k, v in zip(keys, self._all_reduce([float(acc[k]) for k in keys], dist.ReduceOp.SUM)):
            acc[k] = int(round(v)) if isinstance(acc[k], int) else v
        acc["ratio_max"] = self._all_reduce([acc["ratio_max"]], dist.ReduceOp.MAX)[0]

    def _perf_metrics(self, forward_tokens: int, seconds: float) -> dict:
        dev = self.policy.device
        peaks: List[Any] = [None] * self.ctx.world_size
        dist.all_gather_object(peaks, step_metrics.peak_memory_bytes(dev), group=self.ctx.cmd_group)
        return step_metrics.step_perf(dev, self.policy.num_parameters(), forward_tokens, seconds,
                                      self.ctx.world_size, peaks, self.peak_tflops)

    def _train_step(self, samples: List[dict], cfg: StepConfig) -> dict:
        out = super()._train_step(samples, cfg)
        if self.state_every > 0 and self.steps % self.state_every == 0:
            from . import trainer_state
            t0 = time.perf_counter()
            trainer_state.save(self)
            out["metrics"]["state_save_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
        return out

    # --- weights out ---------------------------------------------------------------
    def full_state_dict(self) -> dict:
        """The full fp32 weights, gathered to rank 0's CPU (an empty dict on the other ranks);
        names that share one parameter (tied embeddings) share one tensor, as in the module."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        sd = get_model_state_dict(self.policy.module,
                                  options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if sd:
            first = {}
            for name, p in self.policy.module.named_parameters(remove_duplicate=False):
                if name in sd:
                    sd[name] = sd[first.setdefault(id(p), name)]
        return sd

    def publish(self, timings: Optional[dict] = None) -> str:
        return publish_sharded(self, timings)

    def publish_gathered(self, timings: Optional[dict] = None) -> str:
        """The previous publish, kept to compare against (bench/engine/publish_bench.py): the full
        fp32 weights gathered to rank 0's CPU, then ``checkpoint.save_policy`` there alone."""
        t0 = time.perf_counter()
        sd = self.full_state_dict()
        gather_ms = (time.perf_counter() - t0) * 1e3
        path, err = None, None
        if self.ctx.is_main:
            try:
                path = ckpt.save_policy(self.policy, ckpt.version_dir(self.publish_dir, self.version), self.version,
                                        dtype=self.publish_dtype, timings=timings, state_dict=sd)
            except Exception as e:  # every rank must hear of it, or they would wait for rank 0 forever
                err = f"{type(e).__name__}: {e}"
        del sd
        box = [(path, err)]
        dist.broadcast_object_list(box, src=0, group=self.ctx.cmd_group)
        path, err = box[0]
        if err:
            raise RuntimeError(f"publishing v{self.version} on rank 0 failed: {err}")
        if timings is not None:
            timings["gather_ms"] = round(gather_ms, 1)
        return path

    def ensure_published(self) -> str:
        box = [os.path.exists(self.published_path())]  # rank 0 decides: all ranks gather, or none
        dist.broadcast_object_list(box, src=0, group=self.ctx.cmd_group)
        return self.published_path() if box[0] else self.publish()

    def _log(self, row: dict) -> None:
        if self.ctx.is_main:
            super()._log(row)


# ------------------------------------------------------------------------------ sharded publish
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
        import queue
        import threading

        from . import weights_io
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

    from . import checksum, weights_io

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
            import shutil
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
