"""The policy interface: a model plus its tokenizer plus everything both servers need to run it
the same way.

``Policy`` hides whether the network is the tiny byte-level GPT (``tiny_policy``) or a Hugging
Face model (``hf_model``); ``policies.build_policy`` picks one from a model spec. The trainer asks
a policy for per-token log-probabilities of (prompt, completion) pairs (``token_logprobs``) or of
the masked tokens of whole rollouts (``masked_logprobs``); the engine asks it for a
``DecodeBackend`` that keeps per-sequence caches for continuous batching. This module imports
neither implementation, so both can build on it.

Every policy carries ``policy.tokenizer`` (``tokenizer.load_tokenizer``): the tiny
model only runs the byte tokenizer (its logits are cut to the 259 byte ids); an
HF model uses its tokenizer's ids as they are and its logits cover the model's
whole output layer (``Policy.vocab_size`` = the head's size, the tokenizer's
vocabulary rounded up to a multiple of 64 by default). Checkpoints record the
tokenizer (``config.tokenizer`` in the sidecar) and a policy refuses weights
written for another tokenizer (``check_tokenizer``).
"""
from __future__ import annotations

import hashlib
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from . import tokenizer

Pair = Tuple[Sequence[int], Sequence[int]]
Mask = Optional[Sequence[int]]

class DecodeBackend:
    """Per-sequence caches for the engine's scheduler.

    ``add`` caches all of ``ids`` and returns the logits for the token after
    them; ``step`` feeds one new token per sequence. So a sequence's cache
    always holds every token of it except the last sampled one, which the
    next ``step`` feeds in.
    """

    def add(self, key: str, ids: Sequence[int]) -> torch.Tensor:
        """Cache ``ids`` (at least one token) for a new sequence; return next-token logits [V] (fp32,
        V = ``policy.vocab_size``; the head runs on the last position only)."""
        raise NotImplementedError

    def step(self, keys: Sequence[str], tokens: Sequence[int]) -> torch.Tensor:
        """Feed one token per sequence; return next-token logits [len(keys), V] (fp32)."""
        raise NotImplementedError

    def remove(self, key: str) -> None:
        raise NotImplementedError

    def reset_prefix_cache(self) -> int:
        return 0

    def rebuild(self, seqs: Dict[str, Sequence[int]]) -> None:
        """Recompute every listed sequence's cache under the current weights
        (``ids`` = all its tokens but the pending one; the logits are dropped)."""
        self.reset_prefix_cache()
        for key in list(seqs):
            self.remove(key)
        for key, ids in seqs.items():
            self.add(key, ids)


