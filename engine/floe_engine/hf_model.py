"""Hugging Face models as floe policies (GPU path; imports transformers lazily).

Model spec (after the ``hf:`` prefix), one of:
  * a path to a ``config.json`` (or a folder holding one; if the folder also
    holds ``*.safetensors`` weights they are loaded, else the model is
    random-initialised from the config: there is no model hub here);
  * a transformers ``model_type`` with overrides, e.g.
    ``qwen3_5_text:hidden_size=512,num_hidden_layers=8,vocab_size=512``
    (values are parsed as JSON where possible; ``qwen3.5`` and ``qwen3_5``
    mean ``qwen3_5_text``).
Spec-level options (not config fields): ``attn_implementation=sdpa|eager``.

Vocabulary: the policy's tokenizer (``tokenizer.load_tokenizer``: a Hugging Face
tokenizer folder, or the byte tokenizer for old specs) gives the ids as they are,
and the config's eos/bos/pad token ids. ``vocab_size`` defaults to the tokenizer's
vocabulary rounded up to a multiple of 64 (Qwen-style padding: 259 byte ids -> 320)
and must be >= it. Logits cover the model's whole output layer
(``Policy.vocab_size`` = the head's size). The head only ever runs where a
logit is needed: the last position in the engine, the scored (completion /
loss-masked) positions in the trainer and SFT, in chunks of rows so that no
[T, vocab] tensor of a whole sequence exists (``HFPolicy.head_logprobs``).

Recurrent (linear-attention) state dtype, ``recurrent_state_dtype``:
  In transformers 5.x the Qwen3.5 / Qwen3-Next gated-delta-net layers
  (``Qwen3_5GatedDeltaNet.forward`` in models/qwen3_5/modeling_qwen3_5.py) read
  the state from ``cache.layers[i].recurrent_states[0]`` and write it back
  through ``Cache.update_recurrent_state`` -> ``LinearAttentionLayer.
  update_recurrent_state``, which ``copy_``s into a buffer allocated by
  ``lazy_initialization`` with ``torch.zeros_like(first state)``. The torch
  reference kernels (``torch_chunk_gated_delta_rule`` for prefill,
  ``torch_recurrent_gated_delta_rule`` for one-token decode) compute in fp32
  and return an fp32 state, so by default the stored state is fp32.
  vLLM/SGLang-style engines instead keep the SSM/recurrent cache in the model
  dtype unless told otherwise. ``cast_recurrent_states`` replaces each stored
  state tensor with a copy in the wanted dtype after every cached forward;
  because later updates ``copy_`` into that tensor, the state then *stays* in
  that dtype (rounded after every token for 'model' = bf16). So:
    'fp32'  -> state kept in fp32 between tokens (the recipe's setting);
    'model' -> state rounded to the model dtype between tokens (the common
               engine default, kept to measure the gap).
  Older caches that keep ``recurrent_states`` as a list per layer
  (transformers 4.x ``Qwen3NextDynamicCache``) are handled the same way.
  Trainer side: a full-sequence forward never stores a state; the chunked
  reference kernel carries it between chunks in fp32 internally and exposes
  no hook, so the trainer always runs the fp32 state (the option is accepted
  there, recorded in the checkpoint, and has no further effect).
"""
from __future__ import annotations

import glob
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import tokenizer
from .policy import DecodeBackend, Pair, Policy, gather_logprobs, mask_index

RECURRENT_DTYPES = ("fp32", "model")
SPEC_OPTIONS = ("attn_implementation",)
ALIASES = {"qwen3.5": "qwen3_5_text", "qwen3_5": "qwen3_5_text", "qwen3.5_text": "qwen3_5_text"}


def _require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "hf: models need the 'transformers' package (GPU machines have it; on CPU run "
            "'$FLOE_HOME/venv/bin/pip install transformers' with a torch >= 2.2)") from e
    return transformers


def _parse_value(v: str) -> Any:
    try:
        return json.loads(v)
    except ValueError:
        return v


