"""The Q8_0 copy of the real default model: its logits are the original's bit for bit on this
build (else multi-sequence decoding keeps the original file), and the check that says so
catches a copy that differs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from functools import partial

from ragleak.rag.exact_q8 import TYPE_Q8_0, copy_path, exact_copy, read_layout, rewrite_q5_0_as_q8_0
from ragleak.rag.models import model_path
from ragleak.rag.multiseq import LlamaMultiSequence, logits_match

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def source():
    return model_path("qwen2.5-coder-0.5b")


def test_the_verified_copy_is_what_multi_sequence_decoding_loads(source):
    path, why = exact_copy(source, partial(logits_match, n_threads=1))
    assert path == copy_path(source) and "verified exact" in why, why
    verdict = json.loads(path.with_suffix(".verdict.json").read_text())
    assert verdict["exact"] and verdict["tensors_rewritten"] == 133
    assert {t.ggml_type for t in read_layout(path).tensors} >= {TYPE_Q8_0}
    assert (verdict["copy_size"], verdict["copy_mtime_ns"]) == (path.stat().st_size, path.stat().st_mtime_ns)
    decoder = LlamaMultiSequence(source, 1)
    try:
        decoder.prepare()
        assert decoder.weights == why and decoder.model_path == source
    finally:
        decoder.close()


def test_a_copy_that_differs_is_caught_and_not_used(source, tmp_path, monkeypatch):
    tampered = tmp_path / "tampered.gguf"
    rewrite_q5_0_as_q8_0(source, tampered)
    layout = read_layout(tampered)
    # one weight of the first layer's query projection, one code step off
    w = next(t for t in layout.tensors if t.name == b"blk.0.attn_q.weight")
    with open(tampered, "r+b") as f:
        f.seek(layout.data_start + w.offset + 2)
        code = np.frombuffer(f.read(1), dtype=np.int8)[0]
        f.seek(layout.data_start + w.offset + 2)
        f.write(np.int8(code + 1 if code < 15 else code - 1).tobytes())
    exact, detail = logits_match(source, tampered, 1)
    assert not exact and "differ" in detail

    # a stored verdict of "not exact" sends the decoder back to the original file
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home"))
    compared = []

    def differs(a, b):
        compared.append((a, b))
        return False, "1 of 70 probe logit rows differ"

    path, why = exact_copy(source, differs)
    assert path == source and "differed" in why and not copy_path(source).exists()
    assert compared == [(source, copy_path(source))]
    assert json.loads(copy_path(source).with_suffix(".verdict.json").read_text())["exact"] is False
    assert exact_copy(source, differs) == (source, why) and len(compared) == 1  # the verdict is kept
    # a verified copy changed afterwards is checked again
    monkeypatch.setenv("RAGLEAK_HOME", str(tmp_path / "home2"))
    same = []
    path, why = exact_copy(source, lambda a, b: same.append(b) or (True, "probe rows equal"))
    assert path == copy_path(source) and len(same) == 1
    assert exact_copy(source, lambda a, b: same.append(b) or (True, "probe rows equal"))[0] == path and len(same) == 1
    with open(path, "r+b") as f:  # the copy touched after its check
        f.seek(0, 2)
        f.write(b"\0")
    assert exact_copy(source, lambda a, b: same.append(b) or (True, "probe rows equal"))[0] == path and len(same) == 2
