"""Privacy amplification by Poisson subsampling, with a guard against misusing it
(Zhu and Wang 2019, arXiv 1906.09393).

If M is (eps, delta)-DP under add/remove and each document enters the sample independently with
probability gamma - fresh coins per query, independent of the data and of the query, hidden from
the adversary - then M o Sample_gamma is

    (log(1 + gamma * (e^eps - 1)),  gamma * delta)-DP        (Balle, Barthe, Gaboardi 2018; tight).

A top-k retrieved set, a relevance threshold or a random cap over a data-dependent candidate set
is *not* such a sample: which documents are kept depends on the other documents and on the
query. ``amplify`` refuses every selection but ``"poisson"``.
"""

from __future__ import annotations

import math
from typing import Literal

from ragleak.accounting.guarantee import Guarantee, PerResponse
from ragleak.errors import RagleakError

Selection = Literal["poisson", "top-k", "threshold", "random-cap"]


class AmplificationError(RagleakError):
    """Amplification by subsampling was asked for a data-dependent selection."""


def _check(selection: str, gamma: float) -> None:
    if selection != "poisson":
        raise AmplificationError(
            f"no amplification for {selection!r} selection: only data-independent Poisson subsampling "
            "(fresh secret coins per document and query) amplifies privacy; top-k retrieval selects "
            "documents by their data"
        )
    if not 0.0 < gamma <= 1.0:
        raise AmplificationError(f"sampling rate gamma must be in (0, 1], got {gamma}")


def poisson_amplified(eps: float, delta: float, gamma: float, selection: Selection = "poisson") -> tuple[float, float]:
    """(log(1 + gamma (e^eps - 1)), gamma * delta) for a Poisson sample of rate gamma."""
    _check(selection, gamma)
    return math.log1p(gamma * math.expm1(eps)), gamma * delta


def amplify(guarantee: Guarantee, gamma: float, selection: Selection = "poisson") -> Guarantee:
    """The per-response guarantee of the mechanism run on a Poisson(gamma) sample of the corpus."""
    _check(selection, gamma)
    scope = guarantee.scope
    if not isinstance(scope, PerResponse):
        raise AmplificationError(f"amplification applies to a per-response guarantee, not {scope.kind!r}")
    eps, delta = poisson_amplified(scope.eps_q, scope.delta_q, gamma, selection)
    amplified = PerResponse(eps_q=eps, delta_q=delta, mechanism="generic", max_queries=scope.max_queries,
                            budget_scope=scope.budget_scope)
    notes = (guarantee.notes + "; " if guarantee.notes else "") + f"amplified by Poisson subsampling, gamma={gamma}"
    return guarantee.model_copy(update={"scope": amplified, "notes": notes})
