"""One RL update: given advantages (floe computes them), token-level importance ratios,
an asymmetric clipped surrogate (or truncated IS), AdamW, publish.

A training sample is one rollout, one masked sequence:
``{rollout_id, group_id, reward, advantage, ids: [T], loss_mask: [T] 0/1,
behaviour_logprobs: [T] (ignored where the mask is 0), token_versions: [T] (-1 where
the mask is 0)}``: the prompt, every generated turn and the tool outputs between
them, with the loss on the generated (masked) tokens only. Old rows
``{prompt_ids, completion_ids, behaviour_logprobs}`` are converted (ids = prompt +
completion, mask 0...0 1...1). See ``normalize_samples``.

Kept free of HTTP so tests and the SFT script can call it directly.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import torch

from . import checkpoint as ckpt
from . import step_metrics
from .policy import Policy

RATIO_MODES = ("clip", "truncate")
LOSS_AGGS = ("token-mean", "seq-mean-token-mean")


@dataclass
class StepConfig:
    lr: Optional[float] = None
    clip_low: float = 0.2
    clip_high: float = 0.28
    ratio_mode: str = "clip"          # 'clip' (PPO-style, asymmetric) | 'truncate' (truncated IS weight)
    truncate_cap: float = 2.0
    advantage: str = "given"          # the only estimator here: each sample carries its advantage (floe's core/advantages.ts)
    loss_agg: str = "token-mean"
    epochs: int = 1                   # passes over the batch
    minibatches: int = 1              # optimizer steps per pass (whole groups per minibatch)
    grad_clip: float = 1.0
    micro_batch_tokens: int = 16384

    @classmethod
    def from_dict(cls, d: Optional[dict]) -> "StepConfig":
        d = dict(d or {})
        mode = d.pop("mode", None)
        if mode is not None:
            d.setdefault("ratio_mode", mode)
        known = set(cls.__dataclass_fields__)
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"unknown train_step config field(s) {bad}; known: {sorted(known)}")
        c = cls(**d)
        if c.ratio_mode not in RATIO_MODES:
            raise ValueError(f"config.ratio_mode must be one of {RATIO_MODES}")
        if c.advantage != "given":
            raise ValueError(f"config.advantage {c.advantage!r}: the trainer takes advantages as given (each sample's "
                             "'advantage'); floe computes them in core/advantages.ts (trainer.advantage in the run config)")
        if c.loss_agg not in LOSS_AGGS:
            raise ValueError(f"config.loss_agg must be one of {LOSS_AGGS}")
        if c.epochs < 1 or c.minibatches < 1:
            raise ValueError("config.epochs and config.minibatches must be >= 1")
        if c.clip_low < 0 or c.clip_high < 0:
            raise ValueError("config.clip_low/clip_high must be >= 0")
        return c


def load_samples(batch_path: str) -> List[dict]:
    with open(batch_path) as f:
        text = f.read()
    if batch_path.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    return data["samples"] if isinstance(data, dict) else data


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_ids(i: int, field: str, ids, vocab: int) -> None:
    if not isinstance(ids, list):
        raise ValueError(f"sample {i}: {field} must be a list of token ids")
    for j, t in enumerate(ids):
        if not _is_int(t) or t < 0 or t >= vocab:
            raise ValueError(f"sample {i}: {field}[{j}] = {t!r} is outside the model's vocabulary [0, {vocab})")


def normalize_sample(i: int, s: dict, vocab: int, context: Optional[int] = None) -> dict:
    """Validate sample ``i`` and return it as one masked sequence: a copy of ``s`` with ``ids``,
    ``loss_mask`` and (None when absent) ``behaviour_logprobs`` / ``token_versions`` over all T
    positions, plus ``_p0`` (first masked index), ``_masked`` (mask positions), ``_blp`` (behaviour
    logprobs at them or None) and ``_ver`` (their versions or None). Errors name the sample and field."""
    if not isinstance(s, dict):
        raise ValueError(f"sample {i} must be an object")
    if "ids" in s or "loss_mask" in s:
        ids, mask = s.get("ids"), s.get("loss_mask")
        _check_ids(i, "ids", ids, vocab)
        if not isinstance(mask, list):
            raise ValueError(f"sample {i}: loss_mask must be a list of 0/1, one per id")
        if len(mask) != len(ids):
            raise ValueError(f"sample {i}: loss_mask has {len(mask)} entries for {len(ids)} ids")
        for j, m in enumerate(mask):
            if m not in (0, 1) or not isinstance(m, (int, bool)):
                raise ValueError(f"sample {i}: loss_mask[{j}] = {m!r} is not 0 or 1")
        mask = [int(m) for m in mask]
        b, v = s.get("behaviour_logprobs"), s.get("token_versions")
        for field, arr in (("behaviour_logprobs", b), ("token_versions", v)):
            if arr is not None and (not isinstance(arr, list) or len(arr) != len(ids)):
                n = len(arr) if isinstance(arr, list) else type(arr).__name__
                raise ValueError(f"sample {i}: {field} has {n} entries for {len(ids)} ids (one per id; "
                                 f"the entries where loss_mask is 0 are ignored)")
    elif "prompt_ids" in s or "completion_ids" in s:  # old row: one turn, the prompt repeated
        p, c = s.get("prompt_ids"), s.get("completion_ids")
        _check_ids(i, "prompt_ids", p, vocab)
        _check_ids(i, "completion_ids", c, vocab)
        if not p:
            raise ValueError(f"sample {i}: prompt_ids is empty")
        b, v = s.get("behaviour_logprobs"), s.get("token_versions")
        for field, arr in (("behaviour_logprobs", b), ("token_versions", v)):
            if arr is not None and (not isinstance(arr, list) or len(arr) != len(c)):
                n = len(arr) if isinstance(arr, list) else type(arr).__name__
                raise ValueError(f"sample {i}: {field} has {n} entries for {len(c)} completion tokens")
        ids, mask = list(p) + list(c), [0] * len(p) + [1] * len(c)
        b = None if b is None else [0.0] * len(p) + list(b)
        v = None if v is None else [-1] * len(p) + list(v)
    else:
        raise ValueError(f"sample {i}: give ids + loss_mask (one rollout) or prompt_ids + completion_ids")
    masked = [j for j, m in enumerate(mask) if m]
    if not masked:
        raise ValueError(f"sample {i}: loss_mask has no 1 (no token to train on)")
    p0 = masked[0]
    if p0 == 0:
        raise ValueError(f"sample {i}: loss_mask[0] is 1, but nothing precedes the first token to predict it "
                         "(the first masked index must be >= 1)")
    if context is not None and len(ids) - 1 > context:
        raise ValueError(f"sample {i}: ids has {len(ids)} tokens, longer than the model context {context} "
                         f"(at most {context + 1}: the last token is only predicted)")
    blp = ver = None
    if b is not None:
        blp = [b[j] for j in masked]
        for j, x in zip(masked, blp):
            if not _is_num(x):
                raise ValueError(f"sample {i}: behaviour_logprobs[{j}] = {x!r} is not a finite number "
                                 "(loss_mask is 1 there)")
        blp = [float(x) for x in blp]
    if v is not None:
        ver = [v[j] for j in masked]
        for j, x in zip(masked, ver):
            if not _is_int(x):
                raise ValueError(f"sample {i}: token_versions[{j}] = {x!r} is not an integer (loss_mask is 1 there)")
    out = dict(s)
    out.update(ids=list(ids), loss_mask=mask, behaviour_logprobs=b, token_versions=v,
               _p0=p0, _masked=masked, _blp=blp, _ver=ver)
    return out


def normalize_samples(samples: Sequence[dict], vocab: int, context: Optional[int] = None) -> List[dict]:
    if not isinstance(samples, (list, tuple)) or not samples:
        raise ValueError("the batch has no samples")
    return [normalize_sample(i, s, vocab, context) for i, s in enumerate(samples)]


def validate_samples(samples: Sequence[dict], vocab: int, context: Optional[int] = None) -> None:
    normalize_samples(samples, vocab, context)


def advantages(samples: Sequence[dict], cfg: StepConfig) -> List[float]:
    """Each sample's given advantage. The estimator (group-relative, success-only, the scale of
    negatives) is one rule with one owner, floe's core/advantages.ts: the trainer never computes it."""
    out = []
    for i, s in enumerate(samples):
        if s.get("advantage") is None:
            raise ValueError(f"sample {i} has no advantage: the trainer takes advantages as given "
                             "(floe computes them in core/advantages.ts); send each sample's 'advantage'")
        out.append(float(s["advantage"]))
    return out


