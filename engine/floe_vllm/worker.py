"""``FloeWorkerExtension``: methods vLLM mixes into its GPU worker (``--worker-extension-cls``).

How vLLM uses the class (read in vllm-project/vllm, ``vllm/v1/worker/worker_base.py``,
``WorkerWrapperBase.init_worker``): the class named by ``--worker-extension-cls`` is appended to
the worker class's bases in every worker process, after checking that none of its non-dunder
attributes already exists on the worker; ``collective_rpc(method, args, kwargs)`` then calls
``getattr(worker, method)(*args, **kwargs)`` on every worker and returns one result per worker
(a missing method raises ``NotImplementedError("Method 'x' is not implemented.")``). Over HTTP
that is ``POST /collective_rpc {method, args, kwargs, timeout}`` -> ``{"results": [...]}``
(``vllm/entrypoints/serve/dev/rpc/api_router.py``; needs ``VLLM_SERVER_DEV_MODE=1``).

Weights go through vLLM's own reload path, ``worker.reload_weights(weights_iterator=...,
is_checkpoint_format=True)`` (vllm 0.34.0: ``vllm/v1/worker/gpu_worker.py`` ->
``vllm/v1/worker/gpu/model_runner.py`` -> ``vllm/model_executor/model_loader/reload/inplace.py``),
which re-runs the post-load processing (fused-MoE repacking on FlashInfer CUTLASS/TRTLLM and
AITER, quantized layouts) after the checkpoint-format tensors are loaded. Calling
``model.load_weights`` directly skips it: on those backends the tensors land in the wrong
layout and generations turn to garbage with no error (vLLM issue #42821). A vLLM without
``reload_weights`` (before it existed) is refused with the version to install, never loaded
the old way behind its back.

So: every attribute here is a ``floe_``-prefixed method (helpers are module functions), the
class has no ``__init__`` and no state, and nothing heavier than the standard library is
imported until weights are loaded. The folder format is floe's ``checkpoint.json`` sidecar
(floe-checkpoint-2: ``files: {name: {sha256, bytes}}`` for every file; floe-checkpoint-1: the
``sha256`` of ``model.safetensors``); the checks are written out here because this package must
not import floe_engine. floe-checkpoint-3 folders name their checksum in the sidecar
(``checksum: "xxh3-128"``, records ``{xxh3_128, bytes}``); checking those needs the ``xxhash``
package in vLLM's environment (``pip install xxhash``), imported only then.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, Optional, Tuple

SIDECAR = "checkpoint.json"
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


RECORD_KEY = {"xxh3-128": "xxh3_128", "sha256": "sha256"}  # sidecar checksum -> key in a files record


def _hasher(algo: str):
    if algo == "sha256":
        return hashlib.sha256()
    if algo == "xxh3-128":
        try:
            import xxhash
        except ImportError:
            raise ValueError("the folder's checkpoint.json lists xxh3-128 checksums but the xxhash package is not "
                             "installed in this environment: pip install xxhash (or pass verify=False)") from None
        return xxhash.xxh3_128()
    raise ValueError(f"unknown checksum {algo!r} in checkpoint.json (known: xxh3-128, sha256)")


def _digest(path: str, algo: str, chunk: int = 1 << 24) -> str:
    h = _hasher(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)  # both hashers release the GIL on large blocks: files hash in parallel
    return h.hexdigest()


def _record(rec: dict, algo: str) -> Tuple[str, str]:
    """A files record -> (algorithm, expected digest); the record's own key decides."""
    for a in (algo, "xxh3-128", "sha256"):
        if rec.get(RECORD_KEY.get(a, "")):
            return a, str(rec[RECORD_KEY[a]])
    return algo, ""


def read_folder(folder: str) -> Tuple[dict, List[str], Optional[str]]:
    """-> (checkpoint.json contents, safetensors file names in load order, index name or None)."""
    folder = os.path.abspath(folder)
    side = os.path.join(folder, SIDECAR)
    if not os.path.isfile(side):
        raise FileNotFoundError(f"{side} is missing: floe_load_folder loads folders that floe published "
                                f"(a Hugging Face model folder plus floe's {SIDECAR})")
    with open(side) as f:
        meta = json.load(f)
    index = os.path.join(folder, INDEX)
    if os.path.isfile(index):
        with open(index) as f:
            shards = sorted(set(json.load(f).get("weight_map", {}).values()))
        if not shards:
            raise ValueError(f"{index}: weight_map is empty")
        return meta, shards, INDEX
    if os.path.isfile(os.path.join(folder, SINGLE)):
        return meta, [SINGLE], None
    raise FileNotFoundError(f"{folder}: no {SINGLE} and no {INDEX}")


