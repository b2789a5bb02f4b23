"""Group privacy: from document-level to person-level guarantees (group privacy; for
zCDP, Bun and Steinke 2016, arXiv 1605.02065).

If a mechanism is (eps, delta)-DP for neighbours that differ in one document, and every person
owns at most m documents (enforced by contribution bounding, not merely observed), then for
neighbours that differ in one person it is

    (m * eps,  delta * sum_{j=0}^{m-1} e^{j * eps})-DP

(walk the chain of m single-document neighbours; each step multiplies by e^eps and adds delta).
For Laplace and Gaussian noise the exact person-level mechanism has sensitivity m * Delta, i.e.
noise multiplier divided by m, which ``composition`` uses instead when it can.
"""

from __future__ import annotations

import math


def group_delta(eps: float, delta: float, m: int) -> float:
    """delta * sum_{j<m} e^{j eps}, capped at 1 (a delta of 1 is no guarantee)."""
    if m < 1:
        raise ValueError("m must be >= 1")
    if delta == 0.0:
        return 0.0
    if math.isinf(eps):
        return 1.0
    top = (m - 1) * eps
    if top + math.log(delta) > 0:  # the sum alone exceeds 1
        return 1.0
    if top < 700:
        return min(1.0, delta * math.fsum(math.exp(j * eps) for j in range(m)))
    scaled = math.fsum(math.exp(j * eps - top) for j in range(m))  # avoid overflow of e^{j eps}
    return min(1.0, math.exp(math.log(delta) + top + math.log(scaled)))


def group_epsilon(eps: float, delta: float, m: int) -> tuple[float, float]:
    """Person-level (eps, delta) for a group of m documents: (m * eps, delta * sum_{j<m} e^{j eps})."""
    if m < 1:
        raise ValueError("m must be >= 1")
    return m * eps, group_delta(eps, delta, m)
