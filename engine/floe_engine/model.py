"""The tiny byte-level GPT that is floe's default policy on CPU.

Pre-LN transformer, learned absolute positions, causal multi-head attention,
tied input/output embeddings. Two ways to run it, which must agree to ~1e-6:

* ``forward(ids)``: the full-sequence forward the trainer (and ``logprobs``)
  uses; right padding is harmless because attention is causal.
* ``SlotKVCache`` + ``prefill`` / ``decode``: the engine's cached decoding.
  Every sequence owns one row ("slot") of a preallocated K/V cache, so a
  batched decode step writes each new key/value in place and attends over
  its own prefix with a length mask; nothing is copied or stacked per step.

Attention is written out (matmul + masked softmax) rather than using a fused
kernel, so the cached and uncached paths do the same arithmetic and work on
Debian's torch 1.13 as well as torch 2.x.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import tokenizer


@dataclass
class TinyConfig:
    vocab_size: int = tokenizer.VOCAB_SIZE
    d_model: int = 96
    n_layers: int = 2
    n_heads: int = 4
    context: int = 1024
    d_ff: int = 0  # 0 means 4 * d_model
    init_std: float = 0.02

    def __post_init__(self) -> None:
        if self.d_ff <= 0:
            self.d_ff = 4 * self.d_model
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.vocab_size < tokenizer.VOCAB_SIZE:
            raise ValueError(f"vocab_size must be >= {tokenizer.VOCAB_SIZE}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TinyConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown tiny-model config fields {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)

    @classmethod
    def parse(cls, spec: str) -> "TinyConfig":
        """``tiny`` or ``tiny:d_model=96,n_layers=3`` (aliases d, layers, heads, ctx)."""
        alias = {"d": "d_model", "layers": "n_layers", "heads": "n_heads", "ctx": "context"}
        body = spec.split(":", 1)[1] if ":" in spec else ""
        kwargs: Dict[str, object] = {}
        for part in filter(None, (p.strip() for p in body.split(","))):
            if "=" not in part:
                raise ValueError(f"bad tiny-model option {part!r}; expected key=value, e.g. tiny:d_model=96")
            k, v = (s.strip() for s in part.split("=", 1))
            k = alias.get(k, k)
            kwargs[k] = float(v) if k == "init_std" else int(v)
        return cls.from_dict(kwargs)


def attend_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The explicit form of ``Block._attend``'s kernel: softmax(q kᵀ / √Dh, masked) v, [B, H, T, Dh]."""
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return F.softmax(att.masked_fill(mask, float("-inf")), dim=-1) @ v


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.d_head = cfg.d_model // cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff)
        self.out = nn.Linear(cfg.d_ff, cfg.d_model)

    def _heads(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.n_heads * self.d_head, dim=-1)
        shape = (B, T, self.n_heads, self.d_head)
        return (q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2), v.view(shape).transpose(1, 2))

    def _attend(self, q, k, v, mask) -> torch.Tensor:
        """Attention of q [B, H, T, Dh] over k, v [B, H, S, Dh]; ``mask`` True = may not attend.
        PyTorch's fused kernel (on one CPU thread a trainer step 1.41× and decoding 1.44× as fast as
        with the explicit softmax: ``bench/engine/tiny_attention_bench.py``); engine and trainer both
        run it, so their numerics stay matched. ``attend_reference`` is the explicit form, kept for the test and the bench."""
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
        B, _, T, _ = y.shape
        return y.transpose(1, 2).reshape(B, T, self.n_heads * self.d_head)

    def _finish(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

    def forward(self, x: torch.Tensor, mask: torch.Tensor,
                prefix: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
                ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """One block of the full-sequence forward: -> (x, this block's own (k, v)). ``prefix`` is
        the block's cached (k, v) of earlier positions. A real ``forward`` (rather than the parts
        called from TinyGPT) so module hooks fire per block: FSDP2's ``fully_shard`` relies on them."""
        q, k, v = self._heads(x)
        kv = (k, v)
        if prefix is not None:
            B = x.shape[0]
            k = torch.cat([prefix[0].expand(B, -1, -1, -1), k], dim=2)
            v = torch.cat([prefix[1].expand(B, -1, -1, -1), v], dim=2)
        return self._finish(x, self._attend(q, k, v, mask)), kv



class TinyGPT(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            elif name.endswith("proj.weight") or name.endswith("out.weight"):
                nn.init.normal_(p, std=std / math.sqrt(2 * self.cfg.n_layers))
            else:
                nn.init.normal_(p, std=std)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln_f(x) @ self.tok.weight.t()  # tied embeddings

    def forward(
        self,
        ids: torch.Tensor,
        prefix_kv: Optional[List[Tuple[torch.Tensor, torch.Tensor]]] = None,
        return_kv: bool = False,
        logits: bool = True,
        hidden: bool = False,
        positions: Optional[torch.Tensor] = None,
        attn_mask: Optional[torch.Tensor] = None,
    ):
        """ids [B, T] -> logits [B, T, V] (and per-layer K/V [B, H, T, Dh] if asked).

        ``prefix_kv`` (per layer (k, v) of shape [1 or B, H, P, Dh]) continues
        from an already-computed prefix of P tokens: ``ids`` then sit at
        positions P..P+T-1 and attend to the prefix as well as causally to
        each other. Gradients flow into the prefix, which is how the trainer
        runs one shared prompt for a whole group of completions.

        ``positions`` [T] and ``attn_mask`` ([T, T] or [B, 1, T, T] bool, True = may not attend)
        replace the default arange positions and causal mask (no prefix): packed sequences, each
        restarting at position 0 and attending only within itself.
        """
        B, T = ids.shape
        P = 0 if prefix_kv is None else prefix_kv[0][0].shape[2]
        if P + T > self.cfg.context:
            raise ValueError(f"sequence of {P + T} tokens exceeds the model context {self.cfg.context}")
        pos = torch.arange(P, P + T, device=ids.device) if positions is None else positions
        x = self.tok(ids) + self.pos(pos)[None]
        mask = torch.ones(T, P + T, dtype=torch.bool, device=ids.device).triu(P + 1) if attn_mask is None else attn_mask
        kvs = []
        for layer, blk in enumerate(self.blocks):
            x, kv = blk(x, mask, None if prefix_kv is None else prefix_kv[layer])
            kvs.append(kv)
        out = x if hidden else (self._logits(x) if logits else None)
        return (out, kvs) if return_kv else out


class SlotKVCache:
    """Preallocated K/V storage: one row per concurrently decoding sequence."""

    def __init__(self, model: TinyGPT, max_batch: int):
        cfg = model.cfg
        p = next(model.parameters())
        shape = (max_batch, cfg.n_heads, cfg.context, cfg.d_model // cfg.n_heads)
        self.k = [torch.zeros(shape, dtype=p.dtype, device=p.device) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, dtype=p.dtype, device=p.device) for _ in range(cfg.n_layers)]
        self.lengths = [0] * max_batch
        self.max_batch = max_batch
        self.context = cfg.context


@torch.no_grad()
def extend(model: TinyGPT, cache: SlotKVCache, slot: int, ids: Sequence[int]) -> Optional[torch.Tensor]:
    """Append ``ids`` to ``slot``'s cached prefix (a prefill when the slot is
    empty); return the logits [V] after the last of them (None if ``ids`` is empty)."""
    if not ids:
        return None
    n0 = cache.lengths[slot]
    n = n0 + len(ids)
    if n > cache.context:
        raise ValueError(f"{n} tokens exceed the model context {cache.context}")
    device = cache.k[0].device
    prefix = None
    if n0:
        prefix = [(cache.k[i][slot:slot + 1, :, :n0], cache.v[i][slot:slot + 1, :, :n0]) for i in range(len(cache.k))]
    x, kvs = model(torch.tensor([list(ids)], dtype=torch.long, device=device), prefix_kv=prefix,
                   return_kv=True, logits=False, hidden=True)
    for layer, (k, v) in enumerate(kvs):
        cache.k[layer][slot, :, n0:n] = k[0]
        cache.v[layer][slot, :, n0:n] = v[0]
    cache.lengths[slot] = n
    return model._logits(x[:, -1:])[0, 0]


def prefill(model: TinyGPT, cache: SlotKVCache, slot: int, ids: Sequence[int]) -> Optional[torch.Tensor]:
    """Replace whatever ``slot`` held with the K/V of ``ids``; return the logits after them."""
    cache.lengths[slot] = 0
    return extend(model, cache, slot, ids)


def copy_slot(cache: SlotKVCache, src: int, dst: int, n: Optional[int] = None) -> None:
    """Make ``dst`` hold the first ``n`` cached tokens of ``src`` (all by default)."""
    n = cache.lengths[src] if n is None else n
    for kc, vc in zip(cache.k, cache.v):
        kc[dst, :, :n] = kc[src, :, :n]
        vc[dst, :, :n] = vc[src, :, :n]
    cache.lengths[dst] = n


@torch.no_grad()
def decode(model: TinyGPT, cache: SlotKVCache, slots: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
    """Append one token to each listed slot; return next-token logits [len(slots), V].

    The batch covers the contiguous slot range 0..max(slots) so the cache can be
    sliced (a view) instead of gathered. Rows not being decoded compute garbage
    that is never read: it is written just past their valid prefix (where
    their own next token will overwrite it) and their lengths stay unchanged.
    """
    device = cache.k[0].device
    hi = max(slots) + 1
    tok = torch.zeros(hi, dtype=torch.long)
    pos = torch.tensor([min(n, cache.context - 1) for n in cache.lengths[:hi]], dtype=torch.long)
    for s, t in zip(slots, tokens):
        if cache.lengths[s] >= cache.context:
            raise ValueError(f"slot {s} is full ({cache.context} tokens)")
        tok[s] = t
        pos[s] = cache.lengths[s]
    tok, pos = tok.to(device), pos.to(device)
    tmax = int(pos.max()) + 1
    rows = torch.arange(hi, device=device)
    # mask[b, 0, 0, j] = True where key position j is beyond row b's length
    mask = (torch.arange(tmax, device=device)[None, :] > pos[:, None])[:, None, None, :]
    x = (model.tok(tok) + model.pos(pos))[:, None, :]
    for layer, blk in enumerate(model.blocks):
        q, k, v = blk._heads(x)
        kc, vc = cache.k[layer], cache.v[layer]
        kc[rows, :, pos] = k[:, :, 0]
        vc[rows, :, pos] = v[:, :, 0]
        y = blk._attend(q, kc[:hi, :, :tmax], vc[:hi, :, :tmax], mask)
        x = blk._finish(x, y)
    for s in slots:
        cache.lengths[s] += 1
    logits = model._logits(x)[:, 0]
    return logits[torch.tensor(list(slots), device=device)]