def verify_folder(folder: str, meta: Optional[dict] = None) -> Tuple[int, int]:
    """Check the checksum (xxh3-128 or sha256, as ``checkpoint.json`` says) and size of every file
    it lists -> (files, bytes).
    Raises ValueError naming the first file that is missing, unlisted or does not match."""
    folder = os.path.abspath(folder)
    read_meta, shards, index = read_folder(folder)
    meta = read_meta if meta is None else meta
    files = meta.get("files")
    if not (isinstance(files, dict) and files):
        if not meta.get("sha256"):
            raise ValueError(f"{os.path.join(folder, SIDECAR)} lists no files and no sha256: nothing to verify "
                             "(pass verify=False to load it anyway)")
        if index is not None:
            raise ValueError(f"{os.path.join(folder, SIDECAR)} has one sha256 but the weights are sharded")
        files = {SINGLE: {"sha256": meta["sha256"], "bytes": meta.get("bytes")}}  # floe-checkpoint-1
    for name in ([index] if index else []) + shards:
        if name not in files:
            raise ValueError(f"{os.path.join(folder, name)}: not listed in {SIDECAR} 'files'")
    names = sorted(files)
    paths = []
    for name in names:
        p = os.path.join(folder, name)
        if not os.path.isfile(p):
            raise ValueError(f"{p}: listed in {SIDECAR} but missing")
        want = files[name].get("bytes")
        if want is not None and os.path.getsize(p) != int(want):
            raise ValueError(f"{p}: {os.path.getsize(p)} bytes but {SIDECAR} says {want} (checksum not checked)")
        paths.append(p)
    algo = str(meta.get("checksum") or "sha256")
    wants = [_record(files[name], algo) for name in names]
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(paths)))) as pool:
        digests = list(pool.map(lambda pw: _digest(pw[0], pw[1][0]), zip(paths, wants)))
    for p, (a, want), got in zip(paths, wants, digests):
        if got != want:
            raise ValueError(f"{p}: {a} {got[:12]}… does not match {SIDECAR} ({want[:12]}…); refusing to load")
    return len(paths), sum(os.path.getsize(p) for p in paths)


def iter_weights(folder: str, shards: List[str], device: str = "cpu") -> Iterator[Tuple[str, Any]]:
    """(name, tensor) for every tensor of the shards, one tensor read at a time (memory-mapped)."""
    from safetensors import safe_open  # vLLM's environment has it

    for shard in shards:
        with safe_open(os.path.join(folder, shard), framework="pt", device=device) as f:
            for name in f.keys():
                yield name, f.get_tensor(name)


def _version(version, meta: dict, folder: str) -> int:
    have = meta.get("version")
    if version is None or version == "":
        if have is None:
            raise ValueError(f"no version given and {os.path.join(folder, SIDECAR)} has none")
        return int(have)
    version = int(version)  # collective_rpc over HTTP may send it as a string
    if have is not None and int(have) != version:
        raise ValueError(f"asked for version {version} but {folder} holds version {have}")
    return version


class FloeWorkerExtension:
    """Mixed into vLLM's worker. Call through ``collective_rpc``:

    * ``floe_ping()`` -> ``{"floe_vllm": "<version>"}``: the extension is loaded;
    * ``floe_load_folder(folder, version=None, verify=True)``: check every file's sha256 against
      ``checkpoint.json`` (refusing the folder, naming the file, on a mismatch), then stream the
      safetensors shards into vLLM's ``reload_weights(weights_iterator=..., is_checkpoint_format=True)``; -> ``{"version", "files",
      "bytes", "load_ms", "verify_ms", "tensors"}``. Pause generation first and reset the prefix
      cache after (vLLM's ``/pause``, ``/reset_prefix_cache``, ``/resume``).
    """

    def floe_ping(self) -> Dict[str, str]:
        from . import __version__
        return {"floe_vllm": __version__}

    def floe_load_folder(self, folder: str, version=None, verify=True) -> Dict[str, Any]:
        t0 = time.perf_counter()
        folder = os.path.abspath(str(folder))
        meta, shards, index = read_folder(folder)
        version = _version(version, meta, folder)
        if verify not in (False, "false", "0", 0):
            n_files, n_bytes = verify_folder(folder, meta)
        else:
            names = ([index] if index else []) + shards
            n_files, n_bytes = len(names), sum(os.path.getsize(os.path.join(folder, n)) for n in names)
        t1 = time.perf_counter()
        reload = getattr(self, "reload_weights", None)
        if not callable(reload):
            raise RuntimeError(f"this vLLM worker ({type(self).__name__}) has no reload_weights: floe_vllm loads through "
                               "vLLM's reload path (vllm/v1/worker/gpu_worker.py, reload_weights, as in vLLM 0.34.0); "
                               "pip install 'vllm==0.34.0'")
        count = 0

        def weights():
            nonlocal count
            for item in iter_weights(folder, shards):
                count += 1
                yield item

        import torch  # vLLM's torch; imported here, not at module import
        # checkpoint format: vLLM re-runs its post-load processing (repacking, quantization) itself
        reload(weights_iterator=weights(), is_checkpoint_format=True)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        done = time.perf_counter()
        return {"version": version, "files": n_files, "bytes": n_bytes, "tensors": count,
                "load_ms": round((done - t0) * 1e3, 1), "verify_ms": round((t1 - t0) * 1e3, 1)}
