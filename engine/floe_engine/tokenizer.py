"""Tokenizers of floe policies: raw bytes for the tiny policy, a Hugging Face tokenizer
folder (``tokenizer.json`` + ``tokenizer_config.json``) for real models.

Byte tokenizer: ids 0..255 are the raw bytes, 256 is EOS, 257 BOS, 258 PAD
(vocabulary 259); their texts ``<|eos|>``, ``<|bos|>``, ``<|pad|>`` stand for them
in rendered chat templates.

``load_tokenizer(spec)`` gives either kind behind one interface: ``encode`` (text ->
ids, special-token texts become their ids, no BOS/EOS added), ``decode`` (ids -> text,
special tokens kept as their text, invalid UTF-8 as U+FFFD), ``eos_token_id`` (ends a
model turn), ``stop_token_ids``, ``pad_token_id``, ``special_token_ids`` /
``special_token_texts`` (control tokens a model turn must never contain: the raw-format
gate checks them by id and by text), ``vocab_size`` and the folder's ``chat_template``.
Nothing is fetched: a folder is read from disk or the call fails naming what is missing.
"""
from __future__ import annotations

import json
import os
import re
from typing import Dict, Iterable, List, Optional, Sequence

EOS_ID = 256
BOS_ID = 257
PAD_ID = 258
VOCAB_SIZE = 259
SPECIAL_IDS = (EOS_ID, BOS_ID, PAD_ID)
BYTE_SPECIAL_TEXTS = {"<|eos|>": EOS_ID, "<|bos|>": BOS_ID, "<|pad|>": PAD_ID}


def encode(text: str) -> List[int]:
    """UTF-8 bytes of ``text``; no BOS/EOS is added."""
    return list(text.encode("utf-8"))


def to_bytes(ids: Iterable[int]) -> bytes:
    """The raw bytes of ``ids``; special and out-of-range ids are dropped."""
    return bytes(i for i in ids if 0 <= i < 256)


def decode(ids: Iterable[int]) -> str:
    """Text of ``ids`` (invalid UTF-8 becomes U+FFFD, special ids are dropped)."""
    return to_bytes(ids).decode("utf-8", errors="replace")


def validate_ids(ids: Sequence[int], vocab_size: int = VOCAB_SIZE) -> None:
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool) or i < 0 or i >= vocab_size:
            raise ValueError(f"token id {i!r} is outside the vocabulary [0, {vocab_size})")


class ByteTokenizer:
    kind = "byte"
    name = "byte"
    vocab_size = VOCAB_SIZE
    eos_token_id = EOS_ID
    eos_token = "<|eos|>"
    bos_token_id = BOS_ID
    pad_token_id = PAD_ID
    stop_token_ids = [EOS_ID]
    special_token_ids = list(SPECIAL_IDS)
    special_token_texts = list(BYTE_SPECIAL_TEXTS)
    chat_template: Optional[str] = None
    _split = re.compile("(" + "|".join(re.escape(t) for t in BYTE_SPECIAL_TEXTS) + ")")

    def encode(self, text: str) -> List[int]:
        ids: List[int] = []
        for part in self._split.split(text):
            if part in BYTE_SPECIAL_TEXTS:
                ids.append(BYTE_SPECIAL_TEXTS[part])
            elif part:
                ids.extend(part.encode("utf-8"))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        out, run = [], bytearray()
        names = {v: k for k, v in BYTE_SPECIAL_TEXTS.items()}
        for i in ids:
            if 0 <= i < 256:
                run.append(i)
                continue
            out.append(run.decode("utf-8", errors="replace"))
            run = bytearray()
            out.append(names.get(i, f"<|{i}|>"))
        out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)

    def token_text(self, i: int) -> str:
        """One token for logprobs.tokens: the byte as a Latin-1 character, or a special name."""
        return chr(i) if 0 <= i < 256 else {v: k for k, v in BYTE_SPECIAL_TEXTS.items()}.get(i, f"<|{i}|>")

    def describe(self) -> dict:
        return describe(self)


