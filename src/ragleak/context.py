"""The explicit run context: seeds, named RNG streams and the run's Stack travel here, never in globals.

Two kinds of randomness draw from it. ``rng(name)`` streams are always reproducible from
``seed`` (an attack's choices, a metric's resampling). ``noise_rng(name)`` streams are a DP
defense's noise, and ``noise`` says where they come from:

* ``fixed-seed``: the same streams as ``rng`` (a grid cell, ``verify``, an attack run): a
  reproducible audit, bit for bit, but whoever knows the seed can replay the noise and tell
  neighbouring corpora apart, so it is no deployment guarantee;
* ``fresh``: a new generator seeded from the operating system's entropy (``os.urandom``) per
  stream, never recorded: what a defense serving real users needs (``ragleak serve``, and the
  Python API's ``build_target`` / ``RAGPipeline`` / ``Defense`` when given no context).

``budgets`` is where a budgeted defense keeps its charges (``defenses.budget_store``): a SQLite
file that survives restarts, or None for an in-memory ledger that ends with the run.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from ragleak.errors import ConfigError

if TYPE_CHECKING:
    from ragleak.stack import Stack

NoiseMode = Literal["fixed-seed", "fresh"]
NOISE_MODES: tuple[NoiseMode, ...] = ("fixed-seed", "fresh")


@dataclass
class RunContext:
    seed: int = 0
    stack: "Stack | None" = None
    noise: NoiseMode = "fixed-seed"
    budgets: Path | None = None
    _streams: dict[str, np.random.Generator] = field(default_factory=dict, repr=False)
    _noise: dict[str, np.random.Generator] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.noise not in NOISE_MODES:
            raise ConfigError(f"unknown noise mode {self.noise!r}; known: {', '.join(NOISE_MODES)}")

    def rng(self, name: str) -> np.random.Generator:
        """An independent, reproducible stream per name (e.g. one per attack)."""
        if name not in self._streams:
            salt = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
            self._streams[name] = np.random.default_rng([self.seed, salt])
        return self._streams[name]

    def noise_rng(self, name: str) -> np.random.Generator:
        """A DP defense's noise stream ``name``: ``rng(name)`` itself under a fixed seed (so a
        seeded run draws exactly what it always drew), else seeded from 256 bits of OS entropy."""
        if self.noise == "fixed-seed":
            return self.rng(name)
        if name not in self._noise:
            self._noise[name] = np.random.default_rng(int.from_bytes(os.urandom(32), "little"))
        return self._noise[name]

    def require_stack(self, who: str) -> "Stack":
        """The run's stack; ``who`` (e.g. "attack ikea") needs one to build its models."""
        if self.stack is None:
            raise ConfigError(f"{who} needs a stack in its run context (Stack(config).context(seed))")
        return self.stack
