"""Policies by name: ``build_policy`` makes the tiny or the hf: policy a model spec names, on the
device and in the dtype asked for, and loads a checkpoint into it (``--model``, ``--device``,
``--dtype`` of the servers and the SFT script)."""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import checkpoint as ckpt
from . import hf_model
from . import model as tiny
from .policy import Policy, check_tokenizer
from .tiny_policy import TinyPolicy
from .tokenizer import load_tokenizer

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


def build_policy(model: str, checkpoint: Optional[str] = None, seed: int = 0, device: Optional[str] = None,
                 dtype: Optional[str] = None, recurrent_state_dtype: str = "fp32",
                 for_training: bool = False, tokenizer: Optional[str] = None) -> Tuple[Policy, int]:
    """Make the policy named by ``model`` with the tokenizer ``tokenizer`` (None / 'byte' or a
    Hugging Face tokenizer folder) and load ``checkpoint`` if given.

    Returns (policy, weight version). A checkpoint's sidecar config wins over
    the sizes in ``model`` (so engines always match the trainer that wrote it);
    its recorded tokenizer must be the one given here.
    """
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
        if cfg and cfg.get("kind") != "hf":
            raise ValueError(f"checkpoint {checkpoint} holds a {cfg.get('kind')!r} model, not hf")
        pol = hf_model.HFPolicy.create(model[3:], dev, dt, seed=seed, recurrent_state_dtype=recurrent_state_dtype,
                                       saved_config=cfg or None, for_training=for_training, tok=tok)
    else:
        raise ValueError(f"unknown model {model!r}; use 'tiny', 'tiny:d_model=96,n_layers=2' or 'hf:<config.json|model_type>'")
    if sd is not None:
        pol.load_state_dict(sd)
    return pol, version
