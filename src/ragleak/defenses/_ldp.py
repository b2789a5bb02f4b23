"""Local-DP choice of a replacement from a public candidate set (LPRAG's mechanism).

Exponential mechanism over a fixed, public output set C = (c_1..c_K) with a utility
u(x, c) in [0, 1] (sensitivity Delta_u = 1 over any two inputs x, x'):

    P[M(x) = c] = exp(eps * u(x, c) / 2) / sum_j exp(eps * u(x, c_j) / 2)

For any inputs x, x' and output c the numerator ratio is at most e^{eps/2} and the normaliser
ratio at most e^{eps/2}, so P[M(x) = c] <= e^eps P[M(x') = c]: M is eps-LDP for the value x.
The output set must not depend on x (the reference LPRAG code draws candidates from x's own
word2vec neighbours, which gives disjoint supports and an unbounded loss); here C is a fixed
list per entity type, so the original value is never emitted unless it happens to be in C.

The utility is character-trigram Jaccard similarity, so a replacement tends to look like the
original (utility); with eps = 0 the choice is uniform over C.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np


@functools.lru_cache(maxsize=4096)
def trigrams(text: str) -> frozenset[str]:
    padded = f"  {text.lower()} "
    return frozenset(padded[i:i + 3] for i in range(len(padded) - 2))


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of character trigrams, in [0, 1]."""
    ta, tb = trigrams(a), trigrams(b)
    return len(ta & tb) / len(ta | tb) if ta | tb else 1.0


def choice_probabilities(value: str, candidates: Sequence[str], epsilon: float) -> np.ndarray:
    """The exponential mechanism's output distribution over ``candidates`` for input ``value``."""
    if not candidates:
        raise ValueError("the candidate set is empty")
    if epsilon < 0:
        raise ValueError("epsilon must be non-negative")
    scores = epsilon * np.array([similarity(value, c) for c in candidates]) / 2.0
    weights = np.exp(scores - scores.max())
    return weights / weights.sum()


def choose(value: str, candidates: Sequence[str], epsilon: float, rng: np.random.Generator) -> str:
    """Draw one replacement for ``value``: eps-LDP (see the module docstring)."""
    return candidates[int(rng.choice(len(candidates), p=choice_probabilities(value, candidates, epsilon)))]
