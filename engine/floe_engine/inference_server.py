"""floe's reference inference engine: a vLLM/SGLang-style HTTP surface.

    python -m floe_engine.inference_server --port 8100 --model tiny \
        [--checkpoint DIR/v0] [--seed 0] [--max-batch 8] [--tokenizer byte|FOLDER]

See engine/README.md for the routes. ``--port 0`` picks a free port; the
first stdout line is a JSON object {"event": "ready", "port": ...}.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Dict, List

from . import __version__  # noqa: F401  (sets thread env before torch loads)
import torch

from . import checkpoint as ckpt
from . import native_transfer
from . import tokenizer
from . import weights_io
from .httpserve import HTTPError, make_server, prometheus
from .policies import build_policy
from .policy import check_tokenizer
from .sampling import SamplingParams
from .scheduler import Engine, completion_response
from .scoring import score_samples


def _prompt_ids(prompt, tok=None) -> List[int]:
    """A string (encoded with the tokenizer ``tok``) or a list of token ids -> ids."""
    if isinstance(prompt, str):
        return (tok or tokenizer.ByteTokenizer()).encode(prompt)
    if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return _prompt_ids(prompt[0], tok)
    raise ValueError("prompt must be a string or a list of token ids (one prompt per request)")


PAUSE_MODES = ("abort", "wait", "keep")
# vLLM's /pause defaults to mode=abort; floe's callers (the in-place update flow: pause, load,
# resume, with the running requests carried across) rely on /pause keeping them, so a /pause
# without a mode keeps them here. Ask for abort or wait explicitly.
DEFAULT_PAUSE_MODE = "keep"


def _flag(query: dict, name: str, default: bool) -> bool:
    v = query.get(name)
    if v is None or v == "":
        return default
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"query parameter {name}={v!r} is not a boolean (true/false)")


def floe_vllm_version() -> str:
    """The floe_vllm extension's version (the same package ships both); floe_engine's if absent."""
    try:
        from floe_vllm import __version__ as v
    except ImportError:  # an environment installed before floe_vllm existed
        from . import __version__ as v
    return v


def sampling_params(body: dict) -> SamplingParams:
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    return SamplingParams(
        max_tokens=int(body.get("max_tokens", 16) or 16),
        temperature=float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0),
        top_p=float(body.get("top_p", 1.0) if body.get("top_p") is not None else 1.0),
        stop=list(stop),
        stop_token_ids=[int(t) for t in body.get("stop_token_ids") or []],
        ignore_eos=bool(body.get("ignore_eos", False)),
        include_stop_str_in_output=bool(body.get("include_stop_str_in_output", False)),
        seed=None if body.get("seed") is None else int(body["seed"]),
    )


class InferenceServer:
    def __init__(self, engine: Engine, model_name: str):
        self.engine = engine
        self.model_name = model_name
        self.tokenizer = engine.policy.tokenizer
        self.started = time.time()
        # vLLM's weight-version label ("default" at launch, vllm/v1/engine/core.py); set by
        # /update_weight_version. floe's own per-token versions stay in weight_versions.
        self.weight_label = "default"
        # /pause?mode=wait holds new completions at the door while the in-flight ones finish
        self.gate = threading.Condition()
        self.holding = False
        self.pause_lock = threading.Lock()  # one pause / resume at a time, in order
        self.rpc_methods = {"floe_load_folder": self.floe_load_folder, "floe_ping": self.floe_ping}
        self.transfer_group = None  # this engine's end of a trainer's weight-transfer group (native_transfer)
        # on a GPU, a published folder is read into page-locked buffers kept between updates (the
        # copy to the GPU runs ~3x faster than from pageable memory); one load at a time uses them
        self.read_buffers = weights_io.PinnedBuffers() if engine.policy.device.type == "cuda" else None
        self.load_lock = threading.Lock()

    # POST /v1/completions
    def completions(self, body: dict, headers: Dict[str, str]) -> dict:
        if "prompt" not in body:
            raise ValueError("missing field 'prompt'")
        if body.get("stream"):
            raise ValueError("stream=true is not supported by the reference engine; send stream=false")
        params = sampling_params(body)
        n = int(body.get("n", 1) or 1)
        rid = body.get("request_id") or headers.get("x-request-id")
        ids = _prompt_ids(body["prompt"], self.tokenizer)
        with self.gate:
            while self.holding:
                self.gate.wait()
            req = self.engine.submit(ids, params, n=n, request_id=rid)
        req.done.wait()
        resp = completion_response(req, body.get("model") or self.model_name,
                                   return_token_ids=bool(body.get("return_token_ids", False)), tok=self.tokenizer)
        if req.error:
            raise RuntimeError(f"generation failed: {req.error}")
        return resp

    def tokenize(self, body: dict, headers) -> dict:
        ids = _prompt_ids(body.get("prompt", body.get("text", "")), self.tokenizer)
        return {"tokens": ids, "count": len(ids), "max_model_len": self.engine.policy.context}

    def detokenize(self, body: dict, headers) -> dict:
        ids = body.get("tokens")
        if not isinstance(ids, list):
            raise ValueError("tokens must be a list of token ids")
        tokenizer.validate_ids(ids, self.engine.policy.vocab_size)
        return {"prompt": self.tokenizer.decode(ids)}

    def _load_weights(self, path: str, version=None, verify: bool = True, keep_cache: bool = False) -> dict:
        """Load a published folder (either layout, either checkpoint format) in place, between
        scheduler steps; running sequences get their caches rebuilt under the new weights.
        ``keep_cache`` (floe's recipe.cacheRebuild off, the public recipes' behaviour): nothing is
        rebuilt or dropped. Running sequences continue on K/V the old weights computed, and the
        prefix cache keeps serving old-weight K/V to new prompts that share a prefix; their new
        tokens are stamped with the new version although they were conditioned on stale state."""
        t0 = time.perf_counter()
        timings: dict = {}
        with self.load_lock:  # the state dict is views into read_buffers until the swap has copied it
            meta, sd = ckpt.load(path, verify=verify, timings=timings, buffers=self.read_buffers)
            check_tokenizer(meta, self.tokenizer, f"checkpoint {path}")
            if version is None or version == "":
                version = meta.get("version")
            if version is None:
                raise ValueError("no version given and the checkpoint sidecar has none")
            if meta.get("version") is not None and int(meta["version"]) != int(version):
                raise ValueError(f"asked for version {version} but {path} holds version {meta['version']}")
            files = meta.get("files") if isinstance(meta.get("files"), dict) else None
            rebuilt = self.engine.update_weights(sd, int(version), timings, keep_cache=keep_cache)
            del sd
        return {"version": int(version), "load_ms": round((time.perf_counter() - t0) * 1e3, 2),
                "files": len(files) if files else 1,
                "bytes": sum(int(f.get("bytes") or 0) for f in files.values()) if files else meta.get("bytes"),
                "rebuilt_sequences": rebuilt, "timings": timings}

    def update_weights(self, body: dict, headers) -> dict:
        path = body.get("path") or body.get("model_path")
        if not path:
            raise ValueError("missing field 'path' (a published version folder or its model.safetensors)")
        keep = body.get("keep_cache", False) is True
        r = self._load_weights(path, body.get("version"), verify=bool(body.get("verify", True)), keep_cache=keep)
        return {"ok": True, "version": r["version"], "load_ms": r["load_ms"],
                "rebuilt_sequences": r["rebuilt_sequences"], "kept_cache": keep, "timings": r["timings"]}

    # --- collective_rpc methods (what floe_vllm.FloeWorkerExtension answers inside vLLM) ---------
    def floe_load_folder(self, folder: str, version=None, verify=True) -> dict:
        if not isinstance(folder, str) or not folder:
            raise ValueError("floe_load_folder takes args [folder] (a published version folder)")
        return self._load_weights(folder, version, verify=verify not in (False, "false", "0", 0))

    def floe_ping(self) -> dict:
        return {"floe_vllm": floe_vllm_version(), "engine": "floe-reference"}

    # POST /collective_rpc {method, args, kwargs, timeout} (vLLM's dev-mode route; one worker here)
    def collective_rpc(self, body: dict, headers) -> dict:
        method = body.get("method")
        if not method:
            raise ValueError("Missing 'method' in request body")
        args = body.get("args") or []
        kwargs = body.get("kwargs") or {}
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError("args must be a list and kwargs an object")
        fn = self.rpc_methods.get(method) if isinstance(method, str) else None
        if fn is None:  # vLLM's run_method: NotImplementedError, answered 501
            raise HTTPError(501, f"Method {method!r} is not implemented.", "NotImplementedError")
        return {"results": [fn(*args, **kwargs)]}

    def reset_prefix_cache(self, body, headers, query=None) -> dict:
        # vLLM answers {"success": bool}; its reset_running_requests / reset_external are accepted
        return {"ok": True, "success": True, "dropped_entries": self.engine.reset_prefix_cache()}

    # POST /pause?mode=abort|wait|keep (vLLM's route; floe's default is keep, see DEFAULT_PAUSE_MODE)
    def pause(self, body, headers, query=None) -> dict:
        query = dict(query or {})
        mode = query.get("mode") or body.get("mode")
        if not mode:  # vLLM's deprecated wait_for_inflight_requests=true means mode=wait
            mode = "wait" if _flag(query, "wait_for_inflight_requests", False) else DEFAULT_PAUSE_MODE
        if mode not in PAUSE_MODES:
            raise ValueError(f"mode must be one of {', '.join(PAUSE_MODES)}, not {mode!r}")
        clear = _flag(query, "clear_cache", True)  # vLLM: clear caches after draining (not for keep)
        out = {"status": "paused", "ok": True, "paused": True, "mode": mode}
        with self.pause_lock:
            if mode == "wait":
                out["waited_requests"] = self._drain_then_pause()
            else:
                self.engine.pause()
            if mode == "abort":  # paused first: nothing new starts while the rest is aborted
                out["aborted"] = self.engine.abort(None)
            if mode != "keep" and clear:
                out["dropped_entries"] = self.engine.reset_prefix_cache()
        return out

    def _drain_then_pause(self) -> int:
        """Hold new completions, wait for every request already in the engine, pause, let the held
        ones in (they queue, paused, until /resume). -> how many requests were waited for."""
        with self.gate:
            self.holding = True
        try:
            with self.engine.cv:
                inflight = list(self.engine.requests.values())
                frozen = self.engine.paused
            if frozen and inflight:
                raise HTTPError(409, f"the engine is already paused with {len(inflight)} request(s) in flight "
                                     "(paused with mode=keep): they cannot finish; /resume first, or pause "
                                     "with mode=abort")
            for req in inflight:
                req.done.wait()
            self.engine.pause()
            return len(inflight)
        finally:
            with self.gate:
                self.holding = False
                self.gate.notify_all()

    def resume(self, body, headers) -> dict:
        with self.pause_lock:
            self.engine.resume()
        return {"status": "resumed", "ok": True, "paused": False}

    # POST /update_weight_version {new_version}: vLLM's (rl/online/api_router.py) -> {success, new_version}
    def update_weight_version(self, body, headers) -> dict:
        v = body.get("new_version")
        if not isinstance(v, str):
            raise ValueError("new_version must be a string")
        self.weight_label = v
        return {"success": True, "new_version": v}

    # GET /weight_info -> {weight_version}
    def weight_info(self, body, headers) -> dict:
        return {"weight_version": self.weight_label}

    def is_paused(self, body, headers) -> dict:
        return {"is_paused": bool(self.engine.paused or self.holding)}

    def abort(self, body, headers) -> dict:
        ids = body.get("request_ids")
        if body.get("all") or ids is None:
            ids = None
        elif not isinstance(ids, list):
            raise ValueError("request_ids must be a list of request ids")
        # "aborted" counts sequences (a request of n samples counts n); an empty list aborts nothing
        return {"status": "aborted", "ok": True, "aborted": self.engine.abort(ids)}

    def logprobs(self, body, headers) -> dict:
        samples = body.get("samples")
        if not isinstance(samples, list):
            raise ValueError("samples must be a list of {prompt_ids, completion_ids} or {ids, loss_mask}")
        out: dict = {}

        def score():  # on the scheduler thread, between steps: consistent weights
            out["lp"] = score_samples(self.engine.policy, samples)
            out["version"] = self.engine.version

        self.engine._run_command(score)
        return {"logprobs": out["lp"], "version": out["version"]}

    def health(self, body, headers) -> dict:
        st = self.engine.stats()
        ctx = self.engine.policy.context
        return {"ok": True, "version": st["version"], "model": self.model_name, "paused": st["paused"],
                "running": st["running"], "waiting": st["waiting"], "max_model_len": ctx,
                "vocab_size": self.engine.policy.vocab_size,
                # what a client needs to check raw outputs (kind, eos_token_id, stop_token_ids,
                # special_token_ids, ...: tokenizer.describe())
                "tokenizer": {**self.tokenizer.describe(), "max_model_len": ctx}}

    def models(self, body, headers) -> dict:
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "owned_by": "floe",
                                             "max_model_len": self.engine.policy.context}]}

    def metrics(self, body, headers):
        st = self.engine.stats()
        lab = {"model_name": self.model_name}
        return prometheus([
            ("vllm:num_requests_running", "gauge", "Sequences in the running batch.", st["running"], lab),
            ("vllm:num_requests_waiting", "gauge", "Sequences waiting to be scheduled.", st["waiting"], lab),
            ("vllm:generation_tokens_total", "counter", "Generated tokens.", st.get("generation_tokens", 0), lab),
            ("vllm:prompt_tokens_total", "counter", "Prompt tokens received.", st.get("prompt_tokens", 0), lab),
            ("floe_engine_weight_version", "gauge", "Weight version now serving.", st["version"]),
            ("floe_engine_generation_tokens_total", "counter", "Generated tokens.", st.get("generation_tokens", 0)),
            ("floe_engine_requests_total", "counter", "Completed requests.", st.get("requests", 0)),
            ("floe_engine_aborted_sequences_total", "counter", "Sequences finished by abort.",
             st.get("finished_abort", 0)),
            ("floe_engine_weight_updates_total", "counter", "Weight updates applied.", st.get("weight_updates", 0)),
            ("floe_engine_rebuilt_sequences_total", "counter", "In-flight sequences whose caches were rebuilt.",
             st.get("rebuilt_sequences", 0)),
            ("floe_engine_decode_steps_total", "counter", "Batched decode steps.", st.get("decode_steps", 0)),
            ("floe_engine_paused", "gauge", "1 while paused.", int(st["paused"])),
        ])

    # POST /weight_transfer/init {master_address, master_port, rank, world_size, backend}: join a
    # trainer's group, as a vLLM worker does on /init_weight_transfer_engine and SGLang's on
    # /init_weights_update_group (blocks until every member joined)
    def transfer_init(self, body: dict, headers) -> dict:
        for k in ("master_address", "master_port", "rank", "world_size"):
            if body.get(k) is None:
                raise ValueError(f"missing field {k!r}")
        backend = body.get("backend") or ("nccl" if self.engine.policy.device.type == "cuda" else "gloo")
        self.transfer_group = native_transfer.join(backend, body["master_address"], body["master_port"], body["rank"], body["world_size"])
        return {"ok": True, "backend": backend}

    # POST /weight_transfer/receive {names, dtype_names, shapes, src, version[, keep_cache]}: one
    # update's tensors from the group, swapped in place between scheduler steps as /update_weights does
    def transfer_receive(self, body: dict, headers) -> dict:
        if self.transfer_group is None:
            raise ValueError("no weight-transfer group: POST /weight_transfer/init first")
        if body.get("version") is None:
            raise ValueError("missing field 'version'")
        t0 = time.perf_counter()
        named = native_transfer.receive(self.transfer_group, list(body.get("names") or []), list(body.get("dtype_names") or []),
                                        list(body.get("shapes") or []), int(body.get("src", 0)), self.engine.policy.device)
        recv_ms = round((time.perf_counter() - t0) * 1e3, 2)
        with self.load_lock:
            rebuilt = self.engine.update_weights(dict(named), int(body["version"]), {}, keep_cache=body.get("keep_cache") is True)
        return {"ok": True, "version": int(body["version"]), "tensors": len(named), "receive_ms": recv_ms,
                "load_ms": round((time.perf_counter() - t0) * 1e3, 2), "rebuilt_sequences": rebuilt}

    def routes(self):
        r = {
            ("POST", "/weight_transfer/init"): self.transfer_init,
            ("POST", "/weight_transfer/receive"): self.transfer_receive,
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/tokenize"): self.tokenize,
            ("POST", "/detokenize"): self.detokenize,
            ("POST", "/update_weights"): self.update_weights,
            ("POST", "/update_weights_from_disk"): self.update_weights,  # SGLang's name
            ("POST", "/reset_prefix_cache"): self.reset_prefix_cache,
            ("POST", "/flush_cache"): self.reset_prefix_cache,  # SGLang's name
            ("POST", "/pause"): self.pause,
            ("POST", "/resume"): self.resume,
            ("GET", "/is_paused"): self.is_paused,
            ("POST", "/update_weight_version"): self.update_weight_version,
            ("GET", "/weight_info"): self.weight_info,
            ("POST", "/abort_requests"): self.abort,
            ("POST", "/collective_rpc"): self.collective_rpc,
            ("POST", "/logprobs"): self.logprobs,
            ("GET", "/health"): self.health,
            ("GET", "/v1/models"): self.models,
            ("GET", "/metrics"): self.metrics,
        }
        return r


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m floe_engine.inference_server", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8100, help="0 = pick a free port")
    ap.add_argument("--model", default="tiny", help="tiny | tiny:d_model=96,n_layers=2 | hf:<config.json|model_type:k=v,...>")
    ap.add_argument("--checkpoint", default=None, help="a published version folder (or its model.safetensors)")
    ap.add_argument("--tokenizer", default="byte",
                    help="byte (the tiny model's) | a Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", help="fp32 | bf16 | auto (fp32 on CPU, bf16 on GPU)")
    ap.add_argument("--recurrent-state-dtype", default="fp32", choices=["fp32", "model"])
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    policy, version = build_policy(a.model, a.checkpoint, seed=a.seed, device=a.device, dtype=a.dtype,
                                   recurrent_state_dtype=a.recurrent_state_dtype, tokenizer=a.tokenizer)
    name = a.served_model_name or (a.model if a.model.startswith("hf:") else "floe-tiny")
    engine = Engine(policy, version=version, max_batch=a.max_batch, seed=a.seed, model_name=name).start()
    server = InferenceServer(engine, name)
    httpd = make_server(a.host, a.port, server.routes(), verbose=a.verbose)
    print(json.dumps({"event": "ready", "role": "inference", "host": a.host, "port": httpd.server_address[1],
                      "model": name, "version": version, "parameters": policy.num_parameters(),
                      "device": str(policy.device), "tokenizer": policy.tokenizer.name,
                      "vocab_size": policy.vocab_size}), flush=True)
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        engine.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
