"""The one log-probability function both servers use.

The engine's ``/logprobs`` and the trainer's ``/logprobs`` and ``/train_step``
all score completions through ``Policy.token_logprobs``, so a difference
between behaviour log-probs (reported by the engine while sampling, from its
cached decode) and trainer log-probs (a full-sequence forward) can only come
from the two computation paths, never from two implementations of scoring.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from .policy import Policy


def _policy(model) -> Policy:
    if isinstance(model, Policy):
        return model
    from .model import TinyGPT
    from .policy import TinyPolicy
    if isinstance(model, TinyGPT):  # a bare module: wrap it without copying weights
        p = TinyPolicy.__new__(TinyPolicy)
        Policy.__init__(p, model, next(model.parameters()).device, next(model.parameters()).dtype)
        p.cfg = model.cfg
        return p
    raise TypeError(f"logprobs needs a Policy or TinyGPT, not {type(model).__name__}")


def logprobs(model, prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> List[float]:
    """log p(completion_ids[t] | prompt_ids + completion_ids[:t]) for every t (temperature 1)."""
    return batch_logprobs(model, [(prompt_ids, completion_ids)])[0]


def batch_logprobs(model, pairs: Sequence[Tuple[Sequence[int], Sequence[int]]]) -> List[List[float]]:
    pol = _policy(model)
    return [lp.detach().float().cpu().tolist() for lp, _ in pol.token_logprobs(list(pairs), grad=False)]
