"""Byte-level tokenizer shared by every floe policy.

ids 0..255 are the raw bytes, 256 is EOS, 257 BOS, 258 PAD (vocabulary 259).
Hugging Face models used by floe keep this mapping and simply have a larger
embedding table; ids >= 259 are never produced (see ``policy.Policy``).
"""
from __future__ import annotations

from typing import Iterable, List, Sequence

EOS_ID = 256
BOS_ID = 257
PAD_ID = 258
VOCAB_SIZE = 259
SPECIAL_IDS = (EOS_ID, BOS_ID, PAD_ID)


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
