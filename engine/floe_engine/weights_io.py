"""Safetensors files written and read in one pass, with the checksum taken from the same bytes.

Why not ``safetensors.torch.save_file`` + a second read to hash: publishing an 8 GB folder then
costs the write *and* a full re-read at sha256's ~1 GB/s (5 s measured on the H200), and every
engine re-reads and re-hashes it again before loading. Here:

* ``SafetensorsWriter`` writes the standard format (8-byte little-endian header length, JSON
  header padded with spaces to a multiple of 8, then the tensors' bytes back to back, in the
  header's offset order) tensor by tensor as the tensors arrive, feeding each tensor's bytes
  to the hasher as they are written. Any safetensors reader (transformers, vLLM, SGLang)
  loads the file; the digest equals the digest of the whole file.
* ``read_file`` reads a file once into one buffer, hashes that buffer, and returns the tensors
  as views into it (no second copy); a digest that does not match raises before any tensor is
  returned. An engine on a GPU reads into ``PinnedBuffers`` kept between updates, so the copy
  to the GPU runs from page-locked memory (from pageable memory it is staged by the driver).
* The checksum is XXH3-128 (``xxhash``; ~12 GB/s on one core here against sha256's ~1.1 GB/s,
  and it releases the GIL, so files hash in parallel threads). It is what ``xxh128sum FILE``
  prints. Without the ``xxhash`` package, writers fall back to sha256 (still computed while
  writing); a reader asked to check an xxh3-128 folder without it raises, saying what to
  install. It detects corruption (disk, copy, truncation), not tampering: a folder on a
  filesystem the trainer and engines share is trusted, as it was with sha256.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from .checksum import new_hasher

DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
          torch.bool: "BOOL"}
for _n, _s in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"), ("uint16", "U16"), ("uint32", "U32"),
               ("uint64", "U64")):
    if hasattr(torch, _n):
        DTYPES[getattr(torch, _n)] = _s
FROM_NAME = {v: k for k, v in DTYPES.items()}


def _nbytes(dtype: torch.dtype, shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n * torch.empty((), dtype=dtype).element_size()


def file_layout(specs: Sequence[Tuple[str, torch.dtype, Sequence[int]]]) -> List[Tuple[str, torch.dtype, tuple, int]]:
    """The order tensors take in a file: widest dtype first (so every tensor's offset is aligned
    to its element size, as safetensors itself orders them), then by name. -> (name, dtype, shape, nbytes)."""
    rows = [(n, d, tuple(int(x) for x in s), _nbytes(d, s)) for n, d, s in specs]
    size = {d: torch.empty((), dtype=d).element_size() for _, d, _, _ in rows}
    return sorted(rows, key=lambda r: (-size[r[1]], r[0]))


class SafetensorsWriter:
    """One safetensors file written tensor by tensor in ``file_layout`` order (``write`` must be
    called in that order, with exactly the declared dtype and shape), hashing the bytes as they
    go to disk. ``close()`` -> (bytes, hex digest)."""

    def __init__(self, path: str, specs: Sequence[Tuple[str, torch.dtype, Sequence[int]]], algo: str,
                 metadata: Optional[Dict[str, str]] = None):
        self.path = path
        self.layout = file_layout(specs)
        header: Dict[str, dict] = {"__metadata__": dict(metadata or {"format": "pt"})}
        off = 0
        for name, dtype, shape, nb in self.layout:
            if dtype not in DTYPES:
                raise ValueError(f"{name}: dtype {dtype} has no safetensors name")
            header[name] = {"dtype": DTYPES[dtype], "shape": list(shape), "data_offsets": [off, off + nb]}
            off += nb
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors pads it
        self.hasher = new_hasher(algo)
        self.algo = algo
        self.f = open(path, "wb", buffering=0)
        self.bytes = 0
        self._put(struct.pack("<Q", len(raw)) + raw)
        self.next = 0

    def _put(self, mv) -> None:
        mv = memoryview(mv).cast("B")
        self.hasher.update(mv)
        while len(mv):  # raw write: loop on short writes
            n = self.f.write(mv)
            mv = mv[n:]
            self.bytes += n

    def write(self, name: str, t: torch.Tensor) -> None:
        want, dtype, shape, nb = self.layout[self.next]
        if name != want or t.dtype != dtype or tuple(t.shape) != shape:
            raise ValueError(f"{self.path}: expected {want} {dtype} {list(shape)} next, got {name} {t.dtype} "
                             f"{list(t.shape)}")
        self.next += 1
        if nb:
            t = t.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            self._put(t.contiguous().reshape(-1).view(torch.uint8).numpy())

    def close(self) -> Tuple[int, str]:
        if self.next != len(self.layout):
            self.abort()
            raise ValueError(f"{self.path}: {len(self.layout) - self.next} tensors were never written")
        self.f.close()
        return self.bytes, self.hasher.hexdigest()

    def abort(self) -> None:
        try:
            self.f.close()
        except OSError:
            pass


READ_CHUNK = 256 << 20


class PinnedBuffers:
    """Page-locked host buffers for ``read_file``, one per file name, kept from one load to the
    next (a published version's files keep their names): pinning 8 GB costs seconds, once, and
    the copy to the GPU then runs at the link's speed. The tensors of one load are views into
    these buffers, so they are valid until the next load of the same names: the caller copies
    them out (the engine's weight swap does) and serialises its loads. Needs CUDA."""

    def __init__(self) -> None:
        self._bufs: Dict[str, torch.Tensor] = {}

    def get(self, key: str, size: int) -> torch.Tensor:
        buf = self._bufs.get(key)
        if buf is None or buf.numel() < size:
            self._bufs.pop(key, None)  # the old one is freed before the larger one is pinned
            buf = self._bufs[key] = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        return buf[:size]

    @property
    def nbytes(self) -> int:
        return sum(b.numel() for b in self._bufs.values())


def read_file(path: str, algo: Optional[str] = None, want: Optional[str] = None,
              want_bytes: Optional[int] = None, pool=None, into=None) -> Dict[str, torch.Tensor]:
    """Read the safetensors file ``path`` once; with ``algo`` and ``want`` check its digest
    first (ValueError naming the file on a mismatch). -> {name: tensor}, CPU views into one
    buffer in the file's dtypes. ``pool`` (a thread pool): the file is read in ``READ_CHUNK``
    pieces in parallel (a 4 GB file read by one thread runs at ~2-3 GB/s from the page cache,
    most of it first-touch page faults on the new buffer). ``into(size)``: the uint8 buffer to
    read into (``PinnedBuffers``); by default a new one."""
    size = os.path.getsize(path)
    if want_bytes is not None and size != int(want_bytes):
        raise ValueError(f"{path}: {size} bytes but checkpoint.json says {want_bytes} (checksum not checked)")
    buf = into(size) if into is not None else torch.empty(size, dtype=torch.uint8)
    mv = memoryview(buf.numpy())
    fd = os.open(path, os.O_RDONLY)
    try:
        def piece(start: int) -> None:
            end = min(size, start + READ_CHUNK)
            got = start
            while got < end:
                n = os.preadv(fd, [mv[got:end]], got)
                if not n:
                    raise ValueError(f"{path}: file ended after {got} of {size} bytes")
                got += n
        starts = range(0, size, READ_CHUNK)
        if pool is not None and size > READ_CHUNK:
            list(pool.map(piece, starts))
        else:
            for st in starts:
                piece(st)
    finally:
        os.close(fd)
    if algo and want is not None:
        h = new_hasher(algo)
        h.update(mv)
        if h.hexdigest() != want:
            raise ValueError(f"{path}: {algo} {h.hexdigest()[:12]}… does not match checkpoint.json ({str(want)[:12]}…)")
    return parse(buf, path)


def parse(buf: torch.Tensor, path: str = "<buffer>") -> Dict[str, torch.Tensor]:
    """The tensors of a safetensors file held in the uint8 tensor ``buf`` (views into it)."""
    if buf.numel() < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
    (hlen,) = struct.unpack("<Q", bytes(buf[:8].tolist()))
    if 8 + hlen > buf.numel():
        raise ValueError(f"{path}: header length {hlen} runs past the end of the file")
    header = json.loads(bytes(buf[8:8 + hlen].numpy().tobytes()).decode())
    base, end_of_data = 8 + hlen, buf.numel() - 8 - hlen
    out: Dict[str, torch.Tensor] = {}
    spans = []
    for name, rec in header.items():
        if name == "__metadata__":
            continue
        dtype = FROM_NAME.get(rec["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {rec['dtype']} which floe does not read")
        a, b = (int(x) for x in rec["data_offsets"])
        shape = [int(x) for x in rec["shape"]]
        if not (0 <= a <= b <= end_of_data) or b - a != _nbytes(dtype, shape):
            raise ValueError(f"{path}: tensor {name}: offsets {a}..{b} do not fit its shape {shape} {rec['dtype']}")
        spans.append((a, b))
        raw = buf[base + a: base + b]
        esize = torch.empty((), dtype=dtype).element_size()
        if (base + a) % esize:  # an unaligned tensor (not written by safetensors or floe): copy it
            raw = raw.clone()
        out[name] = raw.view(dtype).reshape(shape) if b > a else torch.empty(shape, dtype=dtype)
    spans.sort()
    pos = 0
    for a, b in spans:
        if a != pos:
            raise ValueError(f"{path}: tensor data is not contiguous at byte {a} (expected {pos})")
        pos = b
    if pos != end_of_data:
        raise ValueError(f"{path}: {end_of_data - pos} bytes after the last tensor")
    return out


def plan_files(entries: Sequence[Tuple[str, int]], world: int, max_shard_bytes: int, files_per_rank: int = 1
               ) -> List[List[str]]:
    """Split tensors ``entries`` ([(name, bytes)] in state-dict order) into files for ``world``
    writers: at least ``world * files_per_rank`` files (and enough that none exceeds
    ``max_shard_bytes`` where tensors allow), never more files than tensors; whole tensors,
    balanced by bytes (largest first, each to the lightest file). File k is written by rank
    ``k % world``. Each file lists its names in state-dict order. Every rank computes the same plan."""
    total = sum(b for _, b in entries)
    k = max(world * max(1, files_per_rank), -(-total // max(1, int(max_shard_bytes))))
    k = max(1, min(k, len(entries)))
    load = [0] * k
    owner: Dict[str, int] = {}
    for name, nb in sorted(entries, key=lambda e: (-e[1], e[0])):
        f = min(range(k), key=lambda i: (load[i], i))
        owner[name] = f
        load[f] += nb
    files: List[List[str]] = [[] for _ in range(k)]
    for name, _ in entries:
        files[owner[name]].append(name)
    return [f for f in files if f]


def shard_names(k: int) -> List[str]:
    """Hugging Face's file names for k weight files (one file: model.safetensors)."""
    if k == 1:
        return ["model.safetensors"]
    return [f"model-{i + 1:05d}-of-{k:05d}.safetensors" for i in range(k)]


def write_index(path: str, weight_map: Dict[str, str], total_size: int) -> None:
    with open(path, "w") as f:
        json.dump({"metadata": {"total_size": int(total_size)},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")

