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
    from .tiny_policy import TinyPolicy
    if isinstance(model, TinyGPT):  # a bare module: wrap it without copying weights (byte tokenizer)
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


def masked_logprobs(model, rows: Sequence[Tuple[Sequence[int], Sequence[int]]]) -> List[List[float]]:
    """Per (ids, loss_mask) row: log p(ids[t] | ids[:t]) at its masked positions t, in order."""
    pol = _policy(model)
    return [lp.detach().float().cpu().tolist() for lp, _ in pol.masked_logprobs(list(rows), grad=False)]


def score_samples(model, samples: Sequence[dict]) -> List[List[float]]:
    """The servers' ``/logprobs``: each sample is {prompt_ids, completion_ids} (-> one logprob per
    completion token) or {ids, loss_mask} (-> one per masked token)."""
    pol = _policy(model)
    out: List = [None] * len(samples)
    pairs, rows = [], []
    for i, s in enumerate(samples):
        if not isinstance(s, dict):
            raise ValueError(f"sample {i} must be an object")
        if "ids" in s:
            ids, mask = s.get("ids"), s.get("loss_mask")
            if not isinstance(ids, list) or not isinstance(mask, list) or len(ids) != len(mask):
                raise ValueError(f"sample {i}: ids and loss_mask must be lists of the same length")
            tokenizer_validate(ids, pol.vocab_size, f"sample {i}: ids")
            rows.append((i, ids, mask))
        else:
            p, c = s.get("prompt_ids"), s.get("completion_ids")
            if not isinstance(p, list) or not isinstance(c, list):
                raise ValueError(f"sample {i}: give prompt_ids and completion_ids (or ids and loss_mask)")
            tokenizer_validate(p + c, pol.vocab_size, f"sample {i}: prompt_ids/completion_ids")
            pairs.append((i, p, c))
    if pairs:
        for (i, _, _), lp in zip(pairs, batch_logprobs(pol, [(p, c) for _, p, c in pairs])):
            out[i] = lp
    if rows:
        for (i, _, _), lp in zip(rows, masked_logprobs(pol, [(ids, m) for _, ids, m in rows])):
            out[i] = lp
    return out


def tokenizer_validate(ids: Sequence[int], vocab: int, what: str) -> None:
    for t in ids:
        if not isinstance(t, int) or isinstance(t, bool) or t < 0 or t >= vocab:
            raise ValueError(f"{what} has id {t!r} outside the model's vocabulary [0, {vocab})")