def parse_spec(spec: str) -> Tuple[Dict[str, Any], Dict[str, Any], Optional[str]]:
    """-> (config dict incl. model_type, spec options, weights folder or None)."""
    opts: Dict[str, Any] = {}
    weights = None
    if spec.endswith(".json") or os.path.isdir(spec):
        path = os.path.join(spec, "config.json") if os.path.isdir(spec) else spec
        with open(path) as f:
            cfg = json.load(f)
        folder = os.path.dirname(os.path.abspath(path))
        if glob.glob(os.path.join(folder, "*.safetensors")):
            weights = folder
        for k in SPEC_OPTIONS:
            if k in cfg:
                opts[k] = cfg.pop(k)
        if "model_type" not in cfg:
            raise ValueError(f"{path} has no model_type")
    else:
        name, _, rest = spec.partition(":")
        cfg = {"model_type": ALIASES.get(name, name)}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            if "=" not in part:
                raise ValueError(f"bad hf option {part!r}; expected key=value")
            k, v = (s.strip() for s in part.split("=", 1))
            (opts if k in SPEC_OPTIONS else cfg)[k] = _parse_value(v)
    cfg["model_type"] = ALIASES.get(cfg["model_type"], cfg["model_type"])
    return cfg, opts, weights


VOCAB_MULTIPLE = 64


