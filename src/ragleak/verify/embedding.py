"""A designed embedding for neighbouring-corpus tests: every passage gets exactly the similarity
to the test query that its scenario assigns, through the real FAISS index code.

The query is the unit vector e_0; a passage with designed score s and slot i (its own axis) is
s * e_0 + sqrt(1 - s^2) * e_i, so the index's inner product returns s exactly (up to float32).
Any other text (a synthetic passage a defense builds, a rewritten prompt) gets a deterministic
unit vector orthogonal to e_0 drawn from a hash of the text: similarity 0 to the query, the
same vector every time.
"""

from __future__ import annotations

import hashlib
import math
from typing import Mapping, Sequence

import numpy as np

from ragleak.errors import ConfigError


class DesignedEmbedder:
    """An ``Embedder`` whose vectors realise a table of designed query similarities."""

    name = "verify-designed"

    def __init__(self, query: str, scores: Mapping[str, float]) -> None:
        if any(not -1.0 <= s <= 1.0 for s in scores.values()):
            raise ConfigError("designed similarities must lie in [-1, 1]")
        self.query = query
        self.dim = len(scores) + 16
        self._vectors: dict[str, np.ndarray] = {query: self._axis(0)}
        for slot, (text, score) in enumerate(scores.items(), start=1):
            vec = score * self._axis(0) + math.sqrt(max(0.0, 1.0 - score * score)) * self._axis(slot)
            self._vectors[text] = vec.astype(np.float32)

    def _axis(self, i: int) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        v[i] = 1.0
        return v

    def _hashed(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim)
        v[0] = 0.0
        return (v / np.linalg.norm(v)).astype(np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] if t in self._vectors else self._hashed(t) for t in texts])
