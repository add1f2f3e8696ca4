"""Weights on disk: a version folder of safetensors plus a JSON sidecar, ``checkpoint.json``.

Published layout (``format: "floe-checkpoint-3"``), one folder per version,
``<dir>/v<version>/``:

* tiny policy: ``model.safetensors`` + ``checkpoint.json``;
* ``hf:`` policy: a Hugging Face model folder that vLLM, SGLang and
  ``transformers.AutoModelForCausalLM.from_pretrained`` load as is, written by
  transformers' own ``save_pretrained`` (so parameter names, tied embeddings,
  ``config.json`` and ``generation_config.json`` are exactly what transformers
  writes): ``config.json``, ``generation_config.json`` (its ``eos_token_id``
  lists the tokenizer's stop ids), the tokenizer files copied from the folder
  the policy was built with (``tokenizer.json``, ``tokenizer_config.json`` (given a
  ``tokenizer_class`` when it names none, so AutoTokenizer reads tokenizer.json as is),
  ``special_tokens_map.json``, ``chat_template.jinja``, ... where present), and
  the weights: one ``model.safetensors``, or ``model-0000k-of-0000n.safetensors``
  shards + ``model.safetensors.index.json`` once they exceed ``max_shard_bytes``;
  plus ``checkpoint.json``.

``checkpoint.json``: ``{format, version, config (floe's: kind, sizes, tokenizer),
layout ("floe" | "hf"), weights (the weight files: [model.safetensors] or
[index, shards...]), checksum ("xxh3-128", or "sha256" where the xxhash package is
missing), files: {relative name: {xxh3_128 | sha256, bytes}} (every file of the
folder but the sidecar itself), bytes (of the safetensors files), created_unix}``
and, only when the checksum is sha256 and the weights are one file, the top-level
``sha256`` of ``model.safetensors`` (what floe-checkpoint-1 readers check).
floe-checkpoint-2 folders (every record a sha256) still verify and load.

A version folder is written under a temporary name and renamed into place, so
a reader never sees half a folder. ``load`` reads both layouts and both formats
(floe-checkpoint-1 folders: model.safetensors + {sha256, bytes}), verifying every
listed file first and naming the one that does not match.

    python -m floe_engine.checkpoint verify <folder>   # one JSON line; exit 1 on a mismatch
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Tuple

if TYPE_CHECKING:  # torch is imported where tensors are handled: `verify` needs only the checksums
    import torch

from . import checksum

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
SIDECAR = "checkpoint.json"
FORMAT = "floe-checkpoint-3"  # files records carry the sidecar's `checksum` (xxh3-128); 2: sha256 records
FORMAT_V2 = "floe-checkpoint-2"
FORMAT_V1 = "floe-checkpoint-1"
# Hugging Face's usual shard size; a folder under it has a single model.safetensors
MAX_SHARD_BYTES = 5 * 10 ** 9
# threads that read the pieces of the weight files (os.preadv releases the GIL)
READ_THREADS = max(2, min(16, os.cpu_count() or 2))
# copied from the policy's tokenizer folder when present (generation_config.json is written, not copied)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model")


def version_dir(publish_dir: str, version: int) -> str:
    return os.path.join(publish_dir, f"v{version}")


def sha256_file(path: str, chunk: int = 1 << 24) -> str:
    return checksum.digest_file(path, checksum.SHA256, chunk)


# ------------------------------------------------------------------------------ writing
def _dedupe(sd: Dict[str, "torch.Tensor"]) -> Dict[str, "torch.Tensor"]:
    """Drop aliases of already-listed storage (tied embeddings); safetensors refuses shared tensors."""
    seen, out = set(), {}
    for k, v in sd.items():
        key = (v.data_ptr(), v.shape, v.stride()) if v.numel() else (k,)
        if key in seen:
            continue
        seen.add(key)
        out[k] = v.detach().contiguous().cpu()
    return out


def _cpu_tensors(sd: Dict[str, "torch.Tensor"], dtype) -> Dict[str, "torch.Tensor"]:
    """CPU (and ``dtype``) copies of ``sd`` that keep its aliasing: names that share one tensor
    (tied embeddings) get one shared result, so transformers' save_pretrained still sees them tied."""
    memo: Dict[tuple, "torch.Tensor"] = {}
    out = {}
    for k, v in sd.items():
        v = v.detach()
        key = (v.device, v.data_ptr(), tuple(v.shape), tuple(v.stride()), v.dtype) if v.numel() else ("empty", k)
        if key not in memo:
            t = v.to(dtype) if (dtype is not None and v.is_floating_point()) else v
            memo[key] = t.contiguous().cpu()
        out[k] = memo[key]
    return out


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _write_hf(folder: str, module, tensors: Dict[str, "torch.Tensor"], max_shard_bytes: int, dtype,
              tokenizer_dir: Optional[str], stop_token_ids: Optional[Iterable[int]]) -> None:
    """``folder`` becomes a Hugging Face model folder: transformers' ``save_pretrained`` writes
    config.json, generation_config.json and the (sharded) safetensors with its own names and its
    own tied-weight rule (the output embedding of a tied model is left out); then the tokenizer
    files are copied in and the generation config's eos_token_id lists the tokenizer's stop ids."""
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar on every publish
    try:
        module.save_pretrained(folder, state_dict=tensors, max_shard_size=int(max_shard_bytes))
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    _finish_hf_files(folder, dtype, tokenizer_dir, stop_token_ids)


