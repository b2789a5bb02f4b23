"""The explicit run context: seeds and named RNG streams travel here, never in globals."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np


@dataclass
class RunContext:
    seed: int = 0
    _streams: dict[str, np.random.Generator] = field(default_factory=dict, repr=False)

    def rng(self, name: str) -> np.random.Generator:
        """An independent, reproducible stream per name (e.g. one per defense)."""
        if name not in self._streams:
            salt = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
            self._streams[name] = np.random.default_rng([self.seed, salt])
        return self._streams[name]
