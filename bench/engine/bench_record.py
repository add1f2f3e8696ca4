"""What the benchmarks of bench/engine share: the model shapes the FSDP2 ones build, their
results file, and the train-step config every benchmark that steps a trainer sends.

The record holds the command (as typed, for the README), host and versions, and is rewritten
after every measurement (``save``), so a run cut short by the device's time limit keeps what it
measured. ``open_device`` makes the one-process group the trainer needs and notes the GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
if os.path.join(REPO, "engine") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "engine"))

import torch  # noqa: E402

from floe_engine.distributed import DistContext, init_distributed  # noqa: E402

# Qwen3-4B's shape with the real 151,936-id vocabulary (random init), and a tiny one for a CPU check
QWEN3_4B = ("hf:qwen3:hidden_size=2560,num_hidden_layers=36,num_attention_heads=32,num_key_value_heads=8,"
            "head_dim=128,intermediate_size=9728,vocab_size=151936,max_position_embeddings=40960,"
            "rope_theta=1000000,rms_norm_eps=1e-6,tie_word_embeddings=true")
SMOKE = ("hf:qwen3:hidden_size=64,num_hidden_layers=2,num_attention_heads=2,num_key_value_heads=1,head_dim=32,"
         "intermediate_size=128,vocab_size=151936,max_position_embeddings=4096,tie_word_embeddings=true")


# Qwen3.5-4B's text model (the published config.json's text_config; random init): 32 layers, every
# fourth full attention (16 query / 4 KV heads of 256, output gate, RoPE on a quarter of each head)
# and the rest gated-delta-net linear attention (16 key / 32 value heads of 128, conv kernel 4),
# MLP 9216, tied embeddings, the real 248,320-id vocabulary. Without flash-linear-attention (not
# on the GPU machine) transformers runs its torch reference kernels for the linear layers.
QWEN35_4B = ("hf:qwen3_5_text:hidden_size=2560,num_hidden_layers=32,num_attention_heads=16,num_key_value_heads=4,"
             "head_dim=256,intermediate_size=9216,linear_num_key_heads=16,linear_num_value_heads=32,"
             "linear_key_head_dim=128,linear_value_head_dim=128,linear_conv_kernel_dim=4,vocab_size=248320,"
             "max_position_embeddings=262144,rms_norm_eps=1e-6,tie_word_embeddings=true")
SMOKE35 = ("hf:qwen3_5_text:hidden_size=64,num_hidden_layers=4,num_attention_heads=2,num_key_value_heads=1,head_dim=32,"
           "intermediate_size=128,linear_num_key_heads=2,linear_num_value_heads=4,linear_key_head_dim=16,"
           "linear_value_head_dim=16,vocab_size=248320,max_position_embeddings=4096,tie_word_embeddings=true")
MODELS = {"qwen3-4b": (QWEN3_4B, SMOKE), "qwen3.5-4b": (QWEN35_4B, SMOKE35)}


def step_config(**over: Any) -> dict:
    """A full /train_step config (the trainer has no defaults: floe sends every field from its run
    config) with the benchmarks' values: a tiny learning rate, so a timed step barely moves the
    random model; ``over`` replaces some."""
    cfg = {"lr": 1e-6, "weight_decay": 0.0, "clip_low": 0.2, "clip_high": 0.28, "ratio_mode": "clip",
           "truncate_cap": 2.0, "loss_agg": "token-mean", "epochs": 1, "minibatches": 1, "grad_clip": 1.0,
           "micro_batch_tokens": 16384}
    return {**cfg, **over}


def model_spec(name: str, smoke: bool) -> str:
    """The spec of --model NAME (its tiny variant for --smoke)."""
    full, tiny = MODELS[name]
    return tiny if smoke else full


def arguments(description: str) -> argparse.ArgumentParser:
    """The options every FSDP2 benchmark takes: --out, --model, --smoke."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the results JSON (rewritten after every measurement)")
    ap.add_argument("--model", choices=sorted(MODELS), default="qwen3-4b", help="the model shape")
    ap.add_argument("--smoke", action="store_true", help="a tiny model of that shape on CPU: checks the script")
    return ap


class Record(dict):
    """The benchmark's JSON, written to ``out`` by every ``save``."""

    def __init__(self, out: str, **fields: Any) -> None:
        super().__init__(command=" ".join(["python3", os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
                         host=platform.node(), torch=torch.__version__, started_unix=time.time(), **fields)
        self.out = out
        for pkg in ("transformers", "fla"):  # fla: flash-linear-attention's kernels, when installed
            try:
                self[pkg] = __import__(pkg).__version__
            except ImportError:
                self[pkg] = None

    def save(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.out)), exist_ok=True)
        with open(self.out, "w") as f:
            json.dump(self, f, indent=1)

    def finish(self) -> None:
        self["finished_unix"] = time.time()
        self.save()

    def open_device(self, smoke: bool) -> DistContext:
        """The trainer's process group (gloo on CPU for --smoke, NCCL on the GPU)."""
        ctx = init_distributed("cpu" if smoke else "cuda")
        if ctx.device.type == "cuda":
            self["gpu"] = torch.cuda.get_device_name(ctx.device)
        self["cpu_count"] = os.cpu_count()
        return ctx