def _finish_hf_files(folder: str, dtype, tokenizer_dir: Optional[str], stop_token_ids: Optional[Iterable[int]]) -> None:
    if dtype is not None:  # config.json names the module's dtype; say what was written
        _patch_json(os.path.join(folder, "config.json"),
                    lambda c: c.update({k: _dtype_name(dtype) for k in ("dtype", "torch_dtype") if k in c}))
    stops = [int(t) for t in (stop_token_ids or [])]
    gen = os.path.join(folder, "generation_config.json")
    if stops and os.path.exists(gen):  # vLLM and transformers stop on every id listed here
        _patch_json(gen, lambda g: g.update(eos_token_id=stops if len(stops) > 1 else stops[0]))
    if tokenizer_dir:
        for name in TOKENIZER_FILES:
            src = os.path.join(tokenizer_dir, name)
            if os.path.isfile(src) and not os.path.exists(os.path.join(folder, name)):
                shutil.copyfile(src, os.path.join(folder, name))
        cfg = os.path.join(folder, "tokenizer_config.json")
        if os.path.exists(cfg) and "tokenizer_class" not in _read_json(cfg):
            # without a tokenizer_class, AutoTokenizer (so vLLM and SGLang) picks the class of the
            # model_type in config.json beside it, which may rebuild the pre-tokenizer and change the
            # ids (seen with transformers 5: Qwen2Tokenizer over a plain byte-level BPE folder); the
            # generic class loads tokenizer.json exactly as floe's tokenizer does
            _patch_json(cfg, lambda c: c.update(tokenizer_class="PreTrainedTokenizerFast"))


def _read_json(path: str):
    with open(path) as f:
        return json.load(f)


def _patch_json(path: str, edit) -> None:
    with open(path) as f:
        obj = json.load(f)
    edit(obj)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def _list_files(folder: str) -> List[str]:
    """Every file under ``folder`` (relative, '/'-separated, sorted) but the sidecar."""
    out = []
    for root, _, names in os.walk(folder):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), folder).replace(os.sep, "/")
            if rel != SIDECAR:
                out.append(rel)
    return sorted(out)


def _weight_names(folder: str) -> List[str]:
    """The weight files of a folder: [model.safetensors.index.json, shards...] or [model.safetensors]."""
    index = os.path.join(folder, INDEX)
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f).get("weight_map", {}).values()))
        return [INDEX] + shards
    return [WEIGHTS]


