"""Log-probability scoring outside the decode loop: the servers' ``/logprobs`` and the sharded
trainer's micro-batches.

The engine's ``/logprobs`` and the trainer's ``/logprobs`` and ``/train_step`` all score through
``Policy.token_logprobs`` (``score_samples``, ``Policy.masked_logprobs``), so a difference between
behaviour log-probs (reported by the engine while sampling, from its cached decode) and trainer
log-probs (a full-sequence forward) can only come from the two computation paths, never from two
implementations of scoring. The sharded trainer needs one forward per micro-batch whatever its
rows (every rank's collectives must line up), so it scores with ``full_sequence_logprobs``: the
same arithmetic over one right-padded batch, or over one packed sequence (``packed=True``).
"""
from __future__ import annotations

import contextlib
from typing import List, Optional, Sequence, Tuple

import torch

from . import packed_attention
from .model import TinyGPT
from .policy import Policy, gather_logprobs
from .tiny_policy import TinyPolicy

Row = Tuple[Sequence[int], Sequence[int]]  # (ids, loss_mask)
Scored = List[Tuple[torch.Tensor, Optional[torch.Tensor]]]  # per row: (log-probs, entropy or None)


def check_ids(what: str, ids, vocab: int) -> None:
    """``ids`` must be a list of ints in [0, vocab); the error names ``what`` and the position."""
    if not isinstance(ids, list):
        raise ValueError(f"{what} must be a list of token ids")
    for j, t in enumerate(ids):
        if not isinstance(t, int) or isinstance(t, bool) or t < 0 or t >= vocab:
            raise ValueError(f"{what}[{j}] = {t!r} is outside the model's vocabulary [0, {vocab})")


def _policy(model) -> Policy:
    if isinstance(model, Policy):
        return model
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


def masked_logprobs(model, rows: Sequence[Row]) -> List[List[float]]:
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
            check_ids(f"sample {i}: ids", ids, pol.vocab_size)
            if not isinstance(mask, list) or len(ids) != len(mask):
                raise ValueError(f"sample {i}: ids and loss_mask must be lists of the same length")
            rows.append((i, ids, mask))
        else:
            p, c = s.get("prompt_ids"), s.get("completion_ids")
            if not isinstance(p, list) or not isinstance(c, list):
                raise ValueError(f"sample {i}: give prompt_ids and completion_ids (or ids and loss_mask)")
            check_ids(f"sample {i}: prompt_ids", p, pol.vocab_size)
            check_ids(f"sample {i}: completion_ids", c, pol.vocab_size)
            pairs.append((i, p, c))
    if pairs:
        for (i, _, _), lp in zip(pairs, batch_logprobs(pol, [(p, c) for _, p, c in pairs])):
            out[i] = lp
    if rows:
        for (i, _, _), lp in zip(rows, masked_logprobs(pol, [(ids, m) for _, ids, m in rows])):
            out[i] = lp
    return out


def full_sequence_logprobs(policy: Policy, rows: Sequence[Row], entropy: bool = False,
                           packed: bool = False, dense_mask: bool = False) -> Scored:
    """Per (ids, loss_mask) row: log p(ids[t] | ids[:t]) at its masked t, from one forward of all
    rows (each block runs once, whatever the rows are: every rank's collectives match); the head
    runs at the masked positions only. Same arithmetic as ``Policy.masked_logprobs`` up to float
    rounding (the tiny model there shares prompt K/V).

    By default the rows are right-padded into one batch. ``packed``: they are packed into ONE
    sequence of sum(len(ids) - 1) tokens, no padding: each row's positions restart at 0 and a
    token attends only to earlier tokens of its own row, so every log-prob (hence the loss and its
    gradient) is the unpadded one, up to float rounding. A transformers model runs variable-length
    attention over the rows' boundaries with no mask (``packed_attention``); ``dense_mask`` builds
    the old dense [T, T] block-diagonal mask instead (kept to compare the two, as the benchmark
    does); the tiny model always takes the dense mask (its own attention, CPU-sized)."""
    dev = policy.device
    rr, cc, tgts, spans, k = [], [], [], [], 0  # (row, column) of each scored position's input
    start = 0
    for r, (ids, mask) in enumerate(rows):
        pos = [j for j, m in enumerate(mask) if m]
        if pos and pos[0] == 0:
            raise ValueError(f"row {r}: loss_mask[0] is 1, but the first token has no prefix to predict it from")
        rr += [0 if packed else r] * len(pos)
        cc += [(start if packed else 0) + j - 1 for j in pos]
        tgts += [ids[j] for j in pos]
        spans.append((k, k + len(pos)))
        k += len(pos)
        start += len(ids) - 1
    fwd = {}
    if packed:
        segs = [list(ids[:-1]) for ids, _ in rows]
        T = start
        positions = torch.cat([torch.arange(len(s)) for s in segs]).to(dev)
        inp = torch.tensor([t for s in segs for t in s], dtype=torch.long, device=dev)[None]
        tiny = getattr(policy, "kind", None) == "tiny"
        if tiny or dense_mask:
            seg_id = torch.cat([torch.full((len(s),), n, dtype=torch.long) for n, s in enumerate(segs)]).to(dev)
            idx = torch.arange(T, device=dev)
            blocked = (seg_id[:, None] != seg_id[None, :]) | (idx[None, :] > idx[:, None])  # True = may not attend
        if tiny:
            fwd = {"positions": positions, "attn_mask": blocked}
        elif dense_mask:  # transformers passes a 4D mask through as is: additive, in the compute dtype
            add = torch.zeros((1, 1, T, T), dtype=policy.dtype, device=dev)
            add.masked_fill_(blocked[None, None], torch.finfo(policy.dtype).min)
            fwd = {"position_ids": positions[None], "attention_mask": add}
        else:  # variable-length attention over the rows' boundaries, no mask
            packed_attention.enable(policy.module)
            fwd = {"position_ids": positions[None], **packed_attention.document_kwargs([len(s) for s in segs], dev)}
    else:
        T = max(len(ids) for ids, _ in rows) - 1
        inp = torch.full((len(rows), max(T, 1)), policy.tokenizer.pad_token_id, dtype=torch.long)
        for r, (ids, _) in enumerate(rows):
            inp[r, : len(ids) - 1] = torch.tensor(list(ids[:-1]), dtype=torch.long)
        inp = inp.to(dev)
    ri, ci = torch.tensor(rr, device=dev), torch.tensor(cc, device=dev)
    tg = torch.tensor(tgts, dtype=torch.long, device=dev)
    if getattr(policy, "kind", None) == "tiny":
        x = policy.module(inp, hidden=True, **fwd)
        logits = policy.module._logits(x[ri, ci])
        lp, ent = gather_logprobs(logits[..., : policy.vocab_size], tg, entropy)
    else:
        with packed_attention.packed_forward() if packed and not dense_mask else contextlib.nullcontext():
            hidden, _ = policy.forward_hidden(inp, use_cache=False, **fwd)
        lp, ent = policy.head_logprobs(hidden[ri, ci], tg, entropy)
    return [(lp[a:b], ent[a:b] if ent is not None else None) for a, b in spans]
