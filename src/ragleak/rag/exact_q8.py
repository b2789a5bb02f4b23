"""A copy of a GGUF model whose Q5_0 tensors are stored as Q8_0, used only where it computes
bit for bit what the original does (multi-sequence decoding, ``rag.multiseq``).

Why: a Q5_0 block is a half-precision scale ``d`` and 32 five-bit codes ``q``, weights
``d * (q - 16)``. The same weights are a Q8_0 block with the same ``d`` and the signed bytes
``q - 16``: a lossless rewrite. llama.cpp's x86 kernels multiply a Q5_0 block by first unpacking
it to exactly those bytes and then doing what they do for a Q8_0 block (the same scale product,
integer dot and accumulation order: ``ggml_vec_dot_q5_0_q8_0`` and ``ggml_vec_dot_q8_0_q8_0``
for one sequence, llamafile's ``tinyBLAS_Q0_AVX`` for several), so the copy's logits equal the
original's. The Q8_0 kernels skip the unpack: batched decoding of 8 RAG answers ran at 1.55x and
1.60x the decode tokens/s of one-at-a-time decoding on the original file (per CPU-second, two
rounds; 1.22x and 1.30x before, batched on the original file: ``benchmarks/bench_batched.py``).
One sequence alone gains nothing (decode 0.87x, prefill 1.1x here: the copy is 30% larger to read),
so the one-at-a-time generator keeps the original file.

The equality is a property of one llama.cpp build on one CPU (another architecture's kernels may
sum in another order), so it is checked, not assumed: ``exact_copy`` compares both files' logits
bit for bit on a probe (``rag.multiseq.logits_match``: one sequence stepping alone, and several
in lock-step) and hands out the copy only when every row matches. The verdict is kept beside the
copy, keyed by the source file, the copy file as it was checked, the llama.cpp version and the CPU
features it was built for; anything else checks again, and any failure falls back to the
original file, with the reason logged.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np

from ragleak.files import atomic_write_text, atomic_writer, ragleak_home

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
TYPE_Q5_0, TYPE_Q8_0 = 6, 8  # ggml_type ids
Q5_0_BYTES, Q8_0_BYTES = 22, 34  # one block of 32 weights: fp16 scale + codes
# GGUF metadata value types -> struct format of one scalar (8 = string, 9 = array)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
# the ggml_type ids whose block size and bytes this module needs to lay out the data section
_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), TYPE_Q5_0: (32, 22), 7: (32, 24), TYPE_Q8_0: (32, 34),
           10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}


class GGUFLayoutError(ValueError):
    """The file is not a GGUF this module can lay out (a type it does not know, a bad header)."""


@dataclass
class TensorInfo:
    name: bytes
    dims: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the data section

    def n_bytes(self) -> int:
        if self.ggml_type not in _BLOCKS:
            raise GGUFLayoutError(f"tensor {self.name!r}: ggml type {self.ggml_type} is not one this rewrite lays out")
        block, size = _BLOCKS[self.ggml_type]
        return math.prod(self.dims) // block * size


def _read(f: BinaryIO, fmt: str):
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise GGUFLayoutError("the file ends inside its header")
    return struct.unpack(fmt, data)


def _skip_value(f: BinaryIO, value_type: int) -> None:
    if value_type in _SCALARS:
        f.seek(struct.calcsize("<" + _SCALARS[value_type]), os.SEEK_CUR)
    elif value_type == _STRING:
        (length,) = _read(f, "<Q")
        f.seek(length, os.SEEK_CUR)
    elif value_type == _ARRAY:
        item_type, count = _read(f, "<IQ")
        if item_type in _SCALARS:
            f.seek(count * struct.calcsize("<" + _SCALARS[item_type]), os.SEEK_CUR)
        else:
            for _ in range(count):
                _skip_value(f, item_type)
    else:
        raise GGUFLayoutError(f"unknown GGUF metadata type {value_type}")


@dataclass
class GGUFLayout:
    version: int
    metadata: bytes  # the key-value section, verbatim
    n_metadata: int
    alignment: int
    tensors: list[TensorInfo]
    data_start: int


def read_layout(path: Path) -> GGUFLayout:
    """The header of a GGUF (version 2 or 3): its metadata bytes, tensor table and data offset."""
    with open(path, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise GGUFLayoutError(f"{path} is not a GGUF file")
        version, n_tensors, n_kv = _read(f, "<IQQ")
        if version not in (2, 3):
            raise GGUFLayoutError(f"{path}: GGUF version {version} is not supported")
        start, alignment = f.tell(), 32
        for _ in range(n_kv):
            (key_len,) = _read(f, "<Q")
            key = f.read(key_len)
            (value_type,) = _read(f, "<I")
            if key == b"general.alignment" and value_type == 4:
                (alignment,) = _read(f, "<I")
            else:
                _skip_value(f, value_type)
        end = f.tell()
        f.seek(start)
        metadata = f.read(end - start)
        tensors = []
        for _ in range(n_tensors):
            (name_len,) = _read(f, "<Q")
            name = f.read(name_len)
            (n_dims,) = _read(f, "<I")
            dims = _read(f, f"<{n_dims}Q")
            ggml_type, offset = _read(f, "<IQ")
            tensors.append(TensorInfo(name, tuple(dims), ggml_type, offset))
        data_start = f.tell() + (-f.tell()) % alignment
    return GGUFLayout(version, metadata, n_kv, alignment, tensors, data_start)


def q5_0_to_q8_0(blocks: np.ndarray) -> np.ndarray:
    """Q5_0 blocks (rows of 22 bytes: fp16 scale, 4 bytes of fifth bits, 16 bytes of nibbles) as
    Q8_0 blocks (34 bytes: the same scale, the 32 signed codes ``q - 16``), losslessly."""
    b = blocks.reshape(-1, Q5_0_BYTES)
    high = b[:, 2:6].copy().view("<u4")[:, 0].astype(np.uint32)
    nibbles = b[:, 6:22]
    j = np.arange(16, dtype=np.uint32)
    # weight j takes fifth bit j, weight j + 16 fifth bit j + 16 (ggml's dequantize_row_q5_0)
    low_half = (nibbles & 0x0F).astype(np.int16) | (((high[:, None] >> j) & 1) << 4).astype(np.int16)
    high_half = (nibbles >> 4).astype(np.int16) | (((high[:, None] >> (j + 16)) & 1) << 4).astype(np.int16)
    codes = (np.concatenate([low_half, high_half], axis=1) - 16).astype(np.int8)
    return np.concatenate([b[:, 0:2], codes.view(np.uint8)], axis=1)


def rewrite_q5_0_as_q8_0(source: Path, target: Path) -> int:
    """Write ``target``: ``source`` with every Q5_0 tensor stored as Q8_0 (metadata and every
    other tensor byte for byte). Returns the number of tensors rewritten. Atomic: a temp file in
    ``target``'s folder, renamed when complete."""
    layout = read_layout(source)
    out_tensors, offset = [], 0
    for t in layout.tensors:
        new_type = TYPE_Q8_0 if t.ggml_type == TYPE_Q5_0 else t.ggml_type
        info = TensorInfo(t.name, t.dims, new_type, offset)
        out_tensors.append(info)
        offset += info.n_bytes()
        offset += (-offset) % layout.alignment
    with atomic_writer(target) as out, open(source, "rb") as src:
        out.write(GGUF_MAGIC + struct.pack("<IQQ", 3, len(out_tensors), layout.n_metadata) + layout.metadata)
        for t in out_tensors:
            out.write(struct.pack("<Q", len(t.name)) + t.name + struct.pack("<I", len(t.dims)))
            out.write(struct.pack(f"<{len(t.dims)}Q", *t.dims) + struct.pack("<IQ", t.ggml_type, t.offset))
        out.write(b"\0" * ((-out.tell()) % layout.alignment))
        data_start = out.tell()
        for old, new in zip(layout.tensors, out_tensors):
            src.seek(layout.data_start + old.offset)
            raw = src.read(old.n_bytes())
            if len(raw) != old.n_bytes():
                raise GGUFLayoutError(f"{source}: tensor {old.name!r} runs past the end of the file")
            if old.ggml_type == TYPE_Q5_0:
                raw = q5_0_to_q8_0(np.frombuffer(raw, dtype=np.uint8)).tobytes()
            out.write(b"\0" * (data_start + new.offset - out.tell()))
            out.write(raw)
    return sum(t.ggml_type == TYPE_Q5_0 for t in layout.tensors)