def finish_folder(tmp: str, out_dir: str, version: int, config: dict, layout: str, files: Dict[str, dict],
                  algo: str, extra: Optional[dict] = None, timings: Optional[dict] = None) -> None:
    """Write the sidecar into the complete folder ``tmp`` (``files``: {name: {<digest key>, bytes}}
    for every file in it) and rename it to ``out_dir`` (replacing an older one)."""
    t0 = time.perf_counter()
    weights = _weight_names(tmp)
    missing = [w for w in weights if w not in files]
    if missing:
        raise RuntimeError(f"writing {out_dir}: expected weight files {missing} were not written")
    meta = {"format": FORMAT, "version": int(version), "config": config, "layout": layout, "weights": weights,
            "checksum": algo, "bytes": sum(files[w]["bytes"] for w in weights if w.endswith(".safetensors"))}
    if weights == [WEIGHTS] and algo == checksum.SHA256:  # keep the floe-checkpoint-1 field for old readers
        meta["sha256"] = files[WEIGHTS]["sha256"]
    meta.update(files=dict(sorted(files.items())), created_unix=time.time())
    if extra:
        meta.update(extra)
    with open(os.path.join(tmp, SIDECAR), "w") as f:
        json.dump(meta, f, indent=1)
    t1 = time.perf_counter()
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(os.path.dirname(out_dir) or ".", exist_ok=True)
    os.rename(tmp, out_dir)
    if timings is not None:
        timings.update(sidecar_ms=round((t1 - t0) * 1e3, 1), rename_ms=round((time.perf_counter() - t1) * 1e3, 1))


def temp_folder(out_dir: str) -> str:
    """The name a version folder is written under before its rename."""
    return f"{os.path.abspath(out_dir)}.tmp-{os.getpid()}-{time.monotonic_ns()}"


def write_hf_meta(folder: str, module, dtype, tokenizer_dir: Optional[str],
                  stop_token_ids: Optional[Iterable[int]]) -> None:
    """The non-weight files of a Hugging Face folder, as ``_write_hf`` leaves them (config.json
    with architectures and the published dtype, generation_config.json, tokenizer files), for
    writers that put the safetensors there themselves (the sharded trainer)."""
    import copy
    cfg = copy.deepcopy(module.config)
    cfg.architectures = [type(module).__name__]
    cfg.dtype = dtype if dtype is not None else getattr(module, "dtype", None)  # what save_pretrained records
    cfg.save_pretrained(folder)
    gen = getattr(module, "generation_config", None)
    if gen is not None and getattr(module, "can_generate", lambda: False)():
        gen.save_pretrained(folder)
    _finish_hf_files(folder, dtype, tokenizer_dir, stop_token_ids)


def save(state_dict: Dict[str, "torch.Tensor"], out_dir: str, version: int, config: dict,
         dtype: Optional["torch.dtype"] = None, extra: Optional[dict] = None,
         timings: Optional[dict] = None, hf_module=None, tokenizer_dir: Optional[str] = None,
         stop_token_ids: Optional[Iterable[int]] = None, max_shard_bytes: int = MAX_SHARD_BYTES) -> str:
    """Write ``out_dir`` (a version folder) atomically; return ``published_path(out_dir)``: its
    model.safetensors, or the folder itself when the weights are sharded.

    With ``hf_module`` (the transformers model whose ``state_dict`` this is) the folder is a Hugging
    Face model folder (see the module docstring); ``tokenizer_dir`` is the tokenizer folder to copy
    files from and ``stop_token_ids`` go into generation_config.json. Without it: model.safetensors.
    ``timings`` (if given) receives to_cpu_ms / write_ms / checksum_ms (a re-read of the files
    transformers wrote; the sharded trainer's ``publish_sharded`` hashes while writing instead)."""
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    if hf_module is not None:
        tensors = _cpu_tensors(state_dict, dtype)
    else:
        tensors = _dedupe(state_dict)
        if dtype is not None:
            tensors = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in tensors.items()}
    out_dir = os.path.abspath(out_dir)
    tmp = f"{out_dir}.tmp-{os.getpid()}-{time.monotonic_ns()}"
    os.makedirs(tmp)
    try:
        t1 = time.perf_counter()
        if hf_module is not None:
            _write_hf(tmp, hf_module, tensors, max_shard_bytes, dtype, tokenizer_dir, stop_token_ids)
        else:
            save_file(tensors, os.path.join(tmp, WEIGHTS), metadata={"format": "pt", "floe_version": str(version)})
        del tensors
        t2 = time.perf_counter()
        algo = checksum.default_algorithm()
        names = _list_files(tmp)
        files = {n: {checksum.RECORD_KEY[algo]: d, "bytes": os.path.getsize(os.path.join(tmp, n))}
                 for n, d in zip(names, checksum.hash_files([os.path.join(tmp, n) for n in names], algo))}
        t3 = time.perf_counter()
        finish_folder(tmp, out_dir, version, config, "hf" if hf_module is not None else "floe", files, algo, extra)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if timings is not None:
        timings.update(to_cpu_ms=round((t1 - t0) * 1e3, 1), write_ms=round((t2 - t1) * 1e3, 1),
                       checksum_ms=round((t3 - t2) * 1e3, 1), checksum=algo)
    return published_path(out_dir)


