"""The RL surrogate loss, computed here for both trainers (``trainer.Trainer`` in one process,
``fsdp_trainer.FSDPTrainer`` over ranks): token-level importance ratios against the behaviour
log-probs, the asymmetric clipped surrogate or the truncated-IS weight, the aggregation of token
losses over a (mini)batch, and the sums the step's metrics are made of.

Each sample's share is normalised by the counts of the whole (mini)batch it belongs to (masked
tokens for token-mean, samples for seq-mean-token-mean), so the shares of any split of the batch
(micro-batches, ranks) add up to the same loss and gradient.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch


@dataclass
class LossSums:
    """What a step's metrics are made of, summed over its masked tokens (``ratio_max``: the
    largest ratio). ``loss`` sums the shares of every optimizer step of the first epoch."""
    loss: float = 0.0
    ent: float = 0.0
    clipped: float = 0.0
    ratio_max: float = 0.0
    # engine-vs-trainer mismatch before the step's first update (``measure``)
    abs: float = 0.0       # |trainer - behaviour| log-prob
    k3: float = 0.0        # r - 1 - log r
    measured: int = 0
    abs_cur: float = 0.0   # tokens of the trainer's own version: numerics alone
    n_cur: int = 0
    abs_old: float = 0.0   # older tokens: numerics plus the off-policy gap
    n_old: int = 0


def surrogate(lp: torch.Tensor, blp: torch.Tensor, advantage: float, cfg
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token loss, ratio r = exp(lp - blp) and whether the token is clipped (1.0 / 0.0).
    'clip': -min(r·A, clip(r, 1 - clip_low, 1 + clip_high)·A); 'truncate': -min(r, cap)·A·lp,
    the weight carrying no gradient."""
    ratio = (lp - blp).exp()
    if cfg.ratio_mode == "clip":
        surr1 = ratio * advantage
        surr2 = ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * advantage
        return -torch.minimum(surr1, surr2), ratio, (surr2 < surr1).float()
    w = ratio.detach().clamp(max=cfg.truncate_cap)
    return -w * advantage * lp, ratio, (ratio.detach() > cfg.truncate_cap).float()


def aggregate(tok_loss: torch.Tensor, cfg, n_tokens: int, seq_count: int) -> torch.Tensor:
    """One sample's share of the (mini)batch loss: 'token-mean' sums its token losses over the
    batch's ``n_tokens`` masked tokens; 'seq-mean-token-mean' averages them over the sample, then
    over the batch's ``seq_count`` samples."""
    if cfg.loss_agg == "token-mean":
        return tok_loss.sum() / n_tokens
    return tok_loss.mean() / seq_count


def sample_loss(sample: dict, lp: torch.Tensor, ent: Optional[torch.Tensor], advantage: float, cfg,
                n_tokens: int, seq_count: int, version: int, sums: Optional[LossSums], measure: bool
                ) -> torch.Tensor:
    """The share of a normalized sample (``trainer.normalize_sample``) in the loss of a (mini)batch
    of ``n_tokens`` masked tokens in ``seq_count`` samples, from its trainer log-probs ``lp`` at
    the masked positions. Adds its metrics to ``sums`` (when given); the mismatch only when
    ``measure`` (the weights have not moved yet in this step), apart for tokens of ``version``
    (the trainer's) and older ones."""
    blp = torch.tensor(sample["_blp"], dtype=lp.dtype, device=lp.device)
    tok_loss, ratio, clipped = surrogate(lp, blp, advantage, cfg)
    part = aggregate(tok_loss, cfg, n_tokens, seq_count)
    if sums is not None:
        with torch.no_grad():
            sums.loss += float(part.detach())
            sums.ent += float(ent.sum())
            sums.clipped += float(clipped.sum())
            sums.ratio_max = max(sums.ratio_max, float(ratio.detach().max()))
            if measure:
                d = (lp - blp).detach()
                sums.abs += float(d.abs().sum())
                # k3 estimator of KL(behaviour || trainer) from behaviour samples: r - 1 - log r
                sums.k3 += float((d.exp() - 1 - d).sum())
                sums.measured += lp.numel()
                cur = torch.tensor([v == version for v in sample["_ver"]], device=lp.device)
                sums.abs_cur += float(d[cur].abs().sum())
                sums.n_cur += int(cur.sum())
                sums.abs_old += float(d[~cur].abs().sum())
                sums.n_old += int((~cur).sum())
    return part
