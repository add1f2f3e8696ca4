"""The trainer sharded with FSDP2 over the ranks of one torchrun job (any world size, one node):
``FSDPTrainer`` composes the process group (``distributed``), the sharded policy (``sharding``),
the one-forward micro-batches (``scoring.full_sequence_logprobs``), the loss of the one-process
step (``loss``, through ``trainer.Trainer``), the sharded optimizer (``optimizers``), per-rank
publishing (``publish``) and its own resumable state (``trainer_state``).

Launch (rank 0 serves the same HTTP routes as the one-process trainer; the other ranks
wait for its commands)::

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m floe_engine.trainer_server \\
        --port 8200 --model tiny --checkpoint DIR/v0 --publish-dir DIR

or, one process, the same sharded code path at world size 1 (adds resume; see below)::

    python -m floe_engine.trainer_server --fsdp --port 8200 ...

What each rank holds and does:

* **Data.** Every rank receives the whole batch (rank 0 broadcasts each request over the
  command channel), then trains on its share of the samples: samples are dealt longest-first to
  the rank with the fewest tokens so far. Each sample's loss is normalised by the *global*
  counts of the minibatch and gradients are summed over ranks, so the gradient is the
  one-process gradient whatever the world size. Every rank runs the same number of
  micro-batches (each rank can compute every rank's share); a rank with nothing left runs a
  two-token micro-batch with weight 0, so the collectives of all ranks line up.
* **Forward.** One full-sequence forward per micro-batch, each block called once: the head runs
  only at the masked positions. By default (``pack``) the micro-batches are token-budget bins
  (``config.micro_batch_tokens``) of samples packed into one unpadded sequence, each sample
  attending only to itself through variable-length attention with no mask
  (``packed_attention``); the loss is exact under packing since every sample keeps its own
  log-probs and the global normalisation. A model with layers other than softmax attention
  (Qwen3.5's gated-delta-net layers) and ``pack=False`` run right-padded micro-batches; the
  gated-delta-net layers run floe's chunked kernel (``gated_delta``).
* **Resume.** After every ``state_every`` steps all ranks write a distributed checkpoint
  (model + optimizer shards, plus the policy version and step count) to
  ``<publish_dir>/trainer_state/v<version>``; see ``trainer_state``.
"""
from __future__ import annotations

import sys
import time
from dataclasses import fields
from typing import Any, List, Optional, Sequence

import torch
import torch.distributed as dist

from . import gated_delta, packed_attention
from . import publish as publishing
from . import step_metrics
from . import trainer_state
from .distributed import CommandChannel, DistContext
from .loss import LossSums
from .optimizers import ShardedOptimizer
from .policy import Policy
from .scoring import Scored, full_sequence_logprobs, score_samples
from .sharding import reshard_all, shard_policy
from .trainer import StepConfig, Trainer, normalize_samples