def default_vocab_size(tok) -> int:
    """The tokenizer's vocabulary rounded up to a multiple of 64 (Qwen-style padding)."""
    return -(-int(tok.vocab_size) // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def make_config(cfg: Dict[str, Any], tok=None):
    """transformers config for ``cfg`` (model_type + fields); ``cfg`` gets its vocab_size filled in.
    The special-token ids come from the tokenizer ``tok`` (byte tokenizer if None)."""
    transformers = _require_transformers()
    tok = tok if tok is not None else tokenizer.ByteTokenizer()
    cfg.setdefault("vocab_size", default_vocab_size(tok))
    args = dict(cfg)
    model_type = args.pop("model_type")
    args.update(eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id)
    config = transformers.AutoConfig.for_model(model_type, **args)
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    if vocab < tok.vocab_size:
        raise ValueError(f"vocab_size {vocab} is smaller than the vocabulary of tokenizer {tok.name!r} "
                         f"({tok.vocab_size} ids); leave vocab_size out (default {default_vocab_size(tok)}) "
                         f"or make it >= {tok.vocab_size}")
    return config


def cast_recurrent_states(cache: Any, dtype: torch.dtype) -> int:
    """Store every linear-attention recurrent state of ``cache`` in ``dtype``; return how many were cast."""
    n = 0
    holders = list(getattr(cache, "layers", None) or [])
    if not holders and hasattr(cache, "recurrent_states"):
        holders = [cache]  # transformers 4.x: one cache object with a list per layer
    for holder in holders:
        states = getattr(holder, "recurrent_states", None)
        if states is None:
            continue
        items = states.items() if isinstance(states, dict) else enumerate(states)
        for idx, t in list(items):
            if isinstance(t, torch.Tensor) and t.dtype != dtype:
                states[idx] = t.to(dtype)
                n += 1
    return n


_SPARE_CLASSES: Dict[type, type] = {}


def _spare_class(base: type) -> type:
    """``base`` (transformers' ``DynamicLayer``, which grows its K/V by a ``torch.cat`` per token:
    a new [B, H, T, D] tensor per layer per step) with spare room along the sequence: ``update``
    writes the new keys/values into a preallocated buffer and returns views of its first T
    positions; when the buffer is full (or ``keys`` was replaced from outside, as the backend's
    merge and select do) it moves to a new buffer with half as much room again, so a sequence of
    n tokens is copied O(log n) times instead of n."""
    if base not in _SPARE_CLASSES:
        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            k, v = self.keys, self.values
            n, T = key_states.shape[-2], (k.shape[-2] if k.dim() == 4 else 0)
            buf = getattr(self, "_spare", None)
            if (buf is None or k.dim() != 4 or k.data_ptr() != buf[0].data_ptr() or buf[0].shape[:2] != k.shape[:2]
                    or buf[0].shape[-2] < T + n):
                cap = T + n + max(64, (T + n) // 2)
                kb = key_states.new_empty(*key_states.shape[:2], cap, key_states.shape[-1])
                vb = value_states.new_empty(*value_states.shape[:2], cap, value_states.shape[-1])
                if T:
                    kb[:, :, :T] = k
                    vb[:, :, :T] = v
                buf = self._spare = (kb, vb)
            buf[0][:, :, T:T + n] = key_states
            buf[1][:, :, T:T + n] = value_states
            self.keys, self.values = buf[0][:, :, :T + n], buf[1][:, :, :T + n]
            return self.keys, self.values

        _SPARE_CLASSES[base] = type(f"Spare{base.__name__}", (base,), {"update": update, "__doc__": _spare_class.__doc__})
    return _SPARE_CLASSES[base]


def preallocate_kv(cache: Any) -> int:
    """Give every plain growing K/V layer of ``cache`` spare room (``_spare_class``); sliding-window
    and linear-attention layers keep their own update. Returns how many layers were changed."""
    n = 0
    for layer in getattr(cache, "layers", None) or []:
        cls = type(layer)
        if cls.__name__ == "DynamicLayer":
            layer.__class__ = _spare_class(cls)
            n += 1
    return n


def keep_rope_fp32(module, device: torch.device, dtype: torch.dtype):
    """``module.to(device, dtype)`` except the rotary embeddings' inverse frequencies, which stay
    float32 as transformers computes them (``compute_default_rope_parameters``: ``dtype=torch.float``)
    and as vLLM and SGLang keep their cos/sin tables. ``Module.to(dtype)`` casts every floating
    buffer: a bf16 ``inv_freq`` keeps 8 bits of mantissa, so the angle of position p drifts by up
    to p * 2^-9 rad at the highest frequency (tens of radians at 32k) — a different model from the
    checkpoint's, and from a serving engine's."""
    keep = {name: buf.detach().float().clone() for name, buf in module.named_buffers()
            if name.rsplit(".", 1)[-1] in ("inv_freq", "original_inv_freq") and buf.is_floating_point()}
    module = module.to(device=device, dtype=dtype)
    for name, buf in keep.items():
        owner, _, attr = name.rpartition(".")
        setattr(module.get_submodule(owner) if owner else module, attr, buf.to(device))
    return module


class HFPolicy(Policy):
    kind = "hf"

    def __init__(self, module, device, dtype, hf_config: Dict[str, Any], opts: Dict[str, Any],
                 recurrent_state_dtype: str, tok=None):
        super().__init__(module, device, dtype, tok)
        if recurrent_state_dtype not in RECURRENT_DTYPES:
            raise ValueError(f"recurrent_state_dtype must be one of {RECURRENT_DTYPES}")
        self.hf_config = hf_config
        self.opts = opts
        self.recurrent_state_dtype = recurrent_state_dtype
        self.state_dtype = torch.float32 if recurrent_state_dtype == "fp32" else dtype
        self.base = getattr(module, module.base_model_prefix)
        self.head = module.get_output_embeddings()
        self.vocab_size = int(self.head.weight.shape[0])  # logits over the model's whole output layer

    @classmethod
    def create(cls, spec: str, device: torch.device, dtype: torch.dtype, seed: int = 0,
               recurrent_state_dtype: str = "fp32", saved_config: Optional[dict] = None,
               for_training: bool = False, tok=None) -> "HFPolicy":
        transformers = _require_transformers()
        tok = tok if tok is not None else tokenizer.ByteTokenizer()
        if saved_config:
            cfg, opts, weights = dict(saved_config["hf_config"]), dict(saved_config.get("opts", {})), None
            recurrent_state_dtype = saved_config.get("recurrent_state_dtype", recurrent_state_dtype)
            if "tokenizer" not in saved_config:  # written before tokenizers were recorded: byte ids,
                cfg.setdefault("vocab_size", tokenizer.VOCAB_SIZE)  # and vocab_size defaulted to 259
        else:
            cfg, opts, weights = parse_spec(spec)
        config = make_config(cfg, tok)  # fills in cfg["vocab_size"]: the sidecar records the real size
        attn = opts.get("attn_implementation", "sdpa")
        torch.manual_seed(seed)
        auto = transformers.AutoModelForCausalLM
        if weights:
            module = auto.from_pretrained(weights, config=config, attn_implementation=attn, local_files_only=True)
        else:
            module = auto.from_config(config, attn_implementation=attn)
        if device.type == "cuda" and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
            # cuDNN attention plans a new graph for every new key length, ~2 ms of CPU per
            # layer per decode step (measured on an H200): use flash / mem-efficient SDPA
            torch.backends.cuda.enable_cudnn_sdp(False)
        # the trainer keeps the engine's dtype too (fp32 master copies live in its
        # optimizer, optimizers.MasterWeightsOptimizer): same weights, same arithmetic
        module = keep_rope_fp32(module, device, dtype)
        module.eval()
        return cls(module, device, dtype, cfg, opts, recurrent_state_dtype, tok)

    def config_dict(self) -> dict:
        return {"kind": "hf", "hf_config": self.hf_config, "opts": self.opts,
                "recurrent_state_dtype": self.recurrent_state_dtype, "tokenizer": self.tokenizer.describe()}

    @property
    def context(self) -> int:
        return int(getattr(self.module.config, "max_position_embeddings", 4096) or 4096)

    def tied_names(self) -> List[str]:
        sd = self.module.state_dict()
        seen: Dict[int, str] = {}
        tied = []
        for k, v in sd.items():
            ptr = v.data_ptr()
            if ptr in seen:
                tied.append(k)
            else:
                seen[ptr] = k
        return tied

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits [..., vocab_size] fp32 of the given hidden rows (same arithmetic on engine and trainer).
        Callers pass only the rows whose logits they need."""
        w = self.head.weight
        b = getattr(self.head, "bias", None)
        out = hidden @ w.t().to(hidden.dtype)
        if b is not None:
            out = out + b.to(out.dtype)
        return out.float()

    # rows of the head computed at once: bounds the [rows, vocab] fp32 logits (and their
    # log-softmax) to ~128 MiB each, e.g. 220 rows of a 152k vocabulary
    head_chunk_elements = 1 << 25

    def head_logprobs(self, h: torch.Tensor, targets: torch.Tensor, entropy: bool = False
                      ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """h [N, H] hidden rows, targets [N] -> (log p(target) [N] fp32, entropy [N] or None).

        Runs the head over chunks of rows; when gradients are on and there is more than one
        chunk, each chunk is checkpointed (its logits are recomputed in the backward pass), so
        only one chunk's [rows, vocab] logits are alive at a time."""
        n = h.shape[0]
        rows = max(1, self.head_chunk_elements // max(1, self.vocab_size))
        if n <= rows:
            return gather_logprobs(self._head(h), targets, entropy)

        def chunk(hc, tc):
            lp, ent = gather_logprobs(self._head(hc), tc, entropy)
            return lp, (ent if ent is not None else lp.new_zeros(0))

        lps, ents = [], []
        use_ckpt = torch.is_grad_enabled() and h.requires_grad
        for a in range(0, n, rows):
            hc, tc = h[a:a + rows], targets[a:a + rows]
            if use_ckpt:
                from torch.utils.checkpoint import checkpoint
                lp, ent = checkpoint(chunk, hc, tc, use_reentrant=False)
            else:
                lp, ent = chunk(hc, tc)
            lps.append(lp)
            ents.append(ent)
        return torch.cat(lps), (torch.cat(ents) if entropy else None)

    def forward_hidden(self, ids: torch.Tensor, **kw) -> Tuple[torch.Tensor, Any]:
        out = self.base(input_ids=ids, **kw)
        return out.last_hidden_state, getattr(out, "past_key_values", None)

    def token_logprobs(self, pairs: Sequence[Pair], grad: bool = False, entropy: bool = False,
                       masks=None, max_tokens_per_batch: int = 16384):
        """The base model runs over each (right-padded) micro-batch; the head only over the
        completion positions (or, with ``masks``, only the masked ones)."""
        out: List = [None] * len(pairs)
        pad = self.tokenizer.pad_token_id
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        batches, cur, cur_max = [], [], 0
        for i in order:  # micro-batches of similar length, bounded padded token count
            n = len(pairs[i][0]) + len(pairs[i][1])
            if len(pairs[i][0]) == 0:
                raise ValueError("prompt_ids must not be empty")
            if n - 1 > self.context:
                raise ValueError(f"prompt+completion of {n} tokens exceeds context {self.context}")
            if cur and max(cur_max, n) * (len(cur) + 1) > max_tokens_per_batch:
                batches.append(cur)
                cur, cur_max = [], 0
            cur.append(i)
            cur_max = max(cur_max, n)
        if cur:
            batches.append(cur)
        ctx = torch.enable_grad() if grad else torch.no_grad()
        with ctx:
            for idxs in batches:
                seqs = [list(pairs[i][0]) + list(pairs[i][1]) for i in idxs]
                T = max(len(s) for s in seqs) - 1
                inp = torch.full((len(seqs), max(T, 1)), pad, dtype=torch.long)
                for r, s in enumerate(seqs):  # right padding: causal attention never sees it
                    inp[r, : len(s) - 1] = torch.tensor(s[:-1])
                hidden, _ = self.forward_hidden(inp.to(self.device), use_cache=False)
                rows, cols, tgts, spans = [], [], [], []
                k = 0
                for r, i in enumerate(idxs):  # the scored positions of every row: one head call
                    p, c = pairs[i]
                    pos = torch.arange(len(p) - 1, len(p) - 1 + len(c), device=self.device)
                    tgt = torch.tensor(list(c), dtype=torch.long, device=self.device)
                    sel = mask_index(masks[i] if masks is not None else None, len(c), self.device)
                    if sel is not None:
                        pos, tgt = pos[sel], tgt[sel]
                    rows.append(torch.full_like(pos, r))
                    cols.append(pos)
                    tgts.append(tgt)
                    spans.append((k, k + pos.numel()))
                    k += pos.numel()
                if k == 0:
                    for i in idxs:
                        z = torch.zeros(0, device=self.device)
                        out[i] = (z, z if entropy else None)
                    continue
                h = hidden[torch.cat(rows), torch.cat(cols)]  # [scored tokens, H], never [T, vocab]
                lp, ent = self.head_logprobs(h, torch.cat(tgts), entropy)
                for (a, b), i in zip(spans, idxs):
                    out[i] = (lp[a:b], ent[a:b] if ent is not None else None)
        return out

    def make_backend(self, max_batch: int) -> DecodeBackend:
        return HFBackend(self, max_batch)


class HFBackend(DecodeBackend):
    """Continuous batching over transformers' own caches.

    Each new sequence is prefilled alone (batch 1, no padding, so its
    recurrent state is exactly its own), then merged into one batched cache:
    full-attention K/V are left-padded to a common length and masked, linear-
    attention conv/recurrent states are simply stacked. Finished rows are
    dropped with an index_select and common left padding is trimmed. If the
    cache layout is one this code does not know (older transformers, sliding
    windows), it falls back to decoding each sequence alone (always correct,
    slower).
    """

    def __init__(self, policy: HFPolicy, max_batch: int):
        self.policy = policy
        self.max_batch = max_batch
        self.rows: List[str] = []
        self.lengths: List[int] = []
        self.pad: List[int] = []  # left padding of each row in the full-attention K/V
        self.T = 0  # padded K/V length shared by all rows
        self.cache: Any = None
        self.single: Dict[str, Tuple[Any, int]] = {}  # fallback: key -> (cache, length)
        self.mode = "merge"

    # --- helpers ----------------------------------------------------------------
    def _after_forward(self, cache) -> None:
        cast_recurrent_states(cache, self.policy.state_dtype)
        preallocate_kv(cache)  # the next token's K/V are written in place, not concatenated

    def _prefill(self, ids: Sequence[int]) -> Tuple[torch.Tensor, Any]:
        x = torch.tensor([list(ids)], dtype=torch.long, device=self.policy.device)
        with torch.no_grad():
            hidden, cache = self.policy.forward_hidden(x, use_cache=True)
        self._after_forward(cache)
        return self.policy._head(hidden[0, -1]), cache

    @staticmethod
    def _kv_layers(cache) -> List[Any]:
        layers = getattr(cache, "layers", None)
        if layers is None:
            raise NotImplementedError("cache has no .layers (transformers < 5)")
        out = []
        for layer in layers:
            if getattr(layer, "is_sliding", False):
                raise NotImplementedError("sliding-window cache layers")
            out.append(layer)
        return out

    @staticmethod
    def _lpad(t: torch.Tensor, n: int) -> torch.Tensor:
        if n == 0:
            return t
        pad = torch.zeros(*t.shape[:-2], n, t.shape[-1], dtype=t.dtype, device=t.device)
        return torch.cat([pad, t], dim=-2)

    def _merge(self, cache, length: int) -> None:
        if self.cache is None:
            # the layout is checked on the first sequence, not the second: a cache this code cannot
            # merge (sliding-window layers) must send the backend to per-sequence decoding before
            # any sequence is admitted, or the second request fails and the scheduler aborts all
            self._kv_layers(cache)
            self.cache, self.T, self.pad = cache, length, [0]
            return
        T = self.T
        T2 = max(T, length)
        for a, b in zip(self._kv_layers(self.cache), self._kv_layers(cache)):
            keys = getattr(a, "keys", None)
            if isinstance(keys, torch.Tensor) and keys.dim() == 4 and keys.numel():
                a.keys = torch.cat([self._lpad(a.keys, T2 - T), self._lpad(b.keys, T2 - length)], dim=0)
                a.values = torch.cat([self._lpad(a.values, T2 - T), self._lpad(b.values, T2 - length)], dim=0)
            for attr in ("conv_states", "recurrent_states"):
                sa, sb = getattr(a, attr, None), getattr(b, attr, None)
                if isinstance(sa, dict):
                    for idx, t in sa.items():
                        if isinstance(t, torch.Tensor):
                            sa[idx] = torch.cat([t, sb[idx].to(t.dtype)], dim=0)
        self.pad = [p + T2 - T for p in self.pad] + [T2 - length]
        self.T = T2

    def _select(self, keep: List[int]) -> None:
        if not keep:
            self.cache, self.pad, self.T = None, [], 0
            return
        idx = torch.tensor(keep, device=self.policy.device)
        cut = min(self.pad[i] for i in keep)  # common left padding
        self.pad = [self.pad[i] - cut for i in keep]
        self.T -= cut
        for layer in self._kv_layers(self.cache):
            keys = getattr(layer, "keys", None)
            if isinstance(keys, torch.Tensor) and keys.dim() == 4 and keys.numel():
                layer.keys = layer.keys.index_select(0, idx)[:, :, cut:]
                layer.values = layer.values.index_select(0, idx)[:, :, cut:]
            for attr in ("conv_states", "recurrent_states"):
                states = getattr(layer, attr, None)
                if isinstance(states, dict):
                    for i, t in states.items():
                        if isinstance(t, torch.Tensor):
                            states[i] = t.index_select(0, idx)

    # --- DecodeBackend ----------------------------------------------------------
    def add(self, key: str, ids: Sequence[int]) -> torch.Tensor:
        logits, cache = self._prefill(ids)
        if self.mode == "merge":
            try:
                self._merge(cache, len(ids))
                self.rows.append(key)
                self.lengths.append(len(ids))
                return logits
            except NotImplementedError:
                if self.rows:
                    raise
                self.mode = "single"
        self.single[key] = (cache, len(ids))
        return logits

    def step(self, keys: Sequence[str], tokens: Sequence[int]) -> torch.Tensor:
        dev = self.policy.device
        if self.mode == "single":
            outs = []
            for k, t in zip(keys, tokens):
                cache, n = self.single[k]
                x = torch.tensor([[t]], device=dev)
                pos = torch.tensor([[n]], device=dev)
                with torch.no_grad():
                    hidden, cache = self.policy.forward_hidden(x, past_key_values=cache, use_cache=True,
                                                               position_ids=pos)
                self._after_forward(cache)
                self.single[k] = (cache, n + 1)
                outs.append(self.policy._head(hidden[0, -1]))
            return torch.stack(outs)
        row = {k: i for i, k in enumerate(self.rows)}
        B = len(self.rows)
        tok = torch.full((B, 1), self.policy.tokenizer.pad_token_id, dtype=torch.long)
        fed = [False] * B
        for k, t in zip(keys, tokens):
            tok[row[k], 0] = t
            fed[row[k]] = True
        if not all(fed):
            raise RuntimeError("HF batched decode needs a token for every live sequence")
        pos = torch.tensor([[n] for n in self.lengths], device=dev)
        self.T += 1
        mask = None  # without padding the model's own causal path is used (and no mask is built)
        if any(self.pad):
            pad = torch.tensor(self.pad, device=dev)
            mask = (torch.arange(self.T, device=dev)[None, :] >= pad[:, None]).long()
        with torch.no_grad():
            hidden, cache = self.policy.forward_hidden(tok.to(dev), past_key_values=self.cache, use_cache=True,
                                                       attention_mask=mask, position_ids=pos)
        self.cache = cache
        self._after_forward(cache)
        self.lengths = [n + 1 for n in self.lengths]
        logits = self.policy._head(hidden[:, -1])
        return logits[torch.tensor([row[k] for k in keys], device=dev)]

    def remove(self, key: str) -> None:
        if key in self.single:
            del self.single[key]
            return
        if key not in self.rows:
            return
        i = self.rows.index(key)
        keep = [j for j in range(len(self.rows)) if j != i]
        self._select(keep)
        del self.rows[i]
        del self.lengths[i]

    def rebuild(self, seqs: Dict[str, Sequence[int]]) -> None:
        self.rows, self.lengths, self.cache, self.pad, self.T, self.single = [], [], None, [], 0, {}
        for key, ids in seqs.items():
            self.add(key, ids)
