"""Packed sequences with variable-length attention and no dense mask.

The sharded trainer packs a micro-batch's samples into one unpadded sequence (positions restart
at 0 for each sample). Each sample must attend only to earlier tokens of its own: the old path
built a dense [T, T] additive mask for that (a billion entries at 32k, and no flash kernel takes
an arbitrary mask). Here the documents are given by their cumulative lengths ``cu_seqlens``
([0, n0, n0 + n1, ...]) and attention runs per document, causal, with no mask at all:

* on a Hopper GPU in bf16/fp16 (``cudnn_preferred``), one ``scaled_dot_product_attention(is_causal=True)``
  per document with cuDNN's attention asked for first (``sdpa_preference``, which the trainer
  holds for a whole step);
* on other GPUs in bf16/fp16, ``torch.nn.attention.varlen.varlen_attn`` (PyTorch >= 2.10:
  FlashAttention's varlen kernel, one launch for all documents, backward included) when it is there;
* otherwise (the CPU, fp32, an older PyTorch) one SDPA call per document, as on Hopper, in
  PyTorch's own kernel order.

How it plugs into transformers: ``enable(module)`` registers an attention implementation named
``floe_packed`` (``AttentionInterface`` and ``AttentionMaskInterface``) and switches the model's
config to it. The attention function does varlen attention when the forward carries the packed
documents' ``cu_seq_lens_q`` / ``cu_seq_lens_k`` / ``max_length_q`` / ``max_length_k`` keyword
arguments (transformers' own names for them: the model passes them through each decoder layer to
its attention, and an activation-checkpointed layer gets them again when it is recomputed), and
is transformers' SDPA attention otherwise (decode, padded batches: the same arithmetic as
``sdpa``). The mask function is transformers' ``sdpa_mask`` except inside ``packed_forward``,
where it returns None: transformers would otherwise see restarting positions, infer the packing
and build the dense mask itself.

Models whose layers are not all softmax attention (Qwen3.5's gated-delta-net layers carry a
recurrent state and a causal convolution along the sequence, which would leak from one packed
sample into the next) are refused by ``check_packable``: such a model trains on padded
micro-batches.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import threading
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

NAME = "floe_packed"
_state = threading.local()  # .packing: inside packed_forward (the mask function returns None)
# sdpa_preference's backend. Process-wide, not per thread: the backward, and in it the recompute of a
# checkpointed layer, runs on autograd's device thread and must pick the kernel the forward picked.
_backend = {"name": "auto"}
_registered = False


def _varlen_fn():
    """torch.nn.attention.varlen.varlen_attn, or None where this PyTorch has none."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


BACKENDS = ("auto", "cudnn", "flash")


