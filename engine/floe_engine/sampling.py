"""Token sampling with temperature and top-p, one random stream per sequence.

Each sequence draws its uniforms from its own ``random.Random(seed)``, and
the choice is made by inverse-CDF over the (tempered, nucleus-truncated)
distribution, vectorised over the batch. So a sequence's tokens depend only
on its seed and its logits, not on which other sequences share the batch.

The log-probability reported for a sampled token is always taken from the
raw policy distribution (temperature 1, no top-p): that is what the trainer
recomputes, so behaviour and trainer log-probs are comparable whatever
sampling settings a rollout used.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import torch


@dataclass
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop: List[str] = field(default_factory=list)
    stop_token_ids: List[int] = field(default_factory=list)
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    seed: Optional[int] = None

    def validate(self) -> None:
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ValueError("stop must be a list of non-empty strings")


def sample(logits: torch.Tensor, temperatures: Sequence[float], top_ps: Sequence[float],
           rngs: Sequence[random.Random]) -> Tuple[List[int], List[float]]:
    """logits [B, V] fp32 -> (token ids, logprob of each under the raw distribution)."""
    B, V = logits.shape
    raw_logp = torch.log_softmax(logits, dim=-1)
    temps = torch.tensor(temperatures, dtype=logits.dtype, device=logits.device)
    greedy = temps <= 0
    scaled = logits / torch.where(greedy, torch.ones_like(temps), temps)[:, None]
    probs = torch.softmax(scaled, dim=-1)
    u = torch.tensor([r.random() for r in rngs], dtype=torch.float64, device=logits.device)
    if all(p >= 1 for p in top_ps):
        # no nucleus: inverse-CDF over the vocabulary as it is (sorting a 150k-250k vocabulary
        # every step costs more than the rest of a CPU decode step)
        cdf = probs.cumsum(-1)
        u = (u * cdf[:, -1].double()).to(cdf.dtype)[:, None]
        tokens = torch.searchsorted(cdf, u, right=True).clamp_(max=V - 1).squeeze(-1)
        # float rounding at the top end must not pick a zero-probability tail token
        tokens = torch.where(probs.gather(-1, tokens[:, None]).squeeze(-1) > 0, tokens, probs.argmax(-1))
    else:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        cum = sorted_p.cumsum(-1)
        tp = torch.tensor(top_ps, dtype=logits.dtype, device=logits.device)[:, None]
        # keep the smallest prefix whose mass reaches top_p (always at least one token)
        keep = (cum - sorted_p) < tp
        sorted_p = sorted_p * keep
        cdf = sorted_p.cumsum(-1)
        u = (u * cdf[:, -1].double()).to(cdf.dtype)[:, None]
        pick = torch.searchsorted(cdf, u, right=True).clamp_(max=V - 1)
        # never land on a dropped (zero-mass) token through float rounding at the top end
        n_keep = keep.sum(-1, keepdim=True)
        pick = torch.minimum(pick, n_keep - 1)
        tokens = order.gather(-1, pick).squeeze(-1)
    tokens = torch.where(greedy, logits.argmax(-1), tokens)
    lps = raw_logp.gather(-1, tokens[:, None]).squeeze(-1)
    return tokens.tolist(), lps.tolist()
