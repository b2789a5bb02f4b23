"""The Q5_0 -> Q8_0 rewrite: lossless block by block, and a GGUF whose layout is the source's
with only those tensors changed (on a small GGUF written here; the real model's copy and its
logit check are in ``test_exact_q8_model.py``)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragleak.rag.exact_q8 import (
    GGUFLayoutError,
    TYPE_Q5_0,
    TYPE_Q8_0,
    q5_0_to_q8_0,
    read_layout,
    rewrite_q5_0_as_q8_0,
)


def dequantize_q5_0(block: bytes) -> np.ndarray:
    """ggml's dequantize_row_q5_0 for one block, written out weight by weight."""
    d = np.frombuffer(block[0:2], dtype="<f2")[0].astype(np.float32)
    qh = int.from_bytes(block[2:6], "little")
    out = np.zeros(32, dtype=np.float32)
    for j in range(16):
        low = (block[6 + j] & 0x0F) | (((qh >> j) & 1) << 4)
        high = (block[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)
        out[j], out[j + 16] = (low - 16) * d, (high - 16) * d
    return out


def dequantize_q8_0(block: bytes) -> np.ndarray:
    d = np.frombuffer(block[0:2], dtype="<f2")[0].astype(np.float32)
    return np.frombuffer(block[2:34], dtype=np.int8).astype(np.float32) * d


finite_half = st.floats(min_value=-60000, max_value=60000, allow_nan=False, width=16)


@settings(max_examples=200, deadline=None)
@given(scales=st.lists(finite_half, min_size=1, max_size=6), data=st.data())
def test_every_q5_0_block_becomes_a_q8_0_block_of_the_same_weights(scales, data):
    blocks = b"".join(np.float16(s).tobytes() + data.draw(st.binary(min_size=20, max_size=20)) for s in scales)
    converted = q5_0_to_q8_0(np.frombuffer(blocks, dtype=np.uint8)).tobytes()
    assert len(converted) == 34 * len(scales)
    for i in range(len(scales)):
        q5, q8 = blocks[22 * i:22 * (i + 1)], converted[34 * i:34 * (i + 1)]
        assert q8[:2] == q5[:2]  # the scale, bit for bit
        codes = np.frombuffer(q8[2:], dtype=np.int8)
        assert codes.min() >= -16 and codes.max() <= 15
        np.testing.assert_array_equal(dequantize_q8_0(q8), dequantize_q5_0(q5))


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def write_gguf(path: Path, tensors: list[tuple[bytes, tuple[int, ...], int, bytes]], alignment: int = 32) -> None:
    """A GGUF v3 with a string, a u32 alignment, an array of strings and an array of floats as
    metadata, then ``tensors`` (name, dims, ggml type, data)."""
    kv = (_string(b"general.name") + struct.pack("<I", 8) + _string(b"tiny")
          + _string(b"general.alignment") + struct.pack("<II", 4, alignment)
          + _string(b"tokenizer.tokens") + struct.pack("<IIQ", 9, 8, 2) + _string(b"a") + _string(b"bc")
          + _string(b"scores") + struct.pack("<IIQ", 9, 6, 3) + struct.pack("<3f", 0.5, 1.5, -2.0))
    infos, offset = b"", 0
    for name, dims, ggml_type, data in tensors:
        infos += _string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", ggml_type, offset)
        offset += len(data) + (-len(data)) % alignment
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 4) + kv + infos
    body = b"".join(data + b"\0" * ((-len(data)) % alignment) for *_, data in tensors)
    path.write_bytes(head + b"\0" * ((-len(head)) % alignment) + body)


def test_the_rewrite_changes_only_the_q5_0_tensors(tmp_path):
    rng = np.random.default_rng(0)
    q5 = b"".join(np.float16(rng.normal()).tobytes() + rng.bytes(20) for _ in range(6))  # 6 blocks: 192 weights
    norm = np.arange(7, dtype=np.float32).tobytes()
    q6k = rng.bytes(210)  # one Q6_K super-block, copied as is
    source, target = tmp_path / "m.gguf", tmp_path / "out" / "m-q8.gguf"
    write_gguf(source, [(b"norm", (7,), 0, norm), (b"w", (64, 3), TYPE_Q5_0, q5), (b"down", (256,), 14, q6k)])

    assert rewrite_q5_0_as_q8_0(source, target) == 1
    before, after = read_layout(source), read_layout(target)
    assert after.metadata == before.metadata and after.n_metadata == 4 and after.alignment == 32
    assert [t.ggml_type for t in after.tensors] == [0, TYPE_Q8_0, 14]
    assert [(t.name, t.dims) for t in after.tensors] == [(t.name, t.dims) for t in before.tensors]
    raw = target.read_bytes()

    def data(t):
        assert (after.data_start + t.offset) % 32 == 0
        return raw[after.data_start + t.offset:after.data_start + t.offset + t.n_bytes()]

    norm_t, w_t, down_t = after.tensors
    assert data(norm_t) == norm and data(down_t) == q6k
    converted = data(w_t)
    for i in range(6):
        np.testing.assert_array_equal(dequantize_q8_0(converted[34 * i:34 * (i + 1)]),
                                      dequantize_q5_0(q5[22 * i:22 * (i + 1)]))
    assert not list(target.parent.glob(".*.tmp"))  # written through a temp file, renamed


def test_a_file_the_rewrite_cannot_lay_out_is_refused_and_nothing_is_left(tmp_path):
    source, target = tmp_path / "m.gguf", tmp_path / "out" / "m-q8.gguf"
    write_gguf(source, [(b"w", (32,), TYPE_Q5_0, bytes(22)), (b"odd", (4,), 99, bytes(4))])
    with pytest.raises(GGUFLayoutError, match="ggml type 99"):
        rewrite_q5_0_as_q8_0(source, target)
    assert not target.exists() and not list(target.parent.glob("*"))
    (tmp_path / "junk.gguf").write_bytes(b"GGML" + bytes(40))
    with pytest.raises(GGUFLayoutError, match="not a GGUF"):
        read_layout(tmp_path / "junk.gguf")
    truncated = tmp_path / "short.gguf"
    truncated.write_bytes(source.read_bytes()[:30])
    with pytest.raises(GGUFLayoutError):
        read_layout(truncated)