def publish(state_dict, publish_dir: str, version: int, config: dict, **kw) -> str:
    return save(state_dict, version_dir(publish_dir, version), version, config, **kw)


def publish_policy(policy, publish_dir: str, version: int, **kw) -> str:
    """Publish ``policy`` as ``<publish_dir>/v<version>``: an HF model folder for ``hf:`` policies
    (with the policy's tokenizer files and stop ids), model.safetensors for the tiny one."""
    return save_policy(policy, version_dir(publish_dir, version), version, **kw)


def save_policy(policy, out_dir: str, version: int, state_dict=None, **kw) -> str:
    """Write ``policy`` (its own ``state_dict()``, or the full ``state_dict`` given: a sharded
    trainer gathers one on rank 0) as the version folder ``out_dir``."""
    if getattr(policy, "kind", None) == "hf":
        tok = policy.tokenizer
        kw.setdefault("hf_module", policy.module)
        kw.setdefault("tokenizer_dir", getattr(tok, "folder", None))  # None for the byte tokenizer
        kw.setdefault("stop_token_ids", list(getattr(tok, "stop_token_ids", []) or []))
    return save(policy.state_dict() if state_dict is None else state_dict, out_dir, version, policy.config_dict(), **kw)


# ------------------------------------------------------------------------------ reading
def folder_of(path: str) -> str:
    """A version folder, or any file in one (model.safetensors, the index, a shard) -> the folder."""
    return os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or ".")


def published_path(folder: str) -> str:
    """What a publish answers (the trainer's ``path``): the folder's model.safetensors when the
    weights are one file (what older clients expect), the folder itself when they are sharded."""
    return folder if os.path.exists(os.path.join(folder, INDEX)) else os.path.join(folder, WEIGHTS)


def _weights_entry(folder: str) -> str:
    index = os.path.join(folder, INDEX)
    return index if os.path.exists(index) else os.path.join(folder, WEIGHTS)


def resolve(path: str) -> Tuple[str, str]:
    """A version folder or one of its weight files -> (weights path: model.safetensors, the index
    or the file given, sidecar path)."""
    if os.path.isdir(path):
        return _weights_entry(path), os.path.join(path, SIDECAR)
    folder = os.path.dirname(path) or "."
    return path, os.path.join(folder, SIDECAR)


def read_meta(path: str) -> dict:
    _, side = resolve(path)
    with open(side) as f:
        return json.load(f)


def _weight_files(path: str) -> Tuple[str, Optional[str], List[str]]:
    """-> (folder, index name or None, safetensors names relative to the folder) for ``path``."""
    weights, _ = resolve(path)
    folder = os.path.dirname(os.path.abspath(weights))
    name = os.path.basename(weights)
    index = os.path.join(folder, INDEX)
    if name == INDEX or (name.endswith(".safetensors") and name != WEIGHTS and os.path.exists(index)
                         and name in _weight_names(folder)):
        if not os.path.exists(index):
            raise FileNotFoundError(f"no weights at {index}")
        return folder, INDEX, _weight_names(folder)[1:]
    if not os.path.exists(weights):
        raise FileNotFoundError(f"no weights at {weights}; expected <dir>/v<version>/{WEIGHTS} "
                                f"or {INDEX} + shards")
    return folder, None, [name]