def _token_content(t) -> Optional[str]:
    if t is None or isinstance(t, str):
        return t
    return t.get("content") if isinstance(t, dict) else None


class HFTokenizer:
    """A Hugging Face tokenizer folder through the ``tokenizers`` library (no model hub)."""
    kind = "hf"

    def __init__(self, folder: str):
        try:
            from tokenizers import Tokenizer
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise RuntimeError("a tokenizer folder needs the 'tokenizers' package; run `floe up` "
                               "(it installs engine/requirements.txt into the venv)") from e
        path = os.path.join(folder, "tokenizer.json") if os.path.isdir(folder) else folder
        if not os.path.exists(path):
            raise FileNotFoundError(f"no tokenizer.json at {path}; point policy.tokenizer at a Hugging Face "
                                    "tokenizer folder (floe up builds one for Qwen under .floe/tokenizers/)")
        self.folder = os.path.dirname(os.path.abspath(path))
        self.name = os.path.basename(self.folder)
        self.tok = Tokenizer.from_file(path)
        cfg: dict = {}
        cfg_path = os.path.join(self.folder, "tokenizer_config.json")
        if os.path.exists(cfg_path):
            with open(cfg_path) as f:
                cfg = json.load(f)
        self.config = cfg
        self.vocab_size = self.tok.get_vocab_size(with_added_tokens=True)
        added = self.tok.get_added_tokens_decoder()  # id -> AddedToken
        self.special_token_ids = sorted(i for i, t in added.items() if t.special)
        self.special_token_texts = [added[i].content for i in self.special_token_ids]

        def tid(name: str) -> Optional[int]:
            text = _token_content(cfg.get(name))
            return None if text is None else self.tok.token_to_id(text)

        self.eos_token = _token_content(cfg.get("eos_token"))
        self.eos_token_id = tid("eos_token")
        if self.eos_token_id is None:
            raise ValueError(f"{cfg_path}: eos_token is missing or not in the vocabulary; the engine needs "
                             "the token that ends a model turn")
        self.bos_token_id = tid("bos_token")
        pad = tid("pad_token")
        self.pad_token_id = self.eos_token_id if pad is None else pad
        stops = [self.eos_token_id]
        gen_path = os.path.join(self.folder, "generation_config.json")
        if os.path.exists(gen_path):
            with open(gen_path) as f:
                g = json.load(f).get("eos_token_id")
            for i in (g if isinstance(g, list) else [g] if isinstance(g, int) else []):
                if i not in stops:
                    stops.append(int(i))
        self.stop_token_ids = stops
        template = cfg.get("chat_template")
        if isinstance(template, list):  # [{name, template}, …]: the default one
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        jinja = os.path.join(self.folder, "chat_template.jinja")
        if os.path.exists(jinja):  # transformers 5 writes the template beside the config
            with open(jinja) as f:
                template = f.read()
        self.chat_template = template

    def encode(self, text: str) -> List[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def token_text(self, i: int) -> str:
        return self.tok.id_to_token(i) or f"<|{i}|>"

    def describe(self) -> dict:
        return describe(self)


def describe(t) -> dict:
    """What a client needs to check raw outputs (served by the engine's /health, the renderer's info)."""
    return {"kind": t.kind, "name": t.name, "vocab_size": t.vocab_size, "eos_token_id": t.eos_token_id,
            "eos_token": t.eos_token, "stop_token_ids": list(t.stop_token_ids), "pad_token_id": t.pad_token_id,
            "special_token_ids": [i for i in t.special_token_ids if i != t.eos_token_id],
            "special_token_texts": list(t.special_token_texts)}


Tokenizer = "ByteTokenizer | HFTokenizer"
_cache: Dict[str, object] = {}


def load_tokenizer(spec: Optional[str]):
    """'' / None / 'byte' -> the byte tokenizer; a folder (or its tokenizer.json) -> HFTokenizer."""
    if spec in (None, "", "byte"):
        return ByteTokenizer()
    key = os.path.abspath(spec)
    if key not in _cache:
        _cache[key] = HFTokenizer(spec)
    return _cache[key]
