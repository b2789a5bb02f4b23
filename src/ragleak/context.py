"""The explicit run context: seeds, named RNG streams and the run's Stack travel here, never in globals."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ragleak.errors import ConfigError

if TYPE_CHECKING:
    from ragleak.stack import Stack


@dataclass
class RunContext:
    seed: int = 0
    stack: "Stack | None" = None
    _streams: dict[str, np.random.Generator] = field(default_factory=dict, repr=False)

    def rng(self, name: str) -> np.random.Generator:
        """An independent, reproducible stream per name (e.g. one per defense)."""
        if name not in self._streams:
            salt = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
            self._streams[name] = np.random.default_rng([self.seed, salt])
        return self._streams[name]

    def require_stack(self, who: str) -> "Stack":
        """The run's stack; ``who`` (e.g. "attack ikea") needs one to build its models."""
        if self.stack is None:
            raise ConfigError(f"{who} needs a stack in its run context (Stack(config).context(seed))")
        return self.stack
