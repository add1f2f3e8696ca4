"""The tiny byte-level GPT (``model.TinyGPT``) as a policy: shared-prompt scoring for the trainer
and a slot K/V cache with an exact-prefix cache for the engine."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch

from . import model as tiny
from .policy import DecodeBackend, Policy, gather_logprobs, mask_index


class TinyPolicy(Policy):
    kind = "tiny"

    def __init__(self, cfg: tiny.TinyConfig, device: torch.device, dtype: torch.dtype = torch.float32,
                 seed: int = 0, tok=None):
        if tok is not None and getattr(tok, "kind", None) != "byte":
            raise ValueError(f"the tiny model runs the byte tokenizer only (ids 0..258), not {tok.kind} tokenizer "
                             f"{tok.name!r} ({tok.vocab_size} ids); use an hf: model for a real vocabulary")
        torch.manual_seed(seed)
        module = tiny.TinyGPT(cfg).to(device=device, dtype=dtype)
        super().__init__(module, device, dtype, tok)
        self.cfg = cfg

    def config_dict(self) -> dict:
        return {"kind": "tiny", "tiny": self.cfg.to_dict(), "tokenizer": self.tokenizer.describe()}

    @property
    def context(self) -> int:
        return self.cfg.context

    def token_logprobs(self, pairs, grad=False, entropy=False, masks=None):
        """Pairs that share a prompt are scored together: the prompt runs once
        and its K/V are shared by all completions in the group (an RL group of
        G samples costs one prompt forward, not G). The 259-way head is cheap,
        so it runs on every completion position and ``masks`` just select."""
        out: List = [None] * len(pairs)
        pad = self.tokenizer.pad_token_id
        groups: Dict[tuple, List[int]] = {}
        for i, (p, c) in enumerate(pairs):
            if len(p) == 0:
                raise ValueError("prompt_ids must not be empty (use [257] = BOS for an empty prompt)")
            if len(p) + len(c) > self.context + 1:
                raise ValueError(f"prompt+completion of {len(p) + len(c)} tokens exceeds context {self.context}")
            groups.setdefault(tuple(p), []).append(i)
        ctx = torch.enable_grad() if grad else torch.no_grad()
        with ctx:
            for prompt, idxs in groups.items():
                prefix = None
                if len(prompt) > 1:
                    ids = torch.tensor([prompt[:-1]], dtype=torch.long, device=self.device)
                    _, prefix = self.module(ids, return_kv=True, logits=False)
                comps = [list(pairs[i][1]) for i in idxs]
                C = max((len(c) for c in comps), default=0)
                if C == 0:
                    for i in idxs:
                        z = torch.zeros(0, device=self.device)
                        out[i] = (z, z if entropy else None)
                    continue
                inp = torch.full((len(comps), C), pad, dtype=torch.long)
                tgt = torch.zeros((len(comps), C), dtype=torch.long)
                for r, c in enumerate(comps):
                    seq = [prompt[-1]] + c[:-1]
                    inp[r, :len(seq)] = torch.tensor(seq)
                    tgt[r, :len(c)] = torch.tensor(c)
                logits = self.module(inp.to(self.device), prefix_kv=prefix)
                lp, ent = gather_logprobs(logits[..., : self.vocab_size], tgt.to(self.device), entropy)
                for r, i in enumerate(idxs):
                    n = len(comps[r])
                    a, e = lp[r, :n], (ent[r, :n] if ent is not None else None)
                    sel = mask_index(masks[i] if masks is not None else None, n, self.device)
                    if sel is not None:
                        a, e = a[sel], (e[sel] if e is not None else None)
                    out[i] = (a, e)
        return out

    def make_backend(self, max_batch: int) -> DecodeBackend:
        return TinyBackend(self, max_batch)


class TinyBackend(DecodeBackend):
    """Slot K/V cache plus an exact-prefix cache.

    The prefix cache remembers the K/V of recent prompts (keyed by token ids)
    so that n>1 samples of one prompt, or the G attempts of one task sent as
    separate requests, prefill once; a new prompt reuses the longest cached
    prefix (multi-turn prompts extend the previous turn). It only ever holds
    K/V computed under the current weights: a weight update clears it.
    """

    def __init__(self, policy: TinyPolicy, max_batch: int, prefix_cache_tokens: int = 32768,
                 min_prefix: int = 16):
        self.policy = policy
        self.cache = tiny.SlotKVCache(policy.module, max_batch)
        self.free = list(range(max_batch))
        self.slot_of: Dict[str, int] = {}
        self.prefix: Dict[tuple, List[Tuple[torch.Tensor, torch.Tensor]]] = {}
        self.prefix_tokens = 0
        self.prefix_budget = prefix_cache_tokens
        self.min_prefix = min_prefix
        self.prefix_hits = 0

    def _best_prefix(self, ids: tuple) -> Tuple[int, Optional[tuple]]:
        best_n, best_key = 0, None
        for key in self.prefix:
            lo, hi = 0, min(len(key), len(ids))
            if hi <= best_n:
                continue
            while lo < hi:  # longest common prefix by bisection over C-level slice compares
                mid = (lo + hi + 1) // 2
                if ids[:mid] == key[:mid]:
                    lo = mid
                else:
                    hi = mid - 1
            if lo > best_n:
                best_n, best_key = lo, key
        return best_n, best_key

    def _remember(self, key: tuple, slot: int) -> None:
        if len(key) < self.min_prefix or key in self.prefix or len(key) > self.prefix_budget:
            return
        n = len(key)
        self.prefix[key] = [(k[slot, :, :n].clone(), v[slot, :, :n].clone())
                            for k, v in zip(self.cache.k, self.cache.v)]
        self.prefix_tokens += n
        while self.prefix_tokens > self.prefix_budget:  # evict oldest (dicts keep insertion order)
            old = next(iter(self.prefix))
            self.prefix_tokens -= len(old)
            del self.prefix[old]

    def add(self, key: str, ids: Sequence[int]) -> torch.Tensor:
        if not self.free:
            raise RuntimeError("no free slot: the scheduler admitted more sequences than max_batch")
        ids = tuple(ids)
        slot = self.free.pop(0)
        self.slot_of[key] = slot
        n, pkey = self._best_prefix(ids) if len(ids) > self.min_prefix else (0, None)
        n = min(n, len(ids) - 1)  # always run at least the last token, for its logits
        if pkey is not None and n >= self.min_prefix:
            self.prefix_hits += 1
            for layer, (k, v) in enumerate(self.prefix[pkey]):
                self.cache.k[layer][slot, :, :n] = k[:, :n]
                self.cache.v[layer][slot, :, :n] = v[:, :n]
            self.cache.lengths[slot] = n
        else:
            self.cache.lengths[slot] = 0
        logits = tiny.extend(self.policy.module, self.cache, slot, ids[self.cache.lengths[slot]:])
        self._remember(ids, slot)
        return logits[: self.policy.vocab_size].float()

    def step(self, keys, tokens):
        slots = [self.slot_of[k] for k in keys]
        logits = tiny.decode(self.policy.module, self.cache, slots, tokens)
        return logits[:, : self.policy.vocab_size].float()

    def remove(self, key: str) -> None:
        slot = self.slot_of.pop(key, None)
        if slot is not None:
            self.cache.lengths[slot] = 0
            self.free.append(slot)
            self.free.sort()  # lowest slots first keeps the decode range short

    def reset_prefix_cache(self) -> int:
        n = len(self.prefix)
        self.prefix.clear()
        self.prefix_tokens = 0
        return n
