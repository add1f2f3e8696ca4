"""One RL update in one process: the step's settings (``StepConfig``), the batch's samples
(``normalize_sample``), the gradient of the surrogate loss (``loss``) over micro-batches, the
optimizer steps, and the weights published as the next version.

A training sample is one rollout, one masked sequence (its fields: ``contract.SAMPLE``):
``{rollout_id, group_id, reward, advantage, ids: [T], loss_mask: [T] 0/1, behaviour_logprobs: [T]
(read where the mask is 1), token_versions: [T] (-1 where the mask is 0)}``: the prompt, every
generated turn and the tool outputs between them, with the loss on the generated (masked)
tokens only. The advantage comes with the sample: floe computes it (core/advantages.ts).

``fsdp_trainer.FSDPTrainer`` runs the same step over the ranks of a sharded job: it changes how
micro-batches are made and scored, not the step. Kept free of HTTP so tests and benchmarks can
call it directly.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import asdict, dataclass, fields
from typing import Dict, List, Optional, Sequence

import torch

from . import checkpoint as ckpt
from . import publish as publishing
from . import step_metrics
from .contract import SAMPLE, STEP_CONFIG, fits, words
from .loss import LossSums, sample_loss
from .optimizers import MasterWeightsOptimizer
from .policy import Policy
from .scoring import Scored, batch_logprobs, check_ids, score_samples

CONFIG_SOURCE = "the run config's `trainer` section (docs/configuration.md)"


@dataclass
class StepConfig:
    """One train step's settings. Every field is required (``contract.STEP_CONFIG``): floe sends
    them from the run config, whose defaults live in one place (TypeScript core/config.ts)."""
    lr: float
    weight_decay: float
    clip_low: float
    clip_high: float
    ratio_mode: str                   # contract.RATIO_MODES
    truncate_cap: float
    loss_agg: str                     # contract.LOSS_AGGS
    epochs: int
    minibatches: int
    grad_clip: float
    micro_batch_tokens: int

    @classmethod
    def from_dict(cls, d) -> "StepConfig":
        if not isinstance(d, dict):
            raise ValueError(f"train_step needs a config object with the fields {list(STEP_CONFIG)}, all required: "
                             f"floe sends them from {CONFIG_SOURCE}")
        missing = [k for k in STEP_CONFIG if k not in d]
        unknown = sorted(set(d) - set(STEP_CONFIG))
        if missing or unknown:
            what = "; ".join(([f"missing field(s) {missing}"] if missing else [])
                             + ([f"unknown field(s) {unknown}"] if unknown else []))
            raise ValueError(f"train_step config: {what}. A step's config has exactly the fields {list(STEP_CONFIG)}, "
                             f"all required: floe sends them from {CONFIG_SOURCE}")
        bad = [f"{k} = {d[k]!r} is not {words(kind)}"
               for k, kind in STEP_CONFIG.items() if not fits(kind, d[k])]
        if bad:
            raise ValueError(f"train_step config: {'; '.join(bad)}")
        c = cls(**{k: float(d[k]) if STEP_CONFIG[k] == "number" else d[k] for k in STEP_CONFIG})
        out_of_range = [text for ok, text in (
            (c.lr >= 0 and c.weight_decay >= 0, "lr and weight_decay must be >= 0"),
            (c.clip_low >= 0 and c.clip_high >= 0, "clip_low and clip_high must be >= 0"),
            (c.truncate_cap > 0 and c.grad_clip > 0, "truncate_cap and grad_clip must be > 0"),
            (c.epochs >= 1 and c.minibatches >= 1 and c.micro_batch_tokens >= 1,
             "epochs, minibatches and micro_batch_tokens must be >= 1"),
        ) if not ok]
        if out_of_range:
            raise ValueError(f"train_step config: {'; '.join(out_of_range)}")
        return c


def _check_step_config_fields() -> None:
    """StepConfig's dataclass fields must be the contract's, in order and with its types, so the
    contract floe's TypeScript side is tested against is what ``from_dict`` builds."""
    py = {"number": "float", "int": "int"}
    want = [(k, "str" if isinstance(kind, tuple) else py[kind]) for k, kind in STEP_CONFIG.items()]
    got = [(f.name, f.type if isinstance(f.type, str) else f.type.__name__) for f in fields(StepConfig)]
    if got != want:
        raise TypeError(f"trainer.StepConfig's fields {got} differ from contract.STEP_CONFIG {want}")


