"""floe's reference trainer: one RL step per POST, weights published for engines.

    python -m floe_engine.trainer_server --port 8200 --model tiny \
        --checkpoint DIR/v0 --publish-dir DIR [--tokenizer byte|FOLDER]

POST /train_step {batch_path | samples, config} -> {version, path, config, metrics}
  (a sample is one rollout {rollout_id, group_id, reward, advantage, ids, loss_mask,
  behaviour_logprobs, token_versions}; config holds every step setting, all required: lr,
  weight_decay, clip_low, clip_high, ratio_mode, truncate_cap, loss_agg, epochs, minibatches,
  grad_clip, micro_batch_tokens; see contract.py. The response's config is the one applied.)
POST /logprobs {samples: [{prompt_ids, completion_ids} | {ids, loss_mask}]} -> {logprobs}
POST /weight_transfer/open {engine_id, world_size[, backend, master_address]} -> {master_address, master_port, backend, world_size}
POST /weight_transfer/metadata {} -> {version, names, dtype_names, shapes}
POST /weight_transfer/send {engine_id, version} -> {version, send_ms, bytes, tensors}
  (the trainer's rank 0 of an engine's weight-transfer group: vLLM's and SGLang's own routes
  receive; see native_transfer.py)
GET /health, GET /metrics. ``--port 0`` picks a free port; the first stdout
line is a JSON object {"event": "ready", "port": ...}.

Sharded over several processes (FSDP2; see ``fsdp_trainer``), one endpoint whatever the world
size: rank 0 serves these routes and hands every request to the other ranks::

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m floe_engine.trainer_server \
        --port 8200 --model tiny --checkpoint DIR/v0 --publish-dir DIR

``--fsdp`` runs that code path in one process (no torchrun needed). The sharded trainer also
keeps its own state (fp32 master weights + optimizer moments + version, ``trainer_state``) in
``DIR/trainer_state/v<N>`` every ``--state-every`` steps, and on start resumes from the newest
complete one when its version is at least the --checkpoint's (``--no-resume``: weights from
--checkpoint, fresh optimizer moments, as the one-process trainer always does).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from . import __version__  # noqa: F401  (sets thread env before torch loads)
import torch

from . import native_transfer, trainer_state
from .publish import publish_entries
from .distributed import init_distributed, launched_by_torchrun
from .fsdp_trainer import FSDPTrainer
from .httpserve import make_server, prometheus
from .policies import build_policy, parse_dtype
from .trainer import Trainer, load_samples


class TrainerServer:
    def __init__(self, trainer: Trainer, model_name: str, host: str = "127.0.0.1"):
        self.trainer = trainer
        self.model_name = model_name
        self.host = host
        self.busy = 0
        self.failed = 0
        self.senders: dict = {}

    def _entries(self):
        if getattr(self.trainer, "ctx", None) is not None and self.trainer.ctx.world_size > 1:
            raise ValueError("weight transfer from a sharded trainer is not implemented: run it with engines.weightTransfer 'disk'")
        return publish_entries(self.trainer.policy, self.trainer.publish_dtype)

    # POST /weight_transfer/open: host one engine's group (a new one replaces the engine's old group)
    def transfer_open(self, body: dict, headers) -> dict:
        eid = body.get("engine_id")
        if not isinstance(eid, str) or not eid:
            raise ValueError("engine_id (the engine's id in the run config) is required")
        world_size = int(body.get("world_size", 2))
        backend = body.get("backend") or ("nccl" if self.trainer.policy.device.type == "cuda" else "gloo")
        host = body.get("master_address") or self.host
        self.senders[eid] = native_transfer.Sender(backend, host, world_size)
        return {"master_address": host, "master_port": self.senders[eid].port, "backend": backend, "world_size": world_size}

    # POST /weight_transfer/metadata: names, dtypes and shapes of what /weight_transfer/send broadcasts
    def transfer_metadata(self, body: dict, headers) -> dict:
        return {"version": self.trainer.version, **native_transfer.metadata(self._entries())}

    # POST /weight_transfer/send: broadcast the weights of `version` (the one the trainer holds)
    def transfer_send(self, body: dict, headers) -> dict:
        s = self.senders.get(body.get("engine_id"))
        if s is None:
            raise ValueError(f"no weight-transfer group for engine {body.get('engine_id')!r}: POST /weight_transfer/open first")
        if int(body.get("version", -1)) != self.trainer.version:
            raise ValueError(f"asked to send version {body.get('version')} but the trainer holds version {self.trainer.version}")
        return {"version": self.trainer.version, **s.send(self._entries())}

    def train_step(self, body: dict, headers) -> dict:
        if body.get("samples") is not None:
            samples = body["samples"]
        elif body.get("batch_path"):
            samples = load_samples(body["batch_path"])
        else:
            raise ValueError("give batch_path (a .json or .jsonl file of samples) or inline samples")
        self.busy += 1
        try:
            return self.trainer.train_step(samples, body.get("config"))
        except Exception:
            self.failed += 1
            raise
        finally:
            self.busy -= 1

    def logprobs(self, body: dict, headers) -> dict:
        samples = body.get("samples")
        if not isinstance(samples, list):
            raise ValueError("samples must be a list of {prompt_ids, completion_ids} or {ids, loss_mask}")
        lps = self.trainer.score(samples)
        return {"logprobs": lps, "version": self.trainer.version}

    def health(self, body, headers) -> dict:
        pol = self.trainer.policy
        out = {"ok": True, "version": self.trainer.version, "model": self.model_name,
               "path": self.trainer.published_path(), "busy": self.busy > 0,
               "max_model_len": pol.context, "vocab_size": pol.vocab_size, "tokenizer": pol.tokenizer.describe()}
        ctx = getattr(self.trainer, "ctx", None)
        if ctx is not None:  # the sharded trainer
            out.update(world_size=ctx.world_size, resumed_from=self.trainer.resumed_from)
        return out

    def metrics(self, body, headers):
        m = self.trainer.last_metrics
        rows = [
            ("floe_trainer_weight_version", "gauge", "Latest published weight version.", self.trainer.version),
            ("floe_trainer_steps_total", "counter", "Train steps completed.", self.trainer.steps),
            ("floe_trainer_failed_steps_total", "counter", "Train steps that raised.", self.failed),
            ("floe_trainer_busy", "gauge", "1 while a train step runs.", int(self.busy > 0)),
        ]
        for k in ("loss", "grad_norm", "entropy", "clip_fraction", "mismatch_mean_abs_logprob", "mismatch_kl",
                  "train_ms", "publish_ms"):
            if k in m:
                rows.append((f"floe_trainer_last_{k}", "gauge", f"{k} of the last step.", m[k]))
        return prometheus(rows)

    def routes(self):
        return {
            ("POST", "/train_step"): self.train_step,
            ("POST", "/logprobs"): self.logprobs,
            ("POST", "/weight_transfer/open"): self.transfer_open,
            ("POST", "/weight_transfer/metadata"): self.transfer_metadata,
            ("POST", "/weight_transfer/send"): self.transfer_send,
            ("GET", "/health"): self.health,
            ("GET", "/metrics"): self.metrics,
        }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m floe_engine.trainer_server", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8200, help="0 = pick a free port")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--checkpoint", default=None, help="a published version folder (or its model.safetensors)")
    ap.add_argument("--publish-dir", required=True, help="new weights go to <dir>/v<version>/model.safetensors")
    ap.add_argument("--tokenizer", default="byte",
                    help="byte (the tiny model's) | a Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json)")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"],
                    help="adamw (betas 0.9/0.99) or sgd with momentum 0.9")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", help="model dtype, as on the engines: fp32 | bf16 | auto (fp32 master copies live in the optimizer)")
    ap.add_argument("--publish-dtype", default="auto", help="fp32 | bf16 | auto (= compute dtype)")
    ap.add_argument("--recurrent-state-dtype", default="fp32", choices=["fp32", "model"])
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="peak dense bf16 TFLOP/s of one device, for the mfu metric (default: a table by GPU name)")
    ap.add_argument("--fsdp", action="store_true",
                    help="the sharded trainer (FSDP2) in this one process; implied when launched by torchrun")
    ap.add_argument("--state-every", type=int, default=None,
                    help="sharded trainer: save its state (DCP: weights + optimizer) every K steps; 0 = never (default 1)")
    ap.add_argument("--state-keep", type=int, default=1, help="sharded trainer: complete states kept (default 1)")
    ap.add_argument("--no-resume", action="store_true",
                    help="sharded trainer: ignore DIR/trainer_state (weights from --checkpoint, fresh optimizer)")
    ap.add_argument("--activation-checkpointing", action="store_true",
                    help="sharded trainer: recompute each block's activations in the backward (long sequences)")
    ap.add_argument("--pack", action=argparse.BooleanOptionalAction, default=None,
                    help="sharded trainer: pack samples into unpadded token-budget micro-batches (config.micro_batch_tokens), "
                         "attention per sample with no mask (default on; models with linear-attention layers pad); "
                         "--no-pack pads every micro-batch")
    ap.add_argument("--offload-optimizer", action="store_true",
                    help="sharded trainer: keep the fp32 master shards, their gradients and the optimizer state in host "
                         "memory and step the optimizer on the CPU (a larger model on one GPU; slower steps)")
    ap.add_argument("--compile-blocks", action="store_true",
                    help="sharded trainer: each transformer block's forward through torch.compile (norms, rotary, "
                         "SiLU and residual adds fused; attention left out of the graph); the first step compiles")
    ap.add_argument("--attention-backend", choices=["auto", "cudnn", "flash"], default=None,
                    help="sharded trainer: SDPA kernel order. auto (default): cuDNN's attention first on Hopper GPUs "
                         "(1.3x FlashAttention 2 at 32k tokens on an H100), PyTorch's order elsewhere; flash: FlashAttention")
    ap.add_argument("--dist-timeout-s", type=float, default=7 * 86400,
                    help="sharded trainer: process-group timeout (ranks > 0 wait that long for a request)")
    a = ap.parse_args(argv)
    if a.fsdp or launched_by_torchrun():
        return main_sharded(a)
    if (a.state_every or a.no_resume or a.activation_checkpointing or a.pack is not None or a.offload_optimizer
            or a.attention_backend or a.compile_blocks):
        ap.error("--state-every / --no-resume / --activation-checkpointing / --pack / --offload-optimizer / --attention-backend / "
                 "--compile-blocks "
                 "belong to the sharded trainer: "
                 "add --fsdp (or launch with torchrun)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    policy, version = build_policy(a.model, a.checkpoint, seed=a.seed, device=a.device, dtype=a.dtype,
                                   recurrent_state_dtype=a.recurrent_state_dtype, for_training=True,
                                   tokenizer=a.tokenizer)
    pub = policy.dtype if a.publish_dtype == "auto" else parse_dtype(a.publish_dtype, policy.device)
    trainer = Trainer(policy, version, a.publish_dir, publish_dtype=pub, optimizer=a.optimizer,
                      peak_tflops=a.peak_tflops)
    t0 = time.perf_counter()
    path = trainer.ensure_published()  # engines can always load the version the trainer starts from
    name = a.model if a.model.startswith("hf:") else "floe-tiny"
    httpd = make_server(a.host, a.port, TrainerServer(trainer, name, host=a.host).routes(), verbose=a.verbose)
    print(json.dumps({"event": "ready", "role": "trainer", "host": a.host, "port": httpd.server_address[1],
                      "model": name, "version": version, "path": path, "parameters": policy.num_parameters(),
                      "tokenizer": policy.tokenizer.name, "vocab_size": policy.vocab_size,
                      "device": str(policy.device), "startup_publish_ms": round((time.perf_counter() - t0) * 1e3, 1)}),
          flush=True)
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


def main_sharded(a) -> None:
    """The FSDP2 trainer: every rank builds the same policy (same seed, same --checkpoint),
    shards it, resumes its state if any; rank 0 serves HTTP, the others follow its commands."""
    import signal

    import torch.distributed as dist

    torch.set_num_threads(a.threads)
    ctx = init_distributed(a.device, a.dist_timeout_s)
    torch.manual_seed(a.seed)
    policy, version = build_policy(a.model, a.checkpoint, seed=a.seed, device=str(ctx.device), dtype=a.dtype,
                                   recurrent_state_dtype=a.recurrent_state_dtype, for_training=True,
                                   tokenizer=a.tokenizer)
    pub = policy.dtype if a.publish_dtype == "auto" else parse_dtype(a.publish_dtype, policy.device)
    trainer = FSDPTrainer(policy, version, a.publish_dir, ctx, state_every=1 if a.state_every is None else a.state_every,
                          state_keep=a.state_keep, activation_checkpointing=a.activation_checkpointing,
                          pack=a.pack is not False, offload_optimizer=a.offload_optimizer, publish_dtype=pub,
                          attention_backend=a.attention_backend or "auto", compile_blocks=a.compile_blocks, optimizer=a.optimizer, peak_tflops=a.peak_tflops)
    box = [None if a.no_resume else trainer_state.latest(a.publish_dir)]  # rank 0 decides for all
    dist.broadcast_object_list(box, src=0, group=ctx.cmd_group)
    t_resume = time.perf_counter()
    if box[0] is not None:
        folder, meta = box[0]
        if int(meta["version"]) >= version:
            trainer_state.load(trainer, folder, meta)
        elif ctx.is_main:
            print(f"trainer_server: ignoring {folder} (version {meta['version']}): --checkpoint is newer "
                  f"(version {version})", file=sys.stderr, flush=True)
    resume_ms = (time.perf_counter() - t_resume) * 1e3

    def on_signal(signum, frame):
        # torchrun signals every rank at once: no rank can wait for another, so each one just
        # leaves (published versions and saved states are renamed into place whole)
        sys.stdout.flush()
        os._exit(0)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.perf_counter()
    path = trainer.ensure_published()
    if not ctx.is_main:
        trainer.serve_workers()
        dist.destroy_process_group()
        return
    name = a.model if a.model.startswith("hf:") else "floe-tiny"
    httpd = make_server(a.host, a.port, TrainerServer(trainer, name).routes(), verbose=a.verbose)
    print(json.dumps({"event": "ready", "role": "trainer", "host": a.host, "port": httpd.server_address[1],
                      "model": name, "version": trainer.version, "path": path,
                      "parameters": policy.num_parameters(), "tokenizer": policy.tokenizer.name,
                      "vocab_size": policy.vocab_size, "device": str(policy.device),
                      "startup_publish_ms": round((time.perf_counter() - t0) * 1e3, 1),
                      "world_size": ctx.world_size, "resumed_from": trainer.resumed_from,
                      "resume_ms": round(resume_ms, 1)}), flush=True)
    httpd.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    main(sys.argv[1:])