class Policy:
    kind = "abstract"
    vocab_size = tokenizer.VOCAB_SIZE  # ids the logits cover (HF: the model's output size)
    tokenizer = tokenizer.ByteTokenizer()

    def __init__(self, module: torch.nn.Module, device: torch.device, dtype: torch.dtype, tok=None):
        self.module = module
        self.device = device
        self.dtype = dtype
        if tok is not None:
            self.tokenizer = tok

    # --- identity / persistence -------------------------------------------------
    def config_dict(self) -> dict:
        raise NotImplementedError

    @property
    def context(self) -> int:
        raise NotImplementedError

    def state_dict(self) -> Dict[str, torch.Tensor]:
        return self.module.state_dict()

    def load_state_dict(self, sd: Dict[str, torch.Tensor]) -> None:
        own = self.module.state_dict()
        missing = [k for k in own if k not in sd and k not in self.tied_names()]
        unexpected = [k for k in sd if k not in own]
        if missing or unexpected:
            raise ValueError(f"checkpoint does not fit this model: missing {missing[:5]}, unexpected {unexpected[:5]}")
        pinned = False
        with torch.no_grad():
            for k, v in sd.items():
                # from page-locked memory the copies to the GPU are queued, then waited for once
                async_copy = v.device.type == "cpu" and own[k].device.type == "cuda" and v.is_pinned()
                own[k].copy_(v.to(own[k].dtype), non_blocking=async_copy)
                pinned |= async_copy
        if pinned:  # the caller may reuse the source buffers once this returns
            torch.cuda.current_stream().synchronize()

    def tied_names(self) -> List[str]:
        return []

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.module.parameters())

    def weights_digest(self) -> str:
        h = hashlib.sha256()
        for k, v in sorted(self.module.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()[:16]

    # --- scoring ------------------------------------------------------------------
    def token_logprobs(self, pairs: Sequence[Pair], grad: bool = False, entropy: bool = False,
                       masks: Optional[Sequence[Mask]] = None
                       ) -> List[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """Per pair: (log p(completion_t | prefix) [C] fp32, entropy [C] or None).

        With ``masks`` (one 0/1 list over each pair's completion, or None for all of it) only
        the masked completion positions are returned, in order ([mask.sum()] each), and the
        HF output head runs only at those positions."""
        raise NotImplementedError

    def masked_logprobs(self, rows: Sequence[Tuple[Sequence[int], Sequence[int]]], grad: bool = False,
                        entropy: bool = False) -> List[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """Per row (ids [T], loss_mask [T]): log p(ids[t] | ids[:t]) at the masked positions t only.

        The row is scored as the pair (ids[:p0], ids[p0:]) with p0 its first masked index, so
        rows sharing their first prompt (the G rollouts of a group) share its forward on the
        tiny model. p0 must be >= 1 (nothing predicts the first token). Tokens after the last masked
        one are not run."""
        pairs, masks = [], []
        for i, (ids, mask) in enumerate(rows):
            p0 = first_masked(mask)
            if p0 is None:
                raise ValueError(f"row {i}: loss_mask has no 1 (no token to score)")
            if p0 == 0:
                raise ValueError(f"row {i}: loss_mask[0] is 1, but the first token has no prefix to predict it from")
            # tokens after the last masked one change no masked log-prob (attention is causal): not run
            end = max(j for j, m in enumerate(mask) if m) + 1
            pairs.append((list(ids[:p0]), list(ids[p0:end])))
            masks.append(list(mask[p0:end]))
        return self.token_logprobs(pairs, grad=grad, entropy=entropy, masks=masks)

    def make_backend(self, max_batch: int) -> DecodeBackend:
        raise NotImplementedError


def first_masked(mask: Sequence[int]) -> Optional[int]:
    for i, m in enumerate(mask):
        if m:
            return i
    return None


def mask_index(mask: Mask, n: int, device) -> Optional[torch.Tensor]:
    """Positions (LongTensor) where ``mask`` is 1; None means all ``n`` of them."""
    if mask is None:
        return None
    if len(mask) != n:
        raise ValueError(f"mask has {len(mask)} entries for {n} completion tokens")
    return torch.tensor([j for j, m in enumerate(mask) if m], dtype=torch.long, device=device)


def gather_logprobs(logits: torch.Tensor, targets: torch.Tensor, entropy: bool
                    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """logits [..., V], targets [...] -> (logprob, entropy or None). The entropy (over the full
    vocabulary) is a metric: it carries no gradient."""
    logp = F.log_softmax(logits.float(), dim=-1)
    lp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = None
    if entropy:
        with torch.no_grad():
            ent = -(logp.exp() * logp).sum(-1)
    return lp, ent


def checkpoint_tokenizer(meta: Optional[dict]) -> dict:
    """The tokenizer a checkpoint was written for (its sidecar's ``config.tokenizer``).
    Checkpoints from before tokenizers were recorded all used the byte tokenizer."""
    rec = ((meta or {}).get("config") or {}).get("tokenizer")
    return rec if isinstance(rec, dict) else tokenizer.ByteTokenizer().describe()


def check_tokenizer(meta: Optional[dict], tok, where: str = "checkpoint") -> None:
    """Refuse weights written for another tokenizer (name or vocab_size differ), naming both."""
    rec = checkpoint_tokenizer(meta)
    if (rec.get("name"), rec.get("vocab_size")) != (tok.name, tok.vocab_size):
        raise ValueError(f"{where} was written for tokenizer {rec.get('name')!r} ({rec.get('vocab_size')} ids) "
                         f"but this process runs tokenizer {tok.name!r} ({tok.vocab_size} ids); start it with "
                         f"the checkpoint's tokenizer (--tokenizer)")
