"""A policy = a model plus its tokenizer plus everything both servers need to run it the same way.

``Policy`` hides whether the network is the tiny byte-level GPT or a Hugging
Face model. The trainer asks it for per-token log-probabilities of
(prompt, completion) pairs (``token_logprobs``) or of the masked tokens of whole
rollouts (``masked_logprobs``); the engine asks it for a ``DecodeBackend`` that
keeps per-sequence caches for continuous batching.

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

from . import model as tiny
from . import tokenizer
from .tokenizer import load_tokenizer

Pair = Tuple[Sequence[int], Sequence[int]]
Mask = Optional[Sequence[int]]
DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
          "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}


def parse_dtype(name: Optional[str], device: torch.device) -> torch.dtype:
    if name in (None, "", "auto"):
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; use one of fp32, bf16, fp16, auto")
    return DTYPES[name]


def pick_device(name: Optional[str]) -> torch.device:
    if name in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


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
        tiny model. p0 must be >= 1 (nothing predicts the first token)."""
        pairs, masks = [], []
        for i, (ids, mask) in enumerate(rows):
            p0 = first_masked(mask)
            if p0 is None:
                raise ValueError(f"row {i}: loss_mask has no 1 (no token to score)")
            if p0 == 0:
                raise ValueError(f"row {i}: loss_mask[0] is 1, but the first token has no prefix to predict it from")
            pairs.append((list(ids[:p0]), list(ids[p0:])))
            masks.append(list(mask[p0:]))
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


# ---------------------------------------------------------------------------------
# tiny byte-level GPT
# ---------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------
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


def build_policy(model: str, checkpoint: Optional[str] = None, seed: int = 0, device: Optional[str] = None,
                 dtype: Optional[str] = None, recurrent_state_dtype: str = "fp32",
                 for_training: bool = False, tokenizer: Optional[str] = None) -> Tuple[Policy, int]:
    """Make the policy named by ``model`` with the tokenizer ``tokenizer`` (None / 'byte' or a
    Hugging Face tokenizer folder) and load ``checkpoint`` if given.

    Returns (policy, weight version). A checkpoint's sidecar config wins over
    the sizes in ``model`` (so engines always match the trainer that wrote it);
    its recorded tokenizer must be the one given here.
    """
    from . import checkpoint as ckpt  # local import: checkpoint imports policy lazily too

    tok = load_tokenizer(tokenizer)
    dev = pick_device(device)
    is_tiny = model == "tiny" or model.startswith("tiny:")
    dt = torch.float32 if is_tiny and dtype in (None, "", "auto") else parse_dtype(dtype, dev)
    if dev.type == "cuda" and dt == torch.float32:
        # fp32 means fp32: TF32 convolutions/matmuls would make the engine's one-token
        # steps and the trainer's full forward round differently
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    meta, sd, version = None, None, 0
    if checkpoint:
        meta, sd = ckpt.load(checkpoint)
        version = int(meta.get("version", 0))
        check_tokenizer(meta, tok, f"checkpoint {checkpoint}")
    cfg = (meta or {}).get("config") or {}
    if is_tiny:
        if cfg and cfg.get("kind") != "tiny":
            raise ValueError(f"checkpoint {checkpoint} holds a {cfg.get('kind')!r} model, not tiny")
        tcfg = tiny.TinyConfig.from_dict(cfg["tiny"]) if cfg else tiny.TinyConfig.parse(model)
        pol: Policy = TinyPolicy(tcfg, dev, dt, seed=seed, tok=tok)
    elif model.startswith("hf:"):
        from . import hf_model  # guarded: needs transformers
        if cfg and cfg.get("kind") != "hf":
            raise ValueError(f"checkpoint {checkpoint} holds a {cfg.get('kind')!r} model, not hf")
        pol = hf_model.HFPolicy.create(model[3:], dev, dt, seed=seed, recurrent_state_dtype=recurrent_state_dtype,
                                       saved_config=cfg or None, for_training=for_training, tok=tok)
    else:
        raise ValueError(f"unknown model {model!r}; use 'tiny', 'tiny:d_model=96,n_layers=2' or 'hf:<config.json|model_type>'")
    if sd is not None:
        pol.load_state_dict(sd)
    return pol, version