def cudnn_preferred(device: torch.device, backend: str = "auto") -> bool:
    """Whether SDPA is asked for cuDNN's attention first: ``backend`` 'cudnn', or 'auto' on a Hopper
    GPU (compute capability 9.x), where it trained a 32k-token rollout of a 4B model 1.3x as fast as
    FlashAttention 2 (docs/results.md, "The trainer at real shapes"). Elsewhere (the CPU, other
    GPUs, 'flash') PyTorch's own order stands."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown attention backend {backend!r}; choose one of {list(BACKENDS)}")
    if device.type != "cuda" or backend == "flash" or not torch.backends.cudnn.is_available():
        return False
    return backend == "cudnn" or torch.cuda.get_device_capability(device)[0] == 9


@contextlib.contextmanager
def sdpa_preference(device: torch.device, backend: str = "auto"):
    """A context in which SDPA tries cuDNN's kernel first where ``cudnn_preferred`` (then flash,
    memory-efficient, math) and packed attention picks its kernel by ``backend``; elsewhere SDPA's
    order is PyTorch's. The trainer runs a whole step inside it, so the recompute of a
    checkpointed layer and every backward use the same kernel."""
    prev = _backend["name"]
    _backend["name"] = backend
    try:
        if not cudnn_preferred(device, backend):
            yield
            return
        from torch.nn.attention import SDPBackend, sdpa_kernel
        order = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
        kw = {"set_priority": True} if "set_priority" in inspect.signature(sdpa_kernel).parameters else {}
        with sdpa_kernel(order, **kw):
            yield
    finally:
        _backend["name"] = prev


def kernel_name(device: torch.device, dtype: torch.dtype = torch.bfloat16, backend: str = "auto") -> str:
    """Which kernel packed attention runs on ``device`` for ``dtype``: 'sdpa_per_document_cudnn'
    (one cuDNN SDPA call per document where ``cudnn_preferred``), 'varlen_attn' (CUDA, 16-bit:
    FlashAttention has no fp32 kernel) or 'sdpa_per_document'."""
    half = device.type == "cuda" and dtype in (torch.bfloat16, torch.float16)
    if half and cudnn_preferred(device, backend):
        return "sdpa_per_document_cudnn"
    return "varlen_attn" if half and _varlen_fn() is not None else "sdpa_per_document"


def _varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_len: int,
            scale: float) -> torch.Tensor:
    """q [T, Hq, D], k/v [T, Hkv, D] -> [T, Hq, D], causal within each document of ``cu``. The
    keyword set of varlen_attn changed between PyTorch releases (2.10: ``is_causal``; later:
    ``window_size``, ``scale``, ``enable_gqa``): read it off the signature."""
    fn = _varlen_fn()
    params = inspect.signature(fn).parameters
    kw: Dict[str, Any] = {}
    if "window_size" in params:
        kw["window_size"] = (-1, 0)
    elif "is_causal" in params:
        kw["is_causal"] = True
    else:  # pragma: no cover - a PyTorch this code does not know
        raise RuntimeError("torch.nn.attention.varlen.varlen_attn takes neither window_size nor is_causal; "
                           "update floe_engine/packed_attention.py for this PyTorch")
    if "scale" in params:
        kw["scale"] = scale
    elif not math.isclose(scale, q.shape[-1] ** -0.5):
        q = q * (scale / q.shape[-1] ** -0.5)  # the kernel scales by 1/sqrt(D)
    if k.shape[1] != q.shape[1]:
        if "enable_gqa" in params:
            kw["enable_gqa"] = True
        else:
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    cu = cu.to(device=q.device, dtype=torch.int32)
    return fn(q, k, v, cu, cu, max_len, max_len, **kw)


def _sdpa_params() -> set:
    try:
        return set(inspect.signature(F.scaled_dot_product_attention).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: read its docstring
        doc = F.scaled_dot_product_attention.__doc__ or ""
        return {"enable_gqa"} if "enable_gqa" in doc.split("\n", 3)[0] + doc[:400] else set()


_SDPA_PARAMS = _sdpa_params()


def _per_document(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bounds: List[int],
                  scale: float) -> torch.Tensor:
    """q [1, Hq, T, D], k/v [1, Hkv, T, D] -> [1, T, Hq, D]: causal SDPA on each document alone
    (grouped K/V heads passed as they are where SDPA takes ``enable_gqa``: no repeated copy)."""
    kw: Dict[str, Any] = {}
    if k.shape[1] != q.shape[1] and "enable_gqa" in _SDPA_PARAMS:
        kw["enable_gqa"] = True
    elif k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    outs = [F.scaled_dot_product_attention(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], is_causal=True, scale=scale, **kw)
            for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    return torch.cat(outs, dim=2).transpose(1, 2)


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                     max_len: int, scale: Optional[float] = None) -> torch.Tensor:
    """Attention of one packed sequence: q [1, Hq, T, D], k/v [1, Hkv, T, D] (transformers'
    layout) -> [1, T, Hq, D], each token attending causally within its document only."""
    if q.shape[0] != 1:
        raise ValueError(f"packed attention takes one packed sequence (batch 1), got batch {q.shape[0]}")
    scale = float(scale) if scale is not None else q.shape[-1] ** -0.5
    if kernel_name(q.device, q.dtype, _backend["name"]) == "varlen_attn":
        out = _varlen(q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1), cu_seqlens, int(max_len), scale)
        return out[None]
    return _per_document(q, k, v, [int(x) for x in cu_seqlens.tolist()], scale)


# Attention runs outside compiled blocks (a graph break in each): a compiled graph fixes its SDPA
# kernel when it is traced and would not follow ``sdpa_preference``.
_not_compiled = getattr(getattr(torch, "compiler", None), "disable", lambda f: f)


@_not_compiled
def _attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0,
                       scaling: Optional[float] = None, **kwargs):
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    if dropout:
        raise ValueError("packed attention has no dropout (the trainer runs with dropout 0)")
    return packed_attention(query, key, value, cu, int(kwargs["max_length_q"]), scaling), None


def _mask(*args, **kwargs):
    if getattr(_state, "packing", False):
        return None
    from transformers.masking_utils import sdpa_mask
    return sdpa_mask(*args, **kwargs)


def register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
    AttentionInterface.register(NAME, _attention_forward)
    AttentionMaskInterface.register(NAME, _mask)
    _registered = True


def _other_layers(module) -> List[str]:
    kinds = set(getattr(getattr(module, "config", None), "layer_types", None) or ["full_attention"])
    return sorted(kinds - {"full_attention"})


def packable(policy) -> bool:
    """Whether ``policy`` can train on packed sequences: the tiny model, or a transformers model
    whose layers are all softmax attention."""
    return getattr(policy, "kind", None) == "tiny" or not _other_layers(policy.module)


def check_packable(module) -> None:
    """Refuse a model with layers other than softmax attention (their state would run across the
    packed samples)."""
    other = _other_layers(module)
    if other:
        raise ValueError(f"packing needs every layer to be full attention; this model has {other} layers, whose "
                         "state would run from one packed sample into the next: train it on padded micro-batches "
                         "(the sharded trainer without packing)")


def enable(module) -> None:
    """Switch ``module`` (a transformers model whose layers are all softmax attention) to the
    ``floe_packed`` implementation (idempotent). Outside ``packed_forward`` it computes what
    ``sdpa`` does."""
    check_packable(module)
    register()
    cur = module.config._attn_implementation
    if cur not in ("sdpa", NAME):
        raise ValueError(f"packed attention replaces the sdpa implementation; this model runs {cur!r}")
    module.config._attn_implementation = NAME


def document_kwargs(lengths: Sequence[int], device: torch.device) -> Dict[str, Any]:
    """The forward's keyword arguments for documents of ``lengths`` packed in that order."""
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(list(lengths), dtype=torch.int32), 0)
    cu = cu.to(device)
    m = max(lengths)
    return {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": m, "max_length_k": m}


@contextlib.contextmanager
def packed_forward():
    """Inside: transformers builds no attention mask for a ``floe_packed`` model (the documents
    come with the forward's cu_seq_lens keyword arguments)."""
    prev = getattr(_state, "packing", False)
    _state.packing = True
    try:
        yield
    finally:
        _state.packing = prev