def torch_optimizer(params, lr: float, betas=(0.9, 0.99), weight_decay: float = 0.0, eps: float = 1e-8,
                    kind: str = "adamw") -> torch.optim.Optimizer:
    """AdamW, or plain SGD with momentum ``betas[0]`` (steps scale with the gradient itself)."""
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, eps=eps)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=betas[0], weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {kind!r}; use adamw or sgd")


class MasterWeightsOptimizer:
    """AdamW (or SGD with momentum) over fp32 master copies of a module whose own weights may be bf16.

    The module keeps the engine's dtype, so the trainer's forward uses exactly
    the weights (and the arithmetic precision) the engines sample with; that
    is what keeps engine and trainer log-probs matched. Gradients are copied
    into the fp32 masters, clipped and applied there, and the module's weights
    are refreshed from the masters after each step. With an fp32 module this
    is plain AdamW.
    """

    def __init__(self, params, lr: float, betas=(0.9, 0.99), weight_decay: float = 0.0, eps: float = 1e-8,
                 kind: str = "adamw"):
        self.params = [p for p in params if p.requires_grad]
        self.mixed = any(p.dtype != torch.float32 for p in self.params)
        self.master = ([p.detach().float().clone() for p in self.params] if self.mixed else self.params)
        self.opt = torch_optimizer(self.master, lr=lr, betas=betas, weight_decay=weight_decay, eps=eps, kind=kind)
        self.param_groups = self.opt.param_groups

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
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