_check_step_config_fields()


def load_samples(batch_path: str) -> List[dict]:
    with open(batch_path) as f:
        text = f.read()
    if batch_path.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data["samples"] if isinstance(data, dict) else data


def check_sequence(where: str, ids, mask, vocab: int, context: Optional[int] = None) -> List[int]:
    """Validate one masked sequence (a sample's, or a row of the SFT data): ids in the vocabulary,
    one 0/1 mask entry per id, at least one masked token, none at position 0 (nothing predicts
    it), at most context + 1 ids. Returns the masked positions; errors start with ``where``."""
    check_ids(f"{where}: ids", ids, vocab)
    if not isinstance(mask, list):
        raise ValueError(f"{where}: loss_mask must be a list of 0/1, one per id")
    if len(mask) != len(ids):
        raise ValueError(f"{where}: loss_mask has {len(mask)} entries for {len(ids)} ids")
    for j, m in enumerate(mask):
        if m not in (0, 1) or not isinstance(m, (int, bool)):
            raise ValueError(f"{where}: loss_mask[{j}] = {m!r} is not 0 or 1")
    masked = [j for j, m in enumerate(mask) if m]
    if not masked:
        raise ValueError(f"{where}: loss_mask has no 1 (no token to train on)")
    if masked[0] == 0:
        raise ValueError(f"{where}: loss_mask[0] is 1, but nothing precedes the first token to predict it "
                         "(the first masked index must be >= 1)")
    if context is not None and len(ids) - 1 > context:
        raise ValueError(f"{where}: ids has {len(ids)} tokens, longer than the model context {context} "
                         f"(at most {context + 1}: the last token is only predicted)")
    return masked


def normalize_sample(i: int, s: dict, vocab: int, context: Optional[int] = None) -> dict:
    """Validate sample ``i`` against ``contract.SAMPLE`` (every field required) and return a copy
    with ``loss_mask`` as ints plus ``_p0`` (first masked index), ``_masked`` (the masked
    positions), ``_blp`` (the behaviour log-probs there) and ``_ver`` (their weight versions).
    The per-token arrays have one entry per id; behaviour_logprobs and token_versions are read
    only where the mask is 1. Errors name the sample and the field."""
    where = f"sample {i}"
    if not isinstance(s, dict):
        raise ValueError(f"{where} must be an object")
    if "prompt_ids" in s or "completion_ids" in s:
        raise ValueError(f"{where}: prompt_ids/completion_ids rows are not read: a sample is one rollout, "
                         f"{{{', '.join(SAMPLE)}}} (ids = the whole sequence, loss_mask 1 on the generated tokens)")
    missing = [k for k in SAMPLE if s.get(k) is None]
    if missing:
        raise ValueError(f"{where}: missing {missing}; a sample has the fields {list(SAMPLE)}, all required")
    ids, mask = s["ids"], s["loss_mask"]
    masked = check_sequence(where, ids, mask, vocab, context)
    for k, kind in SAMPLE.items():
        v = s[k]
        if k in ("ids", "loss_mask"):  # check_sequence's
            continue
        if not (isinstance(kind, str) and kind.endswith("[]")):
            if not fits(kind, v):
                raise ValueError(f"{where}: {k} = {v!r} is not {words(kind)}")
            continue
        if not isinstance(v, list) or len(v) != len(ids):
            n = len(v) if isinstance(v, list) else type(v).__name__
            raise ValueError(f"{where}: {k} has {n} entries for {len(ids)} ids (one per id; "
                             f"the entries where loss_mask is 0 are ignored)")
        for j in masked:  # a per-token entry counts where the token is trained on
            if not fits(kind[:-2], v[j]):
                raise ValueError(f"{where}: {k}[{j}] = {v[j]!r} is not {words(kind[:-2])} (loss_mask is 1 there)")
    out = dict(s)
    out.update(loss_mask=[int(m) for m in mask], _p0=masked[0], _masked=masked,
               _blp=[float(s["behaviour_logprobs"][j]) for j in masked],
               _ver=[s["token_versions"][j] for j in masked])
    return out