class FSDPTrainer(Trainer):
    """``Trainer`` over the ranks of a process group. On rank 0, ``train_step`` / ``score`` first
    send the request to the other ranks, which run ``serve_workers`` until told to stop."""

    skip_zero_advantage = False  # every rank runs the same forwards, whatever its rows' advantages

    def __init__(self, policy: Policy, version: int, publish_dir: str, ctx: DistContext,
                 state_every: int = 1, state_keep: int = 1, activation_checkpointing: bool = False,
                 pack: bool = True, dense_pack_mask: bool = False, offload_optimizer: bool = False,
                 compile_blocks: bool = False, attention_backend: str = "auto", **kw):
        self.ctx = ctx
        self.channel = CommandChannel(ctx)
        if getattr(policy, "kind", None) == "hf":
            gated_delta.install(policy.module)  # Qwen3.5's linear-attention layers: floe's chunked kernel
        self.root = shard_policy(policy, ctx, activation_checkpointing, offload_optimizer, compile_blocks)
        self.offload_optimizer = offload_optimizer
        self.activation_checkpointing = activation_checkpointing
        self.packing = pack and packed_attention.packable(policy)
        self.dense_pack_mask = dense_pack_mask  # the old dense [T, T] mask, for side-by-side benchmarks
        packed_attention.cudnn_preferred(policy.device, attention_backend)  # an unknown name fails here
        self.attention_backend = attention_backend  # packed_attention.BACKENDS
        self.state_every = int(state_every)
        self.state_keep = int(state_keep)
        self.resumed_from: Optional[str] = None
        super().__init__(policy, version, publish_dir, **kw)

    def _make_optimizer(self, **kw):
        return ShardedOptimizer(self.policy.module.parameters(), **kw)

    # --- requests (rank 0) ----------------------------------------------------------
    def train_step(self, samples: Sequence[dict], config: dict) -> dict:
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
        try:
            with torch.no_grad(), packed_attention.sdpa_preference(self.policy.device, self.attention_backend):
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
    def padded(samples: Sequence[dict], idxs: Sequence[int], budget: int) -> List[List[int]]:
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

    def _micro_batches(self, samples: Sequence[dict], idxs: Sequence[int], budget: int) -> List[List[int]]:
        """This rank's micro-batches of ``idxs``, padded with empty ones to the most any rank has."""
        plan = self.bins if self.packing else self.padded
        per_rank = [plan(samples, mine, budget) for mine in self.assign(samples, idxs)]
        mine = per_rank[self.ctx.rank]
        return mine + [[] for _ in range(max(len(m) for m in per_rank) - len(mine))]

    def _forward(self, samples: Sequence[dict], mb: List[int], entropy: bool) -> Scored:
        # an empty micro-batch still runs a forward (two tokens of the batch), for the collectives
        rows = [(samples[i]["ids"], samples[i]["loss_mask"]) for i in mb] or [(samples[0]["ids"][:2], [0, 1])]
        return self.root(lambda: full_sequence_logprobs(self.policy, rows, entropy=entropy, packed=self.packing,
                                                                 dense_mask=self.dense_pack_mask))

    def _all_reduce(self, values: List[float], op) -> List[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.ctx.device)
        dist.all_reduce(t, op=op)
        return t.tolist()

    def _reduce_metrics(self, sums: LossSums) -> None:
        keys = [f.name for f in fields(sums) if f.name != "ratio_max"]
        for k, v in zip(keys, self._all_reduce([float(getattr(sums, k)) for k in keys], dist.ReduceOp.SUM)):
            setattr(sums, k, int(round(v)) if isinstance(getattr(sums, k), int) else v)
        sums.ratio_max = self._all_reduce([sums.ratio_max], dist.ReduceOp.MAX)[0]

    def _perf_metrics(self, forward_tokens: int, seconds: float) -> dict:
        dev = self.policy.device
        peaks: List[Any] = [None] * self.ctx.world_size
        dist.all_gather_object(peaks, step_metrics.peak_memory_bytes(dev), group=self.ctx.cmd_group)
        return step_metrics.step_perf(dev, self.policy.num_parameters(), forward_tokens, seconds,
                                      self.ctx.world_size, peaks, self.peak_tflops)

    def _train_step(self, samples: List[dict], cfg: StepConfig) -> dict:
        with packed_attention.sdpa_preference(self.policy.device, self.attention_backend):
            out = super()._train_step(samples, cfg)
        if self.state_every > 0 and self.steps % self.state_every == 0:
            t0 = time.perf_counter()
            trainer_state.save(self)
            out["metrics"]["state_save_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
        return out

    # --- weights out ---------------------------------------------------------------
    def publish(self, timings: Optional[dict] = None) -> str:
        return publishing.publish_sharded(self, timings)

    def publish_gathered(self, timings: Optional[dict] = None) -> str:
        return publishing.publish_gathered(self, timings)

    def ensure_published(self) -> str:
        return publishing.ensure_published(self.published_path(), self.publish, self.ctx.cmd_group)

    def _log(self, row: dict) -> None:
        if self.ctx.is_main:
            super()._log(row)