class Trainer:
    def __init__(self, policy: Policy, version: int, publish_dir: str, lr: float = 1e-4,
                 weight_decay: float = 0.0, betas=(0.9, 0.99), publish_dtype: Optional[torch.dtype] = None,
                 optimizer: str = "adamw", eps: float = 1e-8, peak_tflops: Optional[float] = None):
        self.policy = policy
        self.version = version
        self.publish_dir = publish_dir
        self.lr = lr
        self.publish_dtype = publish_dtype
        self.peak_tflops = peak_tflops  # for MFU on a device step_metrics' table lacks
        self.opt = self._make_optimizer(lr=lr, betas=betas, weight_decay=weight_decay, eps=eps, kind=optimizer)
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
        path = self.published_path()
        if not os.path.exists(path):
            path = self.publish()
        return path

    def logprobs(self, pairs) -> List[List[float]]:
        from .logprobs import batch_logprobs
        with self.lock:
            return batch_logprobs(self.policy, pairs)

    def score(self, samples: Sequence[dict]) -> List[List[float]]:
        """``/logprobs``: {prompt_ids, completion_ids} or {ids, loss_mask} samples."""
        from .logprobs import score_samples
        with self.lock:
            return score_samples(self.policy, samples)

    def _micro_batches(self, samples: Sequence[dict], budget: int) -> List[List[int]]:
        """Gradient-accumulation chunks of (normalized) samples, ~``budget`` tokens each. Samples
        with the same first prompt (ids before the first masked token) stay together, so the
        tiny model runs that prompt once for all of them."""
        def prefix(s):
            return tuple(s["ids"][: s["_p0"]])
        order = sorted(range(len(samples)), key=lambda i: prefix(samples[i]))
        batches, cur, n = [], [], 0
        for i in order:
            t = len(samples[i]["ids"])
            if cur and n + t > budget and prefix(samples[i]) != prefix(samples[cur[-1]]):
                batches.append(cur)
                cur, n = [], 0
            cur.append(i)
            n += t
        if cur:
            batches.append(cur)
        return batches

    def train_step(self, samples: Sequence[dict], config: Optional[dict] = None) -> dict:
        cfg = StepConfig.from_dict(config)
        rows = normalize_samples(samples, self.policy.vocab_size, self.policy.context)
        with self.lock:
            return self._train_step(rows, cfg)

    def _minibatches(self, samples: Sequence[dict], n: int) -> List[List[int]]:
        """Split the batch into ``n`` optimizer steps, whole groups kept together, in batch order."""
        groups: Dict[object, List[int]] = {}
        for i, s in enumerate(samples):
            groups.setdefault(s.get("group_id", i), []).append(i)
        parts: List[List[int]] = [[] for _ in range(max(1, min(n, len(groups))))]
        for k, idxs in enumerate(groups.values()):
            parts[k % len(parts)].extend(idxs)
        return parts

    def _backward(self, samples: List[dict], idxs: List[int], adv: List[float], cfg: StepConfig,
                  acc: Optional[dict], measure: bool) -> None:
        """Accumulate the gradient of the surrogate loss over the masked tokens of ``samples[idxs]``;
        metrics into ``acc`` (mismatch only when ``measure``: the weights have not moved yet in
        this train step)."""
        pol = self.policy
        n_tokens = sum(len(samples[i]["_masked"]) for i in idxs)
        seq_count = len(idxs)
        if n_tokens == 0:
            return
        for mb in self._micro_batches([samples[i] for i in idxs], cfg.micro_batch_tokens):
            mb = [idxs[j] for j in mb]
            res = pol.masked_logprobs([(samples[i]["ids"], samples[i]["loss_mask"]) for i in mb],
                                      grad=True, entropy=acc is not None)
            loss = None
            for i, (lp, ent) in zip(mb, res):
                part = self._sample_loss(samples[i], lp, ent, adv[i], cfg, n_tokens, seq_count, acc, measure)
                if part is not None:
                    loss = part if loss is None else loss + part
            if loss is not None:
                loss.backward()

    def _sample_loss(self, s: dict, lp: torch.Tensor, ent: Optional[torch.Tensor], a: float, cfg: StepConfig,
                     n_tokens: int, seq_count: int, acc: Optional[dict], measure: bool) -> Optional[torch.Tensor]:
        """One sample's share of the surrogate loss (None when it has no scored token): its token
        losses over the masked tokens of the whole (mini)batch (``n_tokens`` masked tokens,
        ``seq_count`` samples), so the shares of any split of the batch sum to the same loss.
        Metrics into ``acc`` (mismatch only when ``measure``)."""
        if lp.numel() == 0:
            return None
        b = s["_blp"]
        blp = lp.detach() if b is None else torch.tensor(b, dtype=lp.dtype, device=lp.device)
        log_ratio = lp - blp
        ratio = log_ratio.exp()
        if cfg.ratio_mode == "clip":
            surr1 = ratio * a
            surr2 = ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * a
            tok_loss = -torch.minimum(surr1, surr2)
            clipped = (surr2 < surr1).float()
        else:
            w = ratio.detach().clamp(max=cfg.truncate_cap)
            tok_loss = -w * a * lp
            clipped = (ratio.detach() > cfg.truncate_cap).float()
        if cfg.loss_agg == "token-mean":
            part = tok_loss.sum() / n_tokens
        else:  # seq-mean-token-mean
            part = tok_loss.mean() / seq_count
        if acc is not None:
            with torch.no_grad():
                acc["loss"] += float(part.detach())
                acc["ent"] += float(ent.sum())
                acc["clipped"] += float(clipped.sum())
                acc["ratio_max"] = max(acc["ratio_max"], float(ratio.detach().max()))
                if measure:
                    d = log_ratio.detach()
                    acc["abs"] += float(d.abs().sum())
                    # k3 estimator of KL(behaviour || trainer) from behaviour samples: r - 1 - log r
                    acc["k3"] += float((d.exp() - 1 - d).sum())
                    acc["measured"] += lp.numel()
                    # numerics alone: tokens generated by the version the trainer holds;
                    # older tokens add the off-policy gap, reported apart
                    ver = s["_ver"]
                    if ver is not None and b is not None and len(ver) == lp.numel():
                        cur = torch.tensor([v == self.version for v in ver], device=lp.device)
                        for key, sel in (("cur", cur), ("old", ~cur)):
                            acc[f"abs_{key}"] += float(d[sel].abs().sum())
                            acc[f"n_{key}"] += int(sel.sum())
        return part

    def _reduce_metrics(self, acc: dict) -> None:
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
        adv = advantages(samples, cfg)
        n_tokens = sum(len(s["_masked"]) for s in samples)
        if n_tokens == 0:
            raise ValueError("the batch has no masked (trained) tokens")
        stale = [self.version - v for s in samples for v in (s["_ver"] or []) if v >= 0]
        lr = cfg.lr if cfg.lr is not None else self.lr
        for g in self.opt.param_groups:
            g["lr"] = lr
        acc = {"loss": 0.0, "abs": 0.0, "k3": 0.0, "ent": 0.0, "clipped": 0.0, "ratio_max": 0.0, "measured": 0,
               "abs_cur": 0.0, "n_cur": 0, "abs_old": 0.0, "n_old": 0}
        parts = self._minibatches(samples, cfg.minibatches)
        norms: List[float] = []
        for epoch in range(cfg.epochs):
            for k, idxs in enumerate(parts):
                self.opt.zero_grad()
                self._backward(samples, idxs, adv, cfg, acc if epoch == 0 else None, measure=(epoch == 0 and k == 0))
                norms.append(self.opt.clip_and_step(cfg.grad_clip))
        self._reduce_metrics(acc)
        acc["loss"] /= len(parts)
        grad_norm = norms[0]
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
        rewards = [float(s.get("reward", 0.0)) for s in samples]
        metrics = {
            "loss": acc["loss"], "grad_norm": grad_norm, "entropy": acc["ent"] / n_tokens,
            "clip_fraction": acc["clipped"] / n_tokens,
            "mismatch_mean_abs_logprob": acc["abs"] / max(1, acc["measured"]),
            "mismatch_kl": acc["k3"] / max(1, acc["measured"]), "optimizer_steps": len(norms),
            # engine-vs-trainer numerics on tokens of the trainer's own version (-1: none measured),
            # and the off-policy gap of older tokens, apart
            "mismatch_current_mean_abs_logprob": acc["abs_cur"] / acc["n_cur"] if acc["n_cur"] else -1.0,
            "mismatch_current_tokens": acc["n_cur"],
            "offpolicy_mean_abs_logprob": acc["abs_old"] / acc["n_old"] if acc["n_old"] else -1.0,
            "offpolicy_tokens": acc["n_old"],
            "grad_norm_max": max(norms),
            "ratio_max": acc["ratio_max"], "reward_mean": sum(rewards) / len(rewards),
            "advantage_mean": sum(adv) / len(adv), "advantage_abs_mean": sum(abs(a) for a in adv) / len(adv),
            "tokens": n_tokens, "masked_tokens": n_tokens,
            "sequence_tokens": sum(len(s["ids"]) for s in samples),
            # trainer version before this step minus each masked token's weight version (tokens with
            # a version only; None when the batch carries none)
            "staleness_mean": (sum(stale) / len(stale)) if stale else None,
            "staleness_max": max(stale) if stale else None,
            "version_before": version_before,
            "samples": len(samples), "lr": lr, "skipped_step": not all(math.isfinite(x) for x in norms),
            "train_ms": round(train_ms, 2), "publish_ms": round(publish_ms, 2), "publish_breakdown": pub_timings,
            **perf,
        }
        self.last_metrics = metrics
        self._log({"version": self.version, "path": path, **metrics})
        return {"version": self.version, "path": path, "metrics": metrics}

    def _log(self, row: dict) -> None:
        try:
            os.makedirs(self.publish_dir, exist_ok=True)
            with open(os.path.join(self.publish_dir, "train_steps.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
        except OSError:
            pass