def _algo(meta: dict) -> str:
    return str(meta.get("checksum") or checksum.SHA256)  # floe-checkpoint-2 folders: sha256


def _listed(folder: str, files: Dict[str, dict], names: Iterable[str]) -> List[str]:
    """The paths of ``names``, each listed in ``files``, present and of the listed size."""
    paths = []
    for n in names:
        rec = files.get(n)
        p = os.path.join(folder, n)
        if rec is None:
            raise ValueError(f"{p}: not listed in {SIDECAR} 'files'; the folder does not match its sidecar")
        if not os.path.isfile(p):
            raise ValueError(f"{p}: listed in {SIDECAR} but missing")
        size = os.path.getsize(p)
        if rec.get("bytes") is not None and size != int(rec["bytes"]):
            raise ValueError(f"{p}: {size} bytes but {SIDECAR} says {rec['bytes']} (checksum not checked)")
        paths.append(p)
    return paths


def _check_files(folder: str, files: Dict[str, dict], names: Optional[Iterable[str]] = None,
                 algo: str = checksum.SHA256) -> Tuple[int, int]:
    """Verify ``files`` ({name: {xxh3_128 | sha256, bytes}}, or just the listed ``names``) in
    ``folder``; raise ValueError naming the first file that is missing or does not match."""
    names = sorted(files) if names is None else list(names)
    paths = _listed(folder, files, names)
    wants = [checksum.record_digest(files[n], algo) for n in names]
    by_algo: Dict[str, List[int]] = {}
    for i, (a, _) in enumerate(wants):
        by_algo.setdefault(a, []).append(i)
    for a, idx in by_algo.items():
        for i, got in zip(idx, checksum.hash_files([paths[i] for i in idx], a)):
            if got != wants[i][1]:
                raise ValueError(f"{paths[i]}: {a} {got[:12]}… does not match {SIDECAR} ({wants[i][1][:12]}…)")
    return len(paths), sum(os.path.getsize(p) for p in paths)


def _verify_records(folder: str, meta: dict, weight_names: List[str], index: Optional[str]) -> Optional[Dict[str, dict]]:
    """The `files` records the weights must match (None: nothing to verify); checks every
    weight file is listed."""
    files = meta.get("files")
    if isinstance(files, dict) and files:
        for n in ([index] if index else []) + weight_names:
            if n not in files:
                raise ValueError(f"{os.path.join(folder, n)}: not listed in {SIDECAR} 'files'")
        return files
    if meta.get("sha256"):  # floe-checkpoint-1: the one safetensors file
        if index or len(weight_names) != 1:
            raise ValueError(f"{folder}: {SIDECAR} has one sha256 but the weights are sharded")
        return {weight_names[0]: {"sha256": meta["sha256"], "bytes": meta.get("bytes")}}
    return None


def verify_folder(path: str) -> dict:
    """Check every file ``checkpoint.json`` lists against its checksum (xxh3-128 or sha256, as
    the sidecar's ``checksum`` / each record says; floe-checkpoint-1: its model.safetensors sha256).
    -> {files, bytes}; raises ValueError naming a file that does not match (or a weights file the
    sidecar does not list), FileNotFoundError without a sidecar."""
    folder = folder_of(path)
    side = os.path.join(folder, SIDECAR)
    if not os.path.exists(side):
        raise FileNotFoundError(f"no {SIDECAR} in {folder}")
    with open(side) as f:
        meta = json.load(f)
    files = meta.get("files")
    if isinstance(files, dict) and files:
        present = [n for n in _list_files(folder) if n.endswith(".safetensors") or n == INDEX]
        for n in present:
            if n not in files:
                raise ValueError(f"{os.path.join(folder, n)}: not listed in {SIDECAR} 'files'")
        n, b = _check_files(folder, files, algo=_algo(meta))
    elif meta.get("sha256"):
        n, b = _check_files(folder, {WEIGHTS: {"sha256": meta["sha256"], "bytes": meta.get("bytes")}})
    else:
        raise ValueError(f"{side}: lists no files and no sha256; nothing to verify")
    return {"files": n, "bytes": b}