@dataclass
class CopyVerdict:
    """Whether a Q8_0 copy computes what its source does, on which build and CPU."""

    source: str
    source_size: int
    source_mtime_ns: int
    llama_cpp: str
    system_info: str
    tensors_rewritten: int
    exact: bool
    detail: str
    copy_size: int = -1  # the copy as it was checked (a copy changed since is checked again)
    copy_mtime_ns: int = -1


def _build_key() -> tuple[str, str]:
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    return llama_cpp.__version__, info.decode() if isinstance(info, bytes) else str(info)


def _file_key(path: Path) -> tuple[int, int]:
    """(size, mtime) of ``path``, (-2, -2) when it is missing (never a stored key)."""
    try:
        stat = path.stat()
    except OSError:
        return -2, -2
    return stat.st_size, stat.st_mtime_ns


def copy_path(source: Path) -> Path:
    return ragleak_home() / "models" / "exact-q8" / f"{source.stem}.q5_0-as-q8_0.gguf"


def exact_copy(source: Path, compare: Callable[[Path, Path], tuple[bool, str]]) -> tuple[Path, str]:
    """The file multi-sequence decoding should load for ``source``: the verified Q8_0 copy
    (made and checked once per source, llama.cpp build and CPU), else ``source`` itself.
    ``compare(source, copy)`` says whether the two give the same logits, and how it knows
    (``rag.multiseq.logits_match``). Returns (path, why)."""
    source = Path(source)
    try:
        stat = source.stat()
        layout = read_layout(source)
    except (OSError, GGUFLayoutError) as exc:
        return source, f"original weights ({exc})"
    if not any(t.ggml_type == TYPE_Q5_0 for t in layout.tensors):
        return source, "original weights (no Q5_0 tensor)"
    target = copy_path(source)
    stamp = target.with_suffix(".verdict.json")
    version, system_info = _build_key()
    key = (str(source), stat.st_size, stat.st_mtime_ns, version, system_info)
    try:
        verdict = CopyVerdict(**json.loads(stamp.read_text(encoding="utf-8")))
        known = (verdict.source, verdict.source_size, verdict.source_mtime_ns, verdict.llama_cpp,
                 verdict.system_info) == key and (not verdict.exact or _file_key(target) == (
                     verdict.copy_size, verdict.copy_mtime_ns))
    except (OSError, ValueError, TypeError):
        known = False
    if not known:
        try:
            rewritten = rewrite_q5_0_as_q8_0(source, target)
            copy_size, copy_mtime_ns = _file_key(target)
            exact, detail = compare(source, target)
            verdict = CopyVerdict(str(source), stat.st_size, stat.st_mtime_ns, version, system_info, rewritten, exact,
                                  detail, copy_size, copy_mtime_ns)
            atomic_write_text(stamp, json.dumps(asdict(verdict), indent=2))
        except Exception as exc:  # no copy, or no verdict: the original file is always correct
            log.warning("no Q8_0 copy of %s (%s); multi-sequence decoding reads the original", source.name, exc)
            return source, f"original weights ({type(exc).__name__}: {exc})"
        if not exact:
            log.warning("the Q8_0 copy of %s is not exact on this build (%s); multi-sequence decoding reads "
                        "the original", source.name, detail)
    if not verdict.exact:
        target.unlink(missing_ok=True)
        return source, f"original weights (the Q8_0 copy differed: {verdict.detail})"
    return target, f"Q5_0 tensors as Q8_0 (verified exact: {verdict.detail})"