def normalize_samples(samples: Sequence[dict], vocab: int, context: Optional[int] = None) -> List[dict]:
    if not isinstance(samples, (list, tuple)) or not samples:
        raise ValueError("the batch has no samples")
    return [normalize_sample(i, s, vocab, context) for i, s in enumerate(samples)]


class Trainer:
    """The one-process trainer. Its optimizer has no learning rate or weight decay of its own:
    each step sets both on every param group from its ``StepConfig``."""

    def __init__(self, policy: Policy, version: int, publish_dir: str, betas=(0.9, 0.99),
                 publish_dtype: Optional[torch.dtype] = None, optimizer: str = "adamw", eps: float = 1e-8,
                 peak_tflops: Optional[float] = None):
        self.policy = policy
        self.version = version
        self.publish_dir = publish_dir
        self.publish_dtype = publish_dtype
        self.peak_tflops = peak_tflops  # for MFU on a device step_metrics' table lacks
        self.opt = self._make_optimizer(kind=optimizer, betas=betas, eps=eps)
        self.lock = threading.Lock()
        self.steps = 0
        self.last_metrics: dict = {}

    def _make_optimizer(self, **kw):
        """The optimizer over the policy's parameters (``zero_grad``, ``clip_and_step``, ``param_groups``)."""
        return MasterWeightsOptimizer(self.policy.module.parameters(), **kw)

    def published_path(self, version: Optional[int] = None) -> str:
        """The version's model.safetensors, or its folder when the weights are sharded."""
        return ckpt.published_path(ckpt.version_dir(self.publish_dir, self.version if version is None else version))

    def publish(self, timings: Optional[dict] = None) -> str:
        # hf: policies publish a Hugging Face model folder (vLLM / SGLang load it as is)
        return ckpt.publish_policy(self.policy, self.publish_dir, self.version, dtype=self.publish_dtype,
                                   timings=timings)

    def ensure_published(self) -> str:
        return publishing.ensure_published(self.published_path(), self.publish)

    def logprobs(self, pairs) -> List[List[float]]:
        with self.lock:
            return batch_logprobs(self.policy, pairs)

    def score(self, samples: Sequence[dict]) -> List[List[float]]:
        """``/logprobs``: {prompt_ids, completion_ids} or {ids, loss_mask} samples."""
        with self.lock:
            return score_samples(self.policy, samples)

    def train_step(self, samples: Sequence[dict], config: dict) -> dict:
        cfg = StepConfig.from_dict(config)
        rows = normalize_samples(samples, self.policy.vocab_size, self.policy.context)
        with self.lock:
            return self._train_step(rows, cfg)

    def _minibatches(self, samples: Sequence[dict], n: int) -> List[List[int]]:
        """Split the batch into ``n`` optimizer steps, whole groups kept together, in batch order."""
        groups: Dict[object, List[int]] = {}
        for i, s in enumerate(samples):
            groups.setdefault(s["group_id"], []).append(i)
        parts: List[List[int]] = [[] for _ in range(max(1, min(n, len(groups))))]
        for k, idxs in enumerate(groups.values()):
            parts[k % len(parts)].extend(idxs)
        return parts

    def _micro_batches(self, samples: Sequence[dict], idxs: Sequence[int], budget: int) -> List[List[int]]:
        """Gradient-accumulation chunks of ``idxs``, ~``budget`` tokens each. Samples with the same
        first prompt (ids before the first masked token) stay together, so the tiny model runs
        that prompt once for all of them."""
        def prefix(i):
            return tuple(samples[i]["ids"][: samples[i]["_p0"]])
        batches, cur, n = [], [], 0
        for i in sorted(idxs, key=prefix):
            t = len(samples[i]["ids"])
            if cur and n + t > budget and prefix(i) != prefix(cur[-1]):
                batches.append(cur)
                cur, n = [], 0
            cur.append(i)
            n += t
        if cur:
            batches.append(cur)
        return batches

    def _forward(self, samples: Sequence[dict], mb: List[int], entropy: bool) -> Scored:
        """Trainer log-probs (with gradients) at the masked positions of micro-batch ``mb``."""
        return self.policy.masked_logprobs([(samples[i]["ids"], samples[i]["loss_mask"]) for i in mb],
                                           grad=True, entropy=entropy)

    # Rows whose advantage is 0 (with advantage 'reward', every failed attempt) have a loss of
    # exactly 0 and a gradient of exactly 0 in both ratio modes, so the one-process trainer runs
    # their backward never and their forward only for the first epoch's metrics (under no_grad).
    # The sharded trainer keeps every row: each rank must run the same forwards.
    skip_zero_advantage = True

    def _backward(self, samples: List[dict], idxs: List[int], adv: List[float], cfg: StepConfig,
                  sums: Optional[LossSums], measure: bool) -> None:
        """Accumulate the gradient of the loss of minibatch ``idxs``, micro-batch by micro-batch;
        metrics into ``sums`` (mismatch only when ``measure``: the weights have not moved yet in
        this train step)."""
        n_tokens = sum(len(samples[i]["_masked"]) for i in idxs)
        seq_count = len(idxs)
        if self.skip_zero_advantage:
            idle = [i for i in idxs if adv[i] == 0.0]
            if idle and sums is not None:
                with torch.no_grad():
                    for mb in self._micro_batches(samples, idle, cfg.micro_batch_tokens):
                        for i, (lp, ent) in zip(mb, self._forward(samples, mb, entropy=True)):
                            sample_loss(samples[i], lp, ent, adv[i], cfg, n_tokens, seq_count, self.version,
                                        sums, measure)
            live = [i for i in idxs if adv[i] != 0.0]
            if not live:  # a zero gradient, as the backward would have left: AdamW still steps on it
                for p in self.policy.module.parameters():
                    if p.requires_grad:
                        p.grad = torch.zeros_like(p)
                return
            idxs = live
        for mb in self._micro_batches(samples, idxs, cfg.micro_batch_tokens):
            res = self._forward(samples, mb, entropy=sums is not None)
            parts = [sample_loss(samples[i], lp, ent, adv[i], cfg, n_tokens, seq_count, self.version, sums, measure)
                     for i, (lp, ent) in zip(mb, res)]
            # a rank with no sample in this micro-batch still runs it (weight 0): its collectives line up
            (sum(parts) if parts else sum(lp.sum() for lp, _ in res) * 0.0).backward()

    def _reduce_metrics(self, sums: LossSums) -> None:
        """Combine the metric sums of all ranks (one process: nothing to do)."""

    def _perf_metrics(self, forward_tokens: int, seconds: float) -> dict:
        """tokens/s, peak memory, world size, MFU (CUDA) of the step (step_metrics)."""
        dev = self.policy.device
        return step_metrics.step_perf(dev, self.policy.num_parameters(), forward_tokens, seconds, 1,
                                      [step_metrics.peak_memory_bytes(dev)], self.peak_tflops)

    def _train_step(self, samples: List[dict], cfg: StepConfig) -> dict:
        """``samples``: rows from ``normalize_samples``."""
        t0 = time.perf_counter()
        pol = self.policy
        step_metrics.reset_peak_memory(pol.device)
        pol.module.eval()  # no dropout: the trainer must score exactly what the engine sampled
        adv = [float(s["advantage"]) for s in samples]
        n_tokens = sum(len(s["_masked"]) for s in samples)
        stale = [self.version - v for s in samples for v in s["_ver"] if v >= 0]
        for g in self.opt.param_groups:
            g["lr"] = cfg.lr
            g["weight_decay"] = cfg.weight_decay
        sums = LossSums()
        parts = self._minibatches(samples, cfg.minibatches)
        norms: List[float] = []
        for epoch in range(cfg.epochs):
            for k, idxs in enumerate(parts):
                self.opt.zero_grad()
                self._backward(samples, idxs, adv, cfg, sums if epoch == 0 else None, measure=(epoch == 0 and k == 0))
                norms.append(self.opt.clip_and_step(cfg.grad_clip))
        self._reduce_metrics(sums)
        sums.loss /= len(parts)
        if pol.device.type == "cuda":
            torch.cuda.synchronize()
        train_ms = (time.perf_counter() - t0) * 1e3
        forward_tokens = cfg.epochs * sum(len(s["ids"]) - 1 for s in samples)
        perf = self._perf_metrics(forward_tokens, train_ms / 1e3)
        version_before = self.version
        self.version += 1
        self.steps += 1
        t1 = time.perf_counter()
        pub_timings: dict = {}
        path = self.publish(pub_timings)
        publish_ms = (time.perf_counter() - t1) * 1e3
        rewards = [float(s["reward"]) for s in samples]
        metrics = {
            "loss": sums.loss, "grad_norm": norms[0], "entropy": sums.ent / n_tokens,
            "clip_fraction": sums.clipped / n_tokens,
            "mismatch_mean_abs_logprob": sums.abs / max(1, sums.measured),
            "mismatch_kl": sums.k3 / max(1, sums.measured), "optimizer_steps": len(norms),
            # engine-vs-trainer numerics on tokens of the trainer's own version (-1: none measured),
            # and the off-policy gap of older tokens, apart
            "mismatch_current_mean_abs_logprob": sums.abs_cur / sums.n_cur if sums.n_cur else -1.0,
            "mismatch_current_tokens": sums.n_cur,
            "offpolicy_mean_abs_logprob": sums.abs_old / sums.n_old if sums.n_old else -1.0,
            "offpolicy_tokens": sums.n_old,
            "grad_norm_max": max(norms),
            "ratio_max": sums.ratio_max, "reward_mean": sum(rewards) / len(rewards),
            "advantage_mean": sum(adv) / len(adv), "advantage_abs_mean": sum(abs(a) for a in adv) / len(adv),
            "tokens": n_tokens, "masked_tokens": n_tokens,
            "sequence_tokens": sum(len(s["ids"]) for s in samples),
            # trainer version before this step minus each masked token's weight version (tokens with
            # a version only; None when the batch carries none)
            "staleness_mean": (sum(stale) / len(stale)) if stale else None,
            "staleness_max": max(stale) if stale else None,
            "version_before": version_before,
            "samples": len(samples), "lr": cfg.lr, "skipped_step": not all(math.isfinite(x) for x in norms),
            "train_ms": round(train_ms, 2), "publish_ms": round(publish_ms, 2), "publish_breakdown": pub_timings,
            **perf,
        }
        self.last_metrics = metrics
        self._log({"version": self.version, "path": path, **metrics})
        # the settings the step ran with, as applied: a caller can check them against its run config
        return {"version": self.version, "path": path, "config": asdict(cfg), "metrics": metrics}

    def _log(self, row: dict) -> None:
        try:
            os.makedirs(self.publish_dir, exist_ok=True)
            with open(os.path.join(self.publish_dir, "train_steps.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
        except OSError:
            pass