def load(path: str, verify: bool = True, timings: Optional[dict] = None, buffers=None
         ) -> Tuple[dict, Dict[str, "torch.Tensor"]]:
    """A version folder (either layout, any format) or one of its weight files -> (sidecar
    metadata ({} without one), state dict on CPU). With ``verify`` every file the sidecar lists is
    checked (floe-checkpoint-1: the sha256 of model.safetensors); a mismatch raises ValueError
    naming the file. Each safetensors file is read ONCE (in pieces, by ``READ_THREADS`` threads),
    into one buffer that is hashed and then viewed as tensors (several files at a time); the small
    files are hashed on their own.
    ``timings`` gets read_ms (the weight files: read + checksum + views, in parallel),
    checksum_ms (the other listed files) and checksum (the algorithm). ``buffers``
    (``weights_io.PinnedBuffers``): the files are read into its buffers, by file name."""
    from concurrent.futures import ThreadPoolExecutor

    from . import weights_io

    folder, index, names = _weight_files(path)
    side = os.path.join(folder, SIDECAR)
    meta: dict = {}
    if os.path.exists(side):
        with open(side) as f:
            meta = json.load(f)
    algo = _algo(meta)
    t0 = time.perf_counter()
    records = _verify_records(folder, meta, names, index) if verify else None
    if records is not None:
        others = sorted(n for n in records if n not in names)
        _listed(folder, records, names)  # sizes first: a truncated file is named before anything is read
        _check_files(folder, records, others, algo=algo)
    t1 = time.perf_counter()

    chunks = ThreadPoolExecutor(max_workers=READ_THREADS)  # the pieces of every file, read in parallel

    def read(n):
        p = os.path.join(folder, n)
        into = (lambda size: buffers.get(n, size)) if buffers is not None else None
        if records is None:
            return weights_io.read_file(p, pool=chunks, into=into)
        a, want = checksum.record_digest(records[n], algo)
        return weights_io.read_file(p, a, want, records[n].get("bytes"), pool=chunks, into=into)

    try:
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(names)))) as pool:
            parts = list(pool.map(read, names))
    finally:
        chunks.shutdown()
    sd: Dict[str, "torch.Tensor"] = {}
    for n, part in zip(names, parts):
        dup = sorted(set(part) & set(sd))
        if dup:
            raise ValueError(f"{os.path.join(folder, n)}: tensors {dup[:3]} are also in another shard")
        sd.update(part)
    if index:
        with open(os.path.join(folder, index)) as f:
            wanted = set(json.load(f).get("weight_map", {}))
        if wanted != set(sd):
            raise ValueError(f"{os.path.join(folder, index)}: the shards hold {len(sd)} tensors, the index lists "
                             f"{len(wanted)} (e.g. missing {sorted(wanted - set(sd))[:3]})")
    if timings is not None:
        timings.update(checksum_ms=round((t1 - t0) * 1e3, 1), read_ms=round((time.perf_counter() - t1) * 1e3, 1),
                       checksum=algo if records is not None else None)
    return meta, sd


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m floe_engine.checkpoint", description="floe checkpoint folders")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="check every file checkpoint.json lists; one JSON line, exit 1 on a mismatch")
    v.add_argument("folder")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    folder = folder_of(a.folder)
    try:
        res = verify_folder(folder)
        with open(os.path.join(folder, SIDECAR)) as f:
            meta = json.load(f)
    except (ValueError, FileNotFoundError, OSError) as e:
        print(json.dumps({"ok": False, "folder": folder, "error": str(e)}), flush=True)
        print(f"checkpoint verify: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"ok": True, "folder": folder, "format": meta.get("format", FORMAT_V1),
                      "version": meta.get("version"), **res, "ms": round((time.perf_counter() - t0) * 1e3, 1)}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
